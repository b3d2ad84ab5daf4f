"""Reference PyTorch operators of THEORY.md §1-§2 (one module per operator).

Add new operators as one import line plus their names in ``__all__``.
"""

from .causal_ot import (
    CausalOTResult,
    ConvergenceInfo,
    ConvergenceWarning,
    causal_ot_attention,
    causal_ot_exact_mp,
    stream_causal_ot,
)

__all__ = [
    "CausalOTResult",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "causal_ot_attention",
    "causal_ot_exact_mp",
    "stream_causal_ot",
]

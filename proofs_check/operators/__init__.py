"""Reference PyTorch operators of docs/theory.md §1-§2 and §5 (one module per operator).

Add new operators as one import line plus their names in ``__all__``.
"""

from .batch_uot import (
    BatchUOTConvergenceWarning,
    BatchUOTInfo,
    BatchUOTResult,
    batch_unbalanced_sinkhorn,
)
from .biases import (
    LogDistanceBias,
    alibi_bias,
    bias_matrix,
    multi_head_bias,
    softmax_with_bias,
)
from .causal_ot import (
    CausalOTResult,
    ConvergenceInfo,
    ConvergenceWarning,
    causal_ot_attention,
    causal_ot_exact_mp,
    stream_causal_ot,
)

__all__ = [
    "BatchUOTConvergenceWarning",
    "BatchUOTInfo",
    "BatchUOTResult",
    "CausalOTResult",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "LogDistanceBias",
    "alibi_bias",
    "batch_unbalanced_sinkhorn",
    "bias_matrix",
    "causal_ot_attention",
    "causal_ot_exact_mp",
    "multi_head_bias",
    "softmax_with_bias",
    "stream_causal_ot",
]

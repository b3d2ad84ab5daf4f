"""A prior cut off by a sliding-window mask: keys at distances ``d >= span`` get no mass.

Sliding-window attention (Mistral, Gemma 2/3 local layers, Qwen 2 upper layers) masks
every key at distance ``d >= span`` (``b(d) = -inf`` there). The prior of the remaining
keys is the base prior restricted to ``d < span``::

    weight_sum(lo, hi) = base.weight_sum(min(lo, span), min(hi, span)),

so ``S_inf = S_span`` is finite: the prior is summable in the sense of docs/theory.md §5
(docs/theory.md §5) and ``D_l(W) = (S_span - S_W) / S_span`` for every ``l >= span``. The
distant mass stops growing because the distant keys are *masked*, not because the prior
concentrates: nothing beyond ``span`` can be attended to at all.

>>> from priors.encodings import NoPE
>>> enc = SlidingWindow(base=NoPE(), span=4096)
>>> float(enc.window_mass(512, 10**12)) == 512 / 4096
True
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding

__all__ = ["SlidingWindow"]


@dataclass(frozen=True)
class SlidingWindow(Encoding):
    """``base`` prior on ``d < span``, no mass at ``d >= span`` (a sliding-window mask)."""

    base: Encoding | None = None
    span: int = 4096
    name = "sliding-window"

    def __post_init__(self) -> None:
        if not isinstance(self.base, Encoding) or self.base.length_dependent:
            raise ValueError("base must be a stationary Encoding")
        span = self.span
        if isinstance(span, bool) or not isinstance(span, (int, np.integer)) or span < 1:
            raise ValueError(f"span must be an integer >= 1, got {span!r}")
        object.__setattr__(self, "span", int(span))

    @property
    def params(self) -> dict:
        return {"span": self.span, "base": self.base.name, "base_params": self.base.params}

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        inside = np.asarray(self.base.bias(np.minimum(d, self.span - 1)))
        return np.where(d < self.span, inside, -np.inf)

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        return self.base.weight_sum(min(lo, self.span), min(hi, self.span), dps=dps)

    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = S_span``: finitely many keys carry mass."""
        return self.base.weight_sum(0, self.span, dps=dps)

    def classify(self) -> Classification:
        return Classification(
            "summable",
            f"exact beyond l = {self.span}",
            {
                "test": f"finite support: keys at d >= {self.span} are masked (sliding window)",
                "span": self.span,
                "base_class": self.base.classify().label,
                "note": "the distant mass stays bounded because distant keys are masked, "
                "not attended",
            },
        )

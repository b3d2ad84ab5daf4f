"""NoPE: no positional bias, ``b(d) = 0`` (docs/theory.md §5, first row of the table).

The prior is uniform, ``S_m = m``, so ``M_l(W) = W / l`` exactly and the window mass
dilutes; RoPE and any bounded change of the scores fall in the same class (with content
scores ``|s| <= B``: ``M <= e^{2B} W / l``).

>>> from mpmath import mpf
>>> NoPE().window_mass(512, 65536) == mpf(512) / 65536
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = ["NoPE"]


@dataclass(frozen=True)
class NoPE(Encoding):
    """``b(d) = 0``: ``S_m = m``, ``M_l(W) = W/l``, dilutes at rate ``W/l``."""

    name = "nope"
    arb_method = "exact integers S_W = W, T = l - W"

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return np.zeros_like(d)

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        with mpmath.workdps(dps):
            return mpmath.mpf(hi - lo)

    def _weight_sum_arb(self, lo: int, hi: int | None) -> flint.arb | None:
        """``hi - lo`` exactly; not summable (``hi=None``: None)."""
        import flint

        return None if hi is None else flint.arb(hi - lo)

    def classify(self) -> Classification:
        return Classification(
            "dilutes",
            "W/l",
            {"test": "constant prior", "S_m": "m", "window_mass": "W/l exactly"},
        )

    def sympy_summand(self, d: Any) -> Any:
        import sympy

        return sympy.Integer(1) + 0 * d

"""ALiBi: linear bias ``b(d) = -m d``, slope ``m > 0`` (docs/theory.md §5).

Geometric prior: with ``r = e^{-m}``,

    sum_{d=lo}^{hi-1} r^d = e^{-m lo} (1 - e^{-m (hi-lo)}) / (1 - e^{-m}),

evaluated with ``expm1`` so that no digits are lost for small slopes, O(1) in the
length. Summable: ``S_inf = 1/(1 - e^{-m})`` and ``M_inf(W) = 1 - e^{-m W}``; the distant
mass approaches its limit like ``e^{-m l}``.

Per-head slopes (``alibi_slopes``): the reference implementation (Press et al.,
``get_slopes``) uses ``2^(-8 h / H)``, ``h = 1..H``, when ``H`` is a power of two; otherwise
the ``2^floor(log2 H)`` slopes of that power of two followed by every other slope of the
next power of two, ``2^(-4 h / P)`` for odd ``h`` (``P = 2^floor(log2 H)``), until ``H``
slopes. The ``"exp2"`` variant (used by attention-gym's ALiBi score_mod) is ``2^(-8 h / H)``
for ``h = 1..H`` for every ``H``; the two agree when ``H`` is a power of two.

>>> alibi_slopes(8) == [2.0 ** (-k) for k in range(1, 9)]
True
>>> alibi_slopes(6)       # the 4 slopes of H=4, then 2^-1, 2^-3 (odd h of H=8)
[0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
>>> from mpmath import mpf, exp, workdps
>>> with workdps(30):
...     abs(ALiBi(0.5).limit_window_mass(4) - (1 - exp(-2))) < mpf(10) ** -28
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding, positive_param
from priors.harmonic import exact_arb
from priors.precision import guarded

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = ["ALIBI_VARIANTS", "ALiBi", "alibi_slopes"]

ALIBI_VARIANTS = ("reference", "exp2")


def _power_of_two_slopes(n: int) -> list[float]:
    # 2^(-8 h / n), h = 1..n, computed as exact powers of two where 8/n is an integer
    return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]


def alibi_slopes(num_heads: int, *, variant: str = "reference") -> list[float]:
    """Per-head ALiBi slopes (see the module docstring for both variants).

    Parameters
    ----------
    num_heads : int
        ``H >= 1``.
    variant : {"reference", "exp2"}
        ``"reference"``: the interleaved set of the reference implementation;
        ``"exp2"``: ``2^(-8 h / H)`` for every ``H``.
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be an integer >= 1, got {num_heads!r}")
    if variant not in ALIBI_VARIANTS:
        raise ValueError(f"variant must be one of {ALIBI_VARIANTS}, got {variant!r}")
    if variant == "exp2" or num_heads & (num_heads - 1) == 0:
        return _power_of_two_slopes(num_heads)
    p = 2 ** (num_heads.bit_length() - 1)
    extra = _power_of_two_slopes(2 * p)[0::2][: num_heads - p]
    return _power_of_two_slopes(p) + extra


@dataclass(frozen=True)
class ALiBi(Encoding):
    """``b(d) = -slope * d`` with ``slope > 0`` (docs/theory.md §5): summable,
    ``M_inf(W) = 1 - e^{-slope W}``."""

    slope: float = 0.5
    name = "alibi"
    arb_method = (
        "geometric sums in Arb: S_W = expm1(-m W)/expm1(-m), T = e^{-m W} expm1(-m (l-W))"
        "/expm1(-m)"
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "slope", positive_param(self.slope, "slope"))

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return -self.slope * d

    @guarded(10)
    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        m = mpmath.mpf(self.slope)
        # e^{-m lo} (1 - e^{-m k}) / (1 - e^{-m}) = e^{-m lo} expm1(-m k) / expm1(-m)
        return mpmath.exp(-m * lo) * mpmath.expm1(-m * (hi - lo)) / mpmath.expm1(-m)

    def _weight_sum_arb(self, lo: int, hi: int | None) -> flint.arb:
        """The same geometric sums in Arb; ``hi=None``: ``S_inf = -1/expm1(-m)``."""
        m = exact_arb(self.slope)
        den = -(-m).expm1()  # 1 - e^{-m} > 0, no cancellation for small slopes
        if hi is None:
            return 1 / den
        return (-m * lo).exp() * -(-m * (hi - lo)).expm1() / den

    @guarded(10)
    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = 1 / (1 - e^{-slope})``."""
        return -1 / mpmath.expm1(-mpmath.mpf(self.slope))

    @guarded(10)
    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        m = mpmath.mpf(self.slope)
        return -mpmath.exp(-m * w) / mpmath.expm1(-m)

    def classify(self) -> Classification:
        return Classification(
            "summable",
            "e^{-m l}",
            {
                "test": "geometric series, ratio e^{-m} < 1",
                "ratio": math.exp(-self.slope),
                "limit_window_mass": "1 - e^{-m W}",
            },
        )

    def sympy_summand(self, d: Any) -> Any:
        import sympy

        return sympy.exp(-sympy.Rational(self.slope) * d)

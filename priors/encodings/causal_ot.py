"""The causal-OT scale-invariant prior of Theorem 2 (docs/theory.md §4, last row of §5's table).

Under constant scores the prefix-consistent operator's continuum limit draws key ``s``
from row ``t`` with ``ln(t/s) ~ Gamma(shape 1-rho, rate 1)``. Its discrete prior at query
length ``l`` gives key ``j = l - d`` the continuum mass of the cell ``(j-1, j]``::

    e^{b_l(d)} = Q(1-rho, ln(l/j)) - Q(1-rho, ln(l/(j-1)))          (Q(a, inf) = 0),

``Q`` the regularised upper incomplete gamma. These weights sum to ``S_l = 1``, depend
on ``d/l`` only, and near the diagonal ``e^{b_l(d)} ~ (d/l)^-rho / (l Gamma(1-rho))``, i.e.
``b ~ -rho ln d``. The window mass is exactly the continuum one,

    M_l(W) = P(1-rho, -ln(1 - q)),   q = W/l   (P = 1 - Q),

(``priors.scale_invariant.window_mass_continuum``) and ``D_l(W) = Q(1-rho, -ln(1-q))``
(no subtraction): the prior dilutes at the rate
``M ~ q^(1-rho) / Gamma(2-rho)``, i.e. ``l^-(1-rho)`` (``M_inf(W) = 0``).

>>> from mpmath import mpf, workdps
>>> enc = CausalOTPrior(rho=0.0)           # rho = 0: the uniform softmax prior
>>> with workdps(30):
...     abs(enc.window_mass(8, 64) - mpf(8) / 64) < mpf(10) ** -28
True
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding, finite_param
from priors.precision import guarded

__all__ = ["CausalOTPrior"]


def _log_ratio(length: int, k: int) -> mpmath.mpf:
    """``ln(l / (l - k)) = -log1p(-k/l)``; ``inf`` at ``k = l``."""
    if k >= length:
        return mpmath.inf
    return -mpmath.log1p(-mpmath.mpf(k) / length)


@dataclass(frozen=True)
class CausalOTPrior(Encoding):
    """The Theorem-2 prior at balancing strength ``0 <= rho < 1``; needs the length ``l``."""

    rho: float = 0.5
    name = "causal-ot"
    length_dependent = True

    def __post_init__(self) -> None:
        rho = finite_param(self.rho, "rho")
        if not 0 <= rho < 1:
            raise ValueError(f"rho must be in [0, 1), got {self.rho!r}")
        object.__setattr__(self, "rho", rho)

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        # float64: Q on the side where it is small, so the difference loses at most about
        # log10(l) digits (narrow cells far from the diagonal)
        from scipy.special import gammainc, gammaincc

        assert length is not None
        a = 1.0 - self.rho
        j = length - np.floor(d)
        x1 = -np.log1p(-np.floor(d) / length)  # ln(l/j)
        with np.errstate(divide="ignore"):
            x2 = np.where(j > 1, -np.log1p(-(np.floor(d) + 1) / length), np.inf)
        upper = gammaincc(a, x1) - gammaincc(a, x2)
        lower = gammainc(a, x2) - gammainc(a, x1)
        mass = np.where(x1 >= a, upper, lower)
        with np.errstate(divide="ignore"):
            return np.log(mass)

    @guarded(lambda self, lo, hi, length, dps: 15 + len(str(length)))
    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        """``P(X in [x1, x2))``, ``X ~ Gamma(1-rho)``, ``x = ln(l / (l - d))`` at ``d = lo``
        and ``hi``. A range of ``k`` keys near ``d = l/2`` spans ``x2 - x1 ~ 2k/l`` while the
        rounded ``x`` carry an error relative to ``x`` itself, so the difference of the two
        incomplete gammas loses up to ``log10(l)`` digits: the guard has that many more."""
        assert length is not None
        if hi == lo:
            return mpmath.mpf(0)
        a = 1 - mpmath.mpf(self.rho)
        x1 = _log_ratio(length, lo)
        x2 = _log_ratio(length, hi)
        # P(X in [x1, x2)), X ~ Gamma(a): from the smaller side to avoid cancellation
        return mpmath.gammainc(a, x1, x2, regularized=True)

    def window_mass(self, window: int, length: int, *, dps: int = 30) -> mpmath.mpf:
        """``M_l(W) = P(1-rho, -ln(1 - W/l))`` (docs/theory.md §4), equal to ``S_W / S_l``."""
        return super().window_mass(window, length, dps=dps)

    def limit_window_mass(self, window: int, *, dps: int = 30) -> mpmath.mpf:
        """0: the prior dilutes (``M ~ (W/l)^(1-rho) / Gamma(2-rho)``)."""
        return super().limit_window_mass(window, dps=dps)

    def classify(self) -> Classification:
        return Classification(
            "dilutes",
            "l^-(1-rho)",
            {
                "test": "scale-invariant prior (depends on d/l only), docs/theory.md §4",
                "window_mass": "P(1-rho, -ln(1-W/l)) ~ (W/l)^(1-rho)/Gamma(2-rho)",
                "exponent": 1 - self.rho,
            },
        )

"""Log-distance (power-law) prior ``b(d) = -alpha ln(1+d)`` (docs/theory.md §5–§6).

``e^{b(d)} = (1+d)^-alpha``, so ``S_m = H_m^(alpha)``, a generalised harmonic number,
evaluated through Hurwitz zeta (digamma at ``alpha = 1``) by ``priors.harmonic.power_sum``
with the cancellation near ``alpha = 1`` recovered: O(1) in ``m`` with ``dps`` digits.
Summable iff ``alpha > 1`` (p-series test), then ``M_inf(W) = H_W^(alpha) / zeta(alpha)``
and the distant mass ``zeta(alpha, W+1) / zeta(alpha)`` (no subtraction). For
``alpha < 1`` the window mass dilutes like ``l^-(1-alpha)``, at ``alpha = 1`` like
``H_W / H_l ~ ln W / ln l``.

>>> from mpmath import mpf, zeta, workdps
>>> enc = LogDistance(alpha=2.0)
>>> with workdps(30):
...     abs(enc.limit_window_mass(1) - 6 / mpmath.pi ** 2) < mpf(10) ** -28
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding, positive_param
from priors.harmonic import _power_sum, _zeta_tail, power_sum_arb
from priors.precision import guarded

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = ["LogDistance"]


@dataclass(frozen=True)
class LogDistance(Encoding):
    """``b(d) = -alpha ln(1+d)``, ``alpha >= 0``; summable iff ``alpha > 1``."""

    alpha: float = 1.1
    name = "log-distance"
    arb_method = "Hurwitz zeta differences in Arb (harmonic_tail_arb; digamma at alpha = 1)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", positive_param(self.alpha, "alpha", allow_zero=True))

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return -self.alpha * np.log1p(d)

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        return _power_sum(lo, hi, mpmath.mpf(self.alpha), mpmath.mpf(1), dps)

    def _weight_sum_arb(self, lo: int, hi: int | None) -> flint.arb | None:
        """``power_sum_arb`` at ``shift = 1`` to the current Arb working precision;
        ``S_inf = zeta(alpha)`` for ``alpha > 1`` (None otherwise)."""
        import flint

        if hi is None and self.alpha <= 1:
            return None
        return power_sum_arb(lo, hi, self.alpha, shift=1, prec=flint.ctx.prec)

    @guarded(10)
    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = zeta(alpha)`` for ``alpha > 1``, else ``inf``."""
        if self.alpha <= 1:
            return mpmath.inf
        return mpmath.zeta(mpmath.mpf(self.alpha))

    @guarded(10)
    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        # zeta(alpha, W+1), relative to itself however small (Hurwitz zeta alone is
        # accurate to an absolute 10^-dps; it takes minutes at alpha > 2^20)
        return _zeta_tail(w, mpmath.mpf(self.alpha), mpmath.mpf(1), mpmath.mp.dps)

    def classify(self) -> Classification:
        a = self.alpha
        evidence = {"test": "p-series sum (1+d)^-alpha", "exponent": a}
        if a > 1:
            evidence["limit_window_mass"] = "H_W^(alpha) / zeta(alpha)"
            return Classification("summable", "l^-(alpha-1)", evidence)
        if a == 1:
            return Classification("dilutes", "ln W/ln l", evidence)
        return Classification("dilutes", "l^-(1-alpha)", evidence)

    def sympy_summand(self, d: Any) -> Any:
        import sympy

        return (d + 1) ** (-sympy.Rational(self.alpha))

    def _series_brackets(
        self, w: int, n: int, dps: int
    ) -> dict[str, tuple[mpmath.mpf, mpmath.mpf]] | None:
        """docs/theory.md §6 brackets of ``M_l(W) = H_W^(alpha) / H_l^(alpha)`` from
        ``priors.brackets.window_mass_brackets`` (integral test, Euler–Maclaurin; both
        certified), clipped to ``[0, 1]``; ``None`` at ``alpha = 0``, where the brackets
        do not apply (the prior is NoPE's, ``M = W / l`` exactly)."""
        if self.alpha <= 0:
            return None
        from priors.brackets import _window_mass_brackets

        # a mass lies in [0, 1]: clipping keeps the enclosure and makes it informative
        with mpmath.workdps(dps):
            brackets = _window_mass_brackets(w, n, self.alpha, dps)
            return {
                k: (max(lo, mpmath.mpf(0)), min(hi, mpmath.mpf(1)))
                for k, (lo, hi) in brackets.items()
            }

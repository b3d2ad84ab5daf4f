"""KERPLE biases (Chi et al. 2022), THEORY.md §5.

* KERPLE-log ``b(d) = -r1 ln(1 + r2 d)``, ``r1, r2 > 0``: ``e^{b(d)} = r2^-r1 (d + 1/r2)^-r1``,
  a shifted p-series, summed in closed form by ``priors.harmonic.power_sum`` with
  ``shift = 1/r2`` (Hurwitz zeta, O(1) in the length). Summable iff ``r1 > 1``, then
  ``S_inf = r2^-r1 zeta(r1, 1/r2)``.
* KERPLE-power ``b(d) = -r1 d^r2``, ``r1 > 0``, ``0 < r2 <= 2``: always summable (the terms
  decay faster than any power). No closed form: the sum is exact summation of the first
  terms plus a *stated rigorous* treatment of the rest (see ``KerplePower``); nothing is
  silently truncated.

>>> from mpmath import mpf, workdps
>>> enc = KerpleLog(r1=2.0, r2=1.0)          # = log-distance with alpha = 2
>>> with workdps(30):
...     abs(enc.partial_sum(10) - sum(mpf(k) ** -2 for k in range(1, 11))) < mpf(10) ** -28
True
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding, positive_param
from priors.harmonic import power_sum

__all__ = ["KerpleLog", "KerplePower"]


@dataclass(frozen=True)
class KerpleLog(Encoding):
    """``b(d) = -r1 ln(1 + r2 d)``; summable iff ``r1 > 1``."""

    r1: float = 1.5
    r2: float = 1.0
    name = "kerple-log"

    def __post_init__(self) -> None:
        object.__setattr__(self, "r1", positive_param(self.r1, "r1"))
        object.__setattr__(self, "r2", positive_param(self.r2, "r2"))

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return -self.r1 * np.log1p(self.r2 * d)

    def _shift_scale(self, dps: int) -> tuple[mpmath.mpf, mpmath.mpf]:
        with mpmath.workdps(dps + 20):
            r2 = mpmath.mpf(self.r2)
            return 1 / r2, r2 ** (-mpmath.mpf(self.r1))

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        shift, scale = self._shift_scale(dps)
        value = power_sum(lo, hi, self.r1, shift=shift, dps=dps + 5)
        with mpmath.workdps(dps + 5):
            value = scale * value
        with mpmath.workdps(dps):
            return +value

    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = r2^-r1 zeta(r1, 1/r2)`` for ``r1 > 1``, else ``inf``."""
        if self.r1 <= 1:
            return mpmath.inf
        return self._tail_from(0, dps)

    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        shift, scale = self._shift_scale(dps)
        with mpmath.workdps(dps + 10):
            value = scale * mpmath.zeta(mpmath.mpf(self.r1), w + shift)
        with mpmath.workdps(dps):
            return +value

    def classify(self) -> Classification:
        evidence = {"test": "p-series sum (d + 1/r2)^-r1", "exponent": self.r1}
        if self.r1 > 1:
            return Classification("summable", "l^-(r1-1)", evidence)
        if self.r1 == 1:
            return Classification("dilutes", "ln W/ln l", evidence)
        return Classification("dilutes", "l^-(1-r1)", evidence)

    def sympy_summand(self, d: Any) -> Any:
        import sympy

        return (1 + sympy.Rational(self.r2) * d) ** (-sympy.Rational(self.r1))


#: Terms summed one by one before the Euler–Maclaurin tail takes over.
_DIRECT_CAP = 1024
#: Euler–Maclaurin correction terms used for the tail.
_EM_TERMS = 8


@dataclass(frozen=True)
class KerplePower(Encoding):
    """``b(d) = -r1 d^r2``, ``r1 > 0``, ``0 < r2 <= 2``: summable.

    ``f(x) = exp(-r1 x^r2)`` is decreasing, and completely monotone for ``r2 <= 1``
    (``x^r2`` is a Bernstein function). ``sum_{d=lo}^{hi-1} f(d)`` is computed as:

    1. exact summation of ``f(d)`` for ``d = lo, lo+1, ...``; it stops early at ``D``
       once the rigorous tail bound ``sum_{d>=D} f(d) <= f(D) + int_D^inf f`` (``f``
       decreasing) is below ``10^-(dps+3)`` times the sum so far, with
       ``int_a^b f = r1^(-1/r2)/r2 * (Gamma(1/r2, r1 a^r2) - Gamma(1/r2, r1 b^r2))``;
    2. if ``1024`` terms do not reach that, the rest ``[D, hi)`` is Euler–Maclaurin with 8
       correction terms (the derivatives of ``f`` from the exact recurrence
       ``f^(n+1) = sum_i C(n,i) g^(i+1) f^(n-i)``, ``g = -r1 x^r2``) and the remainder bound
       ``|R_p| <= |B_2p|/(2p)! int |f^(2p)|``, which equals
       ``|B_2p|/(2p)! |f^(2p-1)(D) - f^(2p-1)(hi)|`` because ``f^(2p) >= 0`` when ``f`` is
       completely monotone (``r2 <= 1``). For ``r2 > 1`` the tail is the midpoint of the
       integral-test bracket ``[int_D^hi f, f(D) + int_D^hi f]`` (half-width ``f(D)/2``).

    Either way a ``RuntimeWarning`` is issued if the stated bound exceeds ``10^-dps``
    relative: nothing is silently truncated.
    """

    r1: float = 1.0
    r2: float = 0.5
    name = "kerple-power"

    def __post_init__(self) -> None:
        object.__setattr__(self, "r1", positive_param(self.r1, "r1"))
        r2 = positive_param(self.r2, "r2")
        if r2 > 2:
            raise ValueError(f"r2 must be in (0, 2], got {self.r2!r}")
        object.__setattr__(self, "r2", r2)

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return -self.r1 * d**self.r2

    def summation_note(self) -> str:
        return (
            "exact summation while the rigorous tail bound f(D) + int_D^inf f exceeds "
            "10^-(dps+3) relative; beyond 1024 terms Euler-Maclaurin (8 terms) with the "
            "remainder bound |B_2p|/(2p)! |f^(2p-1)(D) - f^(2p-1)(hi)| (r2 <= 1) or the "
            "integral-test bracket (r2 > 1); warns if the bound exceeds 10^-dps relative"
        )

    # -- pieces, all at the current mpmath precision --------------------------------

    @property
    def _r1(self) -> mpmath.mpf:
        return mpmath.mpf(self.r1)  # exact: a float is a dyadic rational

    @property
    def _r2(self) -> mpmath.mpf:
        return mpmath.mpf(self.r2)

    def _f(self, x: Any, r1: Any = None, r2: Any = None) -> mpmath.mpf:
        r1 = self._r1 if r1 is None else r1
        r2 = self._r2 if r2 is None else r2
        return mpmath.exp(-r1 * mpmath.power(x, r2))

    def _integral(self, a: Any, b: Any) -> mpmath.mpf:
        """``int_a^b f`` (``b`` may be ``inf``)."""
        s = 1 / self._r2
        lo = self._r1 * mpmath.mpf(a) ** self._r2
        hi = mpmath.inf if mpmath.isinf(b) else self._r1 * mpmath.mpf(b) ** self._r2
        return self._r1 ** (-s) / self._r2 * mpmath.gammainc(s, lo, hi)

    def _derivatives(self, x: Any, n: int) -> list[mpmath.mpf]:
        """``[f(x), f'(x), ..., f^(n)(x)]`` by the exact recurrence."""
        x = mpmath.mpf(x)
        g = []  # g^(k)(x), k = 1..n
        falling = mpmath.mpf(1)
        for k in range(1, n + 1):
            falling *= self._r2 - (k - 1)
            g.append(-self._r1 * falling * x ** (self._r2 - k))
        f = [self._f(x)]
        for m in range(n):
            f.append(mpmath.fsum(mpmath.binomial(m, i) * g[i] * f[m - i] for i in range(m + 1)))
        return f

    def _sum(self, lo: int, hi: int | None, dps: int) -> mpmath.mpf:
        """``sum_{d=lo}^{hi-1} f(d)`` (``hi=None``: to infinity), see the class docstring."""
        work = dps + 15
        with mpmath.workdps(work):
            eps = mpmath.mpf(10) ** (-(dps + 3))
            acc = mpmath.mpf(0)
            end = hi if hi is not None else math.inf
            d = lo
            cap = lo + (_DIRECT_CAP if self.r2 <= 1 else 5 * _DIRECT_CAP)
            r1, r2 = self._r1, self._r2
            while d < end and d < cap:
                acc += self._f(d, r1, r2)
                d += 1
                if (d - lo) % 64 == 0 and d < end:
                    bound = self._f(d) + self._integral(d, mpmath.inf)
                    if bound <= eps * acc:
                        # omitted tail in [0, bound]: below 10^-(dps+3) relative
                        return acc
            if d >= end:
                return acc
            b = mpmath.inf if hi is None else mpmath.mpf(hi)
            if self.r2 <= 1:
                p = _EM_TERMS
                da = self._derivatives(d, 2 * p)
                db = (
                    [mpmath.mpf(0)] * (2 * p + 1)
                    if hi is None
                    else self._derivatives(hi, 2 * p)
                )
                tail = self._integral(d, b) + (da[0] - db[0]) / 2
                for k in range(1, p + 1):
                    coeff = mpmath.bernoulli(2 * k) / mpmath.factorial(2 * k)
                    tail += coeff * (db[2 * k - 1] - da[2 * k - 1])
                # R_p <= |B_2p|/(2p)! int |f^(2p)| = |B_2p|/(2p)! |f^(2p-1)(D) - f^(2p-1)(hi)|
                # since f^(2p) >= 0 (complete monotonicity, r2 <= 1)
                err = abs(mpmath.bernoulli(2 * p) / mpmath.factorial(2 * p)) * abs(
                    da[2 * p - 1] - db[2 * p - 1]
                )
            else:
                fd = self._f(d)
                tail = self._integral(d, b) + fd / 2
                err = fd / 2
            total = acc + tail
            if err > mpmath.mpf(10) ** (-dps) * total:
                warnings.warn(
                    f"kerple-power sum: the stated tail bound {mpmath.nstr(err / total, 3)} "
                    f"(relative) exceeds 10^-{dps}",
                    RuntimeWarning,
                    stacklevel=5,
                )
            return total

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        value = self._sum(lo, hi, dps)
        with mpmath.workdps(dps):
            return +value

    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = sum_{d>=0} e^{-r1 d^r2}`` (finite)."""
        value = self._sum(0, None, dps)
        with mpmath.workdps(dps):
            return +value

    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        value = self._sum(w, None, dps)
        with mpmath.workdps(dps):
            return +value

    def classify(self) -> Classification:
        return Classification(
            "summable",
            "exp(-r1 l^r2)",
            {"test": "terms e^{-r1 d^r2} <= C (1+d)^-2 (faster than any power)"},
        )

    def sympy_summand(self, d: Any) -> Any:
        import sympy

        return sympy.exp(-sympy.Rational(self.r1) * d ** sympy.Rational(self.r2))

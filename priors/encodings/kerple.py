"""KERPLE biases (Chi et al. 2022), docs/theory.md §5.

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
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import GUARD_DPS, Encoding, FewerDigitsWarning, positive_param
from priors.harmonic import (
    _STEEP_ALPHA,
    _power_sum,
    _zeta_tail,
    exact_arb,
    power_sum_arb,
)
from priors.precision import guarded, rounded

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = ["KerpleLog", "KerplePower"]


@dataclass(frozen=True)
class KerpleLog(Encoding):
    """``b(d) = -r1 ln(1 + r2 d)``; summable iff ``r1 > 1``."""

    r1: float = 1.5
    r2: float = 1.0
    name = "kerple-log"
    arb_method = (
        "r2^-r1 (zeta(r1, lo + 1/r2) - zeta(r1, hi + 1/r2)) in Arb (digamma at r1 = 1)"
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "r1", positive_param(self.r1, "r1"))
        object.__setattr__(self, "r2", positive_param(self.r2, "r2"))

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return -self.r1 * np.log1p(self.r2 * d)

    def _extra_dps(self) -> int:
        # (d + 1/r2)^-r1 and r2^-r1 turn a relative error e of the base into r1 e: the
        # inexact shift 1/r2 needs log10(r1) more digits than the result
        return 5 + max(0, math.ceil(math.log10(self.r1)))

    def _shift_scale(self, dps: int) -> tuple[mpmath.mpf, mpmath.mpf]:
        with mpmath.workdps(dps + 20 + self._extra_dps()):
            r1, r2 = mpmath.mpf(self.r1), mpmath.mpf(self.r2)
            # exp(-r1 ln r2) at a huge r1: mpmath's integer powering takes seconds there
            scale = mpmath.exp(-r1 * mpmath.log(r2)) if r1 > _STEEP_ALPHA else r2 ** (-r1)
            return 1 / r2, scale

    @guarded(lambda self, *args, **kwargs: self._extra_dps())
    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        shift, scale = self._shift_scale(dps)
        return scale * _power_sum(lo, hi, mpmath.mpf(self.r1), shift, dps + self._extra_dps())

    def _weight_sum_arb(self, lo: int, hi: int | None) -> flint.arb | None:
        """``r2^-r1`` times ``power_sum_arb`` at ``shift = 1/r2`` (an exact fraction,
        re-evaluated at each precision) to the current Arb working precision;
        ``S_inf = r2^-r1 zeta(r1, 1/r2)`` for ``r1 > 1`` (None otherwise)."""
        import flint

        if hi is None and self.r1 <= 1:
            return None
        shift = 1 / Fraction(self.r2)  # a float is an exact dyadic rational
        inner = power_sum_arb(lo, hi, self.r1, shift=shift, prec=flint.ctx.prec)
        return exact_arb(self.r2) ** (-exact_arb(self.r1)) * inner

    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = r2^-r1 zeta(r1, 1/r2)`` for ``r1 > 1``, else ``inf``."""
        if self.r1 <= 1:
            return mpmath.inf
        return self._tail_from(0, dps)

    @guarded(lambda self, *args, **kwargs: 10 + self._extra_dps())
    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        shift, scale = self._shift_scale(dps)
        # zeta(r1, W + 1/r2), relative to itself however small (Hurwitz zeta alone is
        # accurate to an absolute 10^-dps; it takes minutes at r1 > 2^20)
        return scale * _zeta_tail(w, mpmath.mpf(self.r1), shift, mpmath.mp.dps)

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


#: Terms summed one by one (at least) before the Euler–Maclaurin tail takes over.
_DIRECT_CAP = 1024
#: Largest number of Euler–Maclaurin correction terms tried.
_EM_MAX_TERMS = 400
#: Guard bits added on top of the measured losses when the tail integral is re-evaluated.
_GUARD_BITS = 40


def _em_remainder_bound(p: int, start: Any, r1: Any, r2: Any) -> mpmath.mpf:
    """Rigorous bound on the Euler–Maclaurin remainder with ``p`` correction terms.

    ``|R_p| <= |B_2p|/(2p)! int_D^inf |f^(2p)|`` and, by Cauchy's estimate on the disc
    ``|z - x| <= x/2`` (inside ``Re z > 0``, where ``|arg z| <= pi/6`` and
    ``Re z^r2 >= (x/2)^r2 cos(r2 pi/6) >= 0`` for ``r2 <= 2``),
    ``|f^(n)(x)| <= n! (2/x)^n e^{-c r1 (x/2)^r2}``, ``c = cos(r2 pi/6)``. With ``x >= D``:
    ``|R_p| <= |B_2p| 4^p e^{-c r1 (D/2)^r2} D^(1-2p) / (2p-1)``.
    """
    d = mpmath.mpf(start)
    c = mpmath.cos(r2 * mpmath.pi / 6)
    decay = mpmath.exp(-c * r1 * (d / 2) ** r2)
    return (
        abs(mpmath.bernoulli(2 * p)) * mpmath.mpf(4) ** p * decay * d ** (1 - 2 * p) / (2 * p - 1)
    )


def _em_terms(start: int, r1: Any, r2: Any, target: Any) -> int:
    """Smallest ``p`` (at most ``_EM_MAX_TERMS``) with ``_em_remainder_bound <= target``,
    searched in the log domain with ``|B_2p| <= (pi^2/3) (2p)!/(2 pi)^(2p)``."""
    with mpmath.workdps(20):
        d = mpmath.mpf(start)
        c = mpmath.cos(mpmath.mpf(r2) * mpmath.pi / 6)
        log_decay = -c * mpmath.mpf(r1) * (d / 2) ** mpmath.mpf(r2)
        log_target = mpmath.log(target)
        for p in range(2, _EM_MAX_TERMS):
            log_bound = (
                mpmath.log(mpmath.pi**2 / 3) + mpmath.loggamma(2 * p + 1)
                - 2 * p * mpmath.log(mpmath.pi) + log_decay + (1 - 2 * p) * mpmath.log(d)
                - mpmath.log(2 * p - 1)
            )
            if log_bound <= log_target:
                return p
    return _EM_MAX_TERMS


@dataclass(frozen=True)
class KerplePower(Encoding):
    """``b(d) = -r1 d^r2``, ``r1 > 0``, ``0 < r2 <= 2``: summable.

    ``f(x) = exp(-r1 x^r2)`` is decreasing. ``sum_{d=lo}^{hi-1} f(d)`` is computed as:

    1. exact summation of ``f(d)`` for ``d = lo, lo+1, ...``; it stops early at ``D``
       once the rigorous tail bound ``sum_{d>=D} f(d) <= f(D) + int_D^inf f`` (``f``
       decreasing) is below ``10^-(dps+3)`` times the sum so far, with
       ``int_a^b f = r1^(-1/r2)/r2 * (Gamma(1/r2, r1 a^r2) - Gamma(1/r2, r1 b^r2))``;
    2. if ``max(1024, 4 dps)`` terms do not reach that, the rest ``[D, hi)`` is
       Euler–Maclaurin with ``p`` correction terms (the derivatives of ``f`` from the
       exact recurrence ``f^(n+1) = sum_i C(n,i) g^(i+1) f^(n-i)``, ``g = -r1 x^r2``),
       ``p`` the smallest for which the rigorous remainder bound of
       ``_em_remainder_bound`` (Cauchy's estimate of ``f^(2p)``, valid for every
       ``0 < r2 <= 2``) is below ``10^-(dps+3)`` relative.

    The tail integral is a difference of two incomplete gammas whose arguments
    ``r1 a^r2`` and ``r1 b^r2`` differ only by the factor ``(b/a)^r2``: for tiny ``r2``
    that gap is far below the working precision, and the difference may cancel. Both
    losses are measured and the integral re-evaluated with that many extra bits.

    Every sum also returns its relative error bound (``relative_error``); the masses'
    ``digits`` (``mass_digits``) are derived from it, and a ``FewerDigitsWarning`` is issued
    when it exceeds ``10^-dps``: nothing is silently truncated.
    """

    r1: float = 1.0
    r2: float = 0.5
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    name = "kerple-power"

    def __post_init__(self) -> None:
        object.__setattr__(self, "r1", positive_param(self.r1, "r1"))
        r2 = positive_param(self.r2, "r2")
        if r2 > 2:
            raise ValueError(f"r2 must be in (0, 2], got {self.r2!r}")
        object.__setattr__(self, "r2", r2)

    @property
    def params(self) -> dict[str, Any]:
        return {"r1": self.r1, "r2": self.r2}

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return -self.r1 * d**self.r2

    def summation_note(self) -> str:
        return (
            "exact summation while the rigorous tail bound f(D) + int_D^inf f exceeds "
            "10^-(dps+3) relative; beyond max(1024, 4 dps) terms Euler-Maclaurin with the "
            "rigorous remainder bound |B_2p| 4^p e^(-c r1 (D/2)^r2) D^(1-2p)/(2p-1) "
            "(Cauchy estimate); digits lowered if the bound exceeds 10^-dps relative"
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
        """``int_a^b f`` (``b`` may be ``inf``) to the current working precision.

        ``b = inf``: one upper incomplete gamma (no cancellation). Finite ``b``: the
        difference of two incomplete gammas (upper or lower, whichever cancels less),
        re-evaluated with the measured number of lost bits (see the class docstring).
        """
        r1, r2 = self._r1, self._r2
        if mpmath.isinf(b):
            s = 1 / r2
            x = r1 * mpmath.power(mpmath.mpf(a), r2)
            return r1 ** (-s) / r2 * mpmath.gammainc(s, x)
        prec = mpmath.mp.prec
        a, b = mpmath.mpf(a), mpmath.mpf(b)
        if a >= b:
            return mpmath.mpf(0)
        # relative gap of the two gamma arguments, (b/a)^r2 - 1, without cancellation
        gap = mpmath.expm1(r2 * mpmath.log(b / a))
        extra = max(0, -mpmath.mag(gap)) + _GUARD_BITS
        for _ in range(6):
            with mpmath.workprec(prec + extra):
                s = 1 / r2
                xa = r1 * mpmath.power(a, r2)
                xb = r1 * mpmath.power(b, r2)
                best = None
                # lower gammas first below the mode s of t^(s-1) e^-t, upper ones above;
                # the second pair only if the first cancels
                kinds = [(0, xb, 0, xa), (xa, None, xb, None)]  # (lower, lower), (upper, upper)
                if xa >= s:
                    kinds.reverse()
                for a1, b1, a2, b2 in kinds:
                    one, two = mpmath.gammainc(s, a1, b1), mpmath.gammainc(s, a2, b2)
                    diff = one - two
                    lost = (
                        math.inf
                        if diff <= 0
                        else max(mpmath.mag(one), mpmath.mag(two)) - mpmath.mag(diff)
                    )
                    if best is None or lost < best[1]:
                        best = (diff, lost)
                    if lost + _GUARD_BITS // 2 <= extra:
                        break
                diff, lost = best
                if lost + _GUARD_BITS // 2 <= extra:
                    value = r1 ** (-s) / r2 * diff
                    break
                extra = (extra * 2 if math.isinf(lost) else int(lost)) + _GUARD_BITS
        else:  # pragma: no cover - the gap bound makes one or two passes enough
            raise ArithmeticError("kerple-power: the tail integral did not converge")
        return +value

    def _tail_integral_bound(self, a: Any) -> mpmath.mpf:
        """An upper bound on ``int_a^inf f``, cheap where it applies.

        With ``X = r1 a^r2`` and ``s = 1/r2``, ``int_a^inf f = r1^-s/r2 Gamma(s, X)`` and
        ``Gamma(s, X) <= X^(s-1) e^-X max(1, X/(X - s + 1))`` for ``X > s - 1``, i.e.
        ``int_a^inf f <= f(a) a^(1-r2)/(r1 r2) max(1, X/(X - s + 1))``; otherwise the
        incomplete gamma itself.
        """
        r1, r2 = self._r1, self._r2
        a = mpmath.mpf(a)
        s = 1 / r2
        x = r1 * mpmath.power(a, r2)
        if x > s - 1:
            factor = max(mpmath.mpf(1), x / (x - s + 1))
            return self._f(a, r1, r2) * a ** (1 - r2) / (r1 * r2) * factor
        return self._integral(a, mpmath.inf)

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
            f.append(mpmath.fsum(math.comb(m, i) * g[i] * f[m - i] for i in range(m + 1)))
        return f

    def _sum(self, lo: int, hi: int | None, dps: int) -> mpmath.mpf:
        """``sum_{d=lo}^{hi-1} f(d)`` (``hi=None``: to infinity), see the class docstring."""
        return self._sum_with_error(lo, hi, dps)[0]

    def relative_error(self, lo: int, hi: int | None, dps: int) -> mpmath.mpf:
        """Rigorous relative error bound of ``_sum(lo, hi, dps)`` (truncation, remainder)."""
        return self._sum_with_error(lo, hi, dps)[1]

    def _sum_with_error(self, lo: int, hi: int | None, dps: int) -> tuple[Any, Any]:
        key = (lo, hi, dps)
        if key not in self._cache:
            self._cache[key] = self._compute_sum(lo, hi, dps)
        value, rel = self._cache[key]
        if rel > mpmath.mpf(10) ** (-dps):
            warnings.warn(
                f"kerple-power sum: the stated error bound {mpmath.nstr(rel, 3)} "
                f"(relative) exceeds 10^-{dps}",
                FewerDigitsWarning,
                stacklevel=5,
            )
        return value, rel

    def _compute_sum(self, lo: int, hi: int | None, dps: int) -> tuple[Any, Any]:
        work = dps + 15
        with mpmath.workdps(work):
            eps = mpmath.mpf(10) ** (-(dps + 3))
            rounding = mpmath.mpf(10) ** (-(dps + 10))  # rounding of the summed terms
            acc = mpmath.mpf(0)
            end = hi if hi is not None else math.inf
            d = lo
            cap = lo + max(_DIRECT_CAP, 4 * dps)
            r1, r2 = self._r1, self._r2
            while d < end and d < cap:
                acc += self._f(d, r1, r2)
                d += 1
                if (d - lo) % 64 == 0 and d < end and self._f(d, r1, r2) <= eps * acc:
                    bound = self._f(d, r1, r2) + self._tail_integral_bound(d)
                    if bound <= eps * acc:
                        # omitted tail in [0, bound]: below 10^-(dps+3) relative
                        return acc, bound / acc + rounding
            if d >= end:
                return acc, rounding
            b = mpmath.inf if hi is None else mpmath.mpf(hi)
            p = _em_terms(d, r1, r2, eps * acc)
            err = _em_remainder_bound(p, d, r1, r2)
            da = self._derivatives(d, 2 * p - 1)
            db = (
                [mpmath.mpf(0)] * (2 * p)
                if hi is None
                else self._derivatives(hi, 2 * p - 1)
            )
            tail = self._integral(d, b) + (da[0] - db[0]) / 2
            for k in range(1, p + 1):
                coeff = mpmath.bernoulli(2 * k) / mpmath.factorial(2 * k)
                tail += coeff * (db[2 * k - 1] - da[2 * k - 1])
            total = acc + tail
            return total, err / total + rounding

    def mass_digits(self, window: int, length: int, dps: int) -> int:
        """Significant digits of ``M``, ``D`` and ``M_inf``: ``dps``, or fewer when a sum's
        rigorous error bound (``relative_error``) exceeds ``10^-dps``; ``M = S/(S+T)`` has
        relative error at most ``e_S + max(e_S, e_T)`` and ``M_inf = S_W/S_inf``
        ``e_S + e_inf``."""
        work = dps + GUARD_DPS
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewerDigitsWarning)
            errs = [
                self.relative_error(0, window, work),
                self.relative_error(window, length, work) if length > window else 0,
                self.relative_error(0, None, work),
            ]
        rel = 2 * max(errs)
        if rel <= mpmath.mpf(10) ** (-dps):
            return dps
        return max(1, min(dps, int(mpmath.floor(-mpmath.log10(rel))) - 1))

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        return rounded(self._sum(lo, hi, dps), dps)

    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = sum_{d>=0} e^{-r1 d^r2}`` (finite)."""
        return rounded(self._sum(0, None, dps), dps)

    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        return rounded(self._sum(w, None, dps), dps)

    def classify(self) -> Classification:
        return Classification(
            "summable",
            "exp(-r1 l^r2)",
            {"test": "terms e^{-r1 d^r2} <= C (1+d)^-2 (faster than any power)"},
        )

    def sympy_summand(self, d: Any) -> Any:
        import sympy

        return sympy.exp(-sympy.Rational(self.r1) * d ** sympy.Rational(self.r2))

"""Generalised harmonic numbers ``H_m^(alpha) = sum_{k=1}^m k^-alpha`` (docs/theory.md §6).

These are the partial sums ``S_m`` of the log-distance prior ``b(d) = -alpha ln(1+d)``:
``S_m = sum_{d<m} (1+d)^-alpha = H_m^(alpha)``.

Closed forms, O(1) in ``m``:

* ``alpha != 1``: ``H_m^(alpha) = zeta(alpha) - zeta(alpha, m+1)`` (Hurwitz zeta);
* ``alpha == 1``: ``H_m = psi(m+1) + gamma_E``.

Near ``alpha = 1`` both zeta values are about ``1/(alpha-1)`` while their difference is
about ``ln m``: the subtraction cancels ``log10(1/|alpha-1|)`` digits. Every function here
measures the cancellation it actually suffered and re-evaluates with that many extra
digits (mpmath) or bits (Arb), so the result carries the requested precision.

Two back ends, one evaluation primitive each, the shifted power sum
``sum_{d=lo}^{hi-1} (d + shift)^-alpha`` (direct terms, zeta or digamma differences, and
a few terms plus a tail bound for huge exponents, all inside the primitive):

* mpmath, ``power_sum``: ``dps`` correct digits (up to a few units in the last place),
  returned as ``mpmath.mpf`` at that precision;
* Arb through python-flint, ``power_sum_arb``: a ball that is guaranteed to contain the
  exact value, with the radius driven below ``2^-prec`` relative.

``harmonic_tail``/``harmonic_number`` and ``harmonic_tail_arb``/``harmonic_number_arb``
are the same sums at ``shift = 1``.

>>> from mpmath import mpf, nsum, inf, workdps
>>> h = harmonic_number(10, 2, dps=30)
>>> with workdps(30):
...     abs(h - sum(mpf(1) / k**2 for k in range(1, 11))) < mpf(10) ** -28
True
>>> with workdps(30):
...     abs(harmonic_tail(4, 10, 2) - sum(mpf(1) / k**2 for k in range(5, 11))) < mpf(10) ** -28
True
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import mpmath

from priors.precision import rounded
from priors.validation import as_count, as_real, check_dps, check_prec

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = [
    "DEFAULT_DPS",
    "exact_arb",
    "harmonic_number",
    "harmonic_number_arb",
    "harmonic_tail",
    "harmonic_tail_arb",
    "power_sum",
    "power_sum_arb",
]

#: Default working precision (decimal digits) of the mpmath back end.
DEFAULT_DPS = 30
#: Guard digits added on top of the requested precision.
_GUARD_DPS = 10
#: Guard bits of the first Arb attempt on top of the requested accuracy.
_GUARD_BITS = 32
#: Direct summation is used below this many terms (exact, and cheaper than two zetas).
_DIRECT_TERMS = 64
#: Exponents from which a steep power sum is tried as a few terms plus a tail bound.
_STEEP_ALPHA = 2**20
#: Terms summed at most in that case (a ratio of consecutive terms of ``e^-1``, as for
#: KERPLE-log at ``r1 = 1/r2``, needs about ``ln(2) prec`` of them).
_STEEP_TERMS = 4096
#: Leading decimal zeros of ``(lo + shift)^-alpha`` up to which a sum far below 1 is
#: taken from mpmath's Hurwitz zeta at that many more digits; beyond, Euler–Maclaurin or
#: a few terms plus a tail bound (accurate relative to the sum itself) are tried first.
_ZETA_ZEROS_MAX = 200
#: Euler–Maclaurin corrections at most for a huge exponent whose terms fall slowly (each
#: gains about ``2 log10(2 pi (lo + q) / a)`` digits: 1.6 or more where it is used).
_EM_TERMS = 800


def power_sum(
    lo: int, hi: int, alpha: object, *, shift: object = 1, dps: int = DEFAULT_DPS
) -> mpmath.mpf:
    """Shifted power sum ``sum_{d=lo}^{hi-1} (d + shift)^-alpha`` without cancellation.

    ``zeta(alpha, lo+shift) - zeta(alpha, hi+shift)`` (Hurwitz), or
    ``psi(hi+shift) - psi(lo+shift)`` at ``alpha == 1``; direct summation for at most
    64 terms. The digits lost to the subtraction (about ``log10(1/|alpha-1|)`` near
    ``alpha = 1``, more when ``hi`` is close to ``lo``) are measured and recovered by a
    re-evaluation at higher precision, so the result has ``dps`` significant digits.

    With ``shift = 1`` this is the log-distance prior mass on distances ``lo <= d < hi``
    (docs/theory.md §5–§6); KERPLE-log ``(1 + r2 d)^-r1 = r2^-r1 (d + 1/r2)^-r1`` uses
    ``shift = 1/r2``.

    Parameters
    ----------
    lo, hi : int
        ``0 <= lo <= hi <= 1e18``; ``lo == hi`` gives 0.
    alpha : real
        Any finite exponent (the sum is finite for finite ``hi``).
    shift : real
        ``shift > 0`` (so that every base ``d + shift`` is positive).
    dps : int
        Decimal digits of the result.
    """
    lo = as_count(lo, "lo")
    hi = as_count(hi, "hi")
    if hi < lo:
        raise ValueError(f"hi must be >= lo, got lo={lo}, hi={hi}")
    dps = check_dps(dps)
    return _power_sum(lo, hi, as_real(alpha, "alpha"), as_real(shift, "shift", minimum=0), dps)


def _power_sum(lo: int, hi: int, a: mpmath.mpf, q: mpmath.mpf, dps: int) -> mpmath.mpf:
    """``power_sum`` for arguments validated by the caller (``0 <= lo <= hi``, ``a`` and
    ``q > 0`` exact ``mpf``); ``dps`` may exceed ``DPS_MAX`` by the caller's guard digits.

    mpmath's Hurwitz zeta meets an absolute tolerance (``2^-prec``: fixed-point partial
    sums, Euler–Maclaurin stopped on the size of a correction), so a zeta difference far
    below 1 is computed with as many more digits as its leading zeros
    (``_zeta_zeros``), or by ``_relative_power_sum`` where those are too many."""
    if hi == lo:
        return rounded(mpmath.mpf(0), dps)
    work = dps + _GUARD_DPS
    if a > _STEEP_ALPHA:
        return rounded(_huge_exponent_sum(lo, hi, a, q, work), dps)
    if hi - lo > _DIRECT_TERMS:
        zeros = _zeta_zeros(a, lo + q)
        if zeros > _ZETA_ZEROS_MAX:
            value = _relative_power_sum(lo, hi, a, q, work)
            if value is not None:
                return rounded(value, dps)
        work += zeros
    for _ in range(8):
        with mpmath.workdps(work):
            if hi - lo <= _DIRECT_TERMS:
                value = mpmath.fsum((d + q) ** (-a) for d in range(lo, hi))
                loss = 0.0
            else:
                if a == 1:
                    first = mpmath.digamma(lo + q)
                    second = mpmath.digamma(hi + q)
                    value = second - first
                else:
                    first = mpmath.zeta(a) if lo == 0 and q == 1 else mpmath.zeta(a, lo + q)
                    second = mpmath.zeta(a, hi + q)
                    value = first - second
                # zeta's absolute tolerance counts from 1: a value below 1 loses digits too
                scale = max(abs(first), abs(second), 1)
                # digits cancelled by the subtraction (all of them if it came out 0)
                loss = float(mpmath.log10(scale / abs(value))) if value != 0 else float(work)
        if work >= dps + _GUARD_DPS + loss:
            break
        work = dps + _GUARD_DPS + math.ceil(loss) + 2
    return rounded(value, dps)


def _exponent_digits(a: mpmath.mpf) -> int:
    """``max(0, ceil(log10 a))`` for an exponent ``a > 0`` of any size (an ``mpf`` beyond
    the float64 range included): the extra digits ``exp(-a ln x)`` needs in ``ln x``."""
    with mpmath.workdps(20):
        return max(0, int(mpmath.ceil(mpmath.log10(a))))


def _zeta_zeros(a: mpmath.mpf, x: mpmath.mpf) -> int:
    """Leading decimal zeros of ``x^-a``, ``max(0, ceil(a log10 x))``: the digits mpmath's
    Hurwitz zeta, accurate to an absolute ``10^-dps``, loses on a sum
    ``sum_{d>=lo} (d + q)^-a`` (``x = lo + q``) that is at least its first term ``x^-a``."""
    if a <= 0 or x <= 1:
        return 0
    with mpmath.workdps(20):
        return max(0, math.ceil(float(a * mpmath.log10(x))))


def _relative_power_sum(
    lo: int, hi: int | None, a: mpmath.mpf, q: mpmath.mpf, work: int
) -> mpmath.mpf | None:
    """``sum_{k=lo}^{hi-1} (k + q)^-a`` (``hi=None``: to infinity) for ``a > 1``, accurate
    to ``work`` digits relative to the sum itself: Euler–Maclaurin where the terms fall
    slowly (``_slow_power_sum``, tried first when ``a < lo + q``), else the first terms
    plus a tail bound (``_steep_power_sum``); ``None`` where neither converges."""
    methods = [_slow_power_sum, _steep_power_sum]
    if a >= lo + q:
        methods.reverse()
    value = methods[0](lo, hi, a, q, work)
    if value is None:
        value = methods[1](lo, hi, a, q, work)
    return value


def _zeta_tail(lo: int, a: mpmath.mpf, q: mpmath.mpf, work: int) -> mpmath.mpf:
    """``sum_{d>=lo} (d + q)^-a = zeta(a, lo + q)`` for ``a > 1`` and ``q > 0`` validated by
    the caller, at ``work`` significant digits (the current mpmath precision is not used):
    ``_huge_exponent_sum`` for ``a > 2^20``; mpmath's Hurwitz zeta with the leading zeros
    of a value far below 1 (``_zeta_zeros``) added to its precision, or
    ``_relative_power_sum`` where those are more than ``_ZETA_ZEROS_MAX``. The limits of
    summable priors (docs/theory.md §5) use it."""
    if a > _STEEP_ALPHA:
        return _huge_exponent_sum(lo, None, a, q, work)
    zeros = _zeta_zeros(a, lo + q)
    if zeros > _ZETA_ZEROS_MAX:
        value = _relative_power_sum(lo, None, a, q, work)
        if value is not None:
            return value
    with mpmath.workdps(work + zeros):
        return mpmath.zeta(a, lo + q)


def _huge_exponent_sum(lo: int, hi: int | None, a: mpmath.mpf, q: mpmath.mpf, work: int) -> Any:
    """``sum_{k=lo}^{hi-1} (k + q)^-a`` (``hi=None``: to infinity) for ``a > 2^20``, at
    ``work`` digits, where Hurwitz zeta takes minutes (mpmath raises ``k^-a`` to an
    integer power like ``1e308`` term by term): a few terms directly, else, by how fast the
    terms fall (a ratio ``~ e^(-a / (lo + q))``), Euler–Maclaurin where they fall slowly
    (``_slow_power_sum``, ``a < lo + q``) or the first terms plus a tail bound where they
    fall fast (``_steep_power_sum``), each tried after the other fails; ``ValueError``
    where neither converges."""
    if hi is not None and hi - lo <= _DIRECT_TERMS:
        extra = 8 + _exponent_digits(a)
        with mpmath.workdps(work + extra):
            return mpmath.fsum(mpmath.exp(-a * mpmath.log(d + q)) for d in range(lo, hi))
    value = _relative_power_sum(lo, hi, a, q, work)
    if value is None:
        raise ValueError(
            f"the power sum at alpha = {mpmath.nstr(a, 17)} and shift = {mpmath.nstr(q, 17)} "
            f"is out of reach: its terms fall too slowly for {_STEEP_TERMS} of them plus a "
            "tail bound and too fast for Euler-Maclaurin, and Hurwitz zeta does not finish "
            "at such an exponent"
        )
    return value


def _slow_power_sum(lo: int, hi: int | None, a: Any, q: Any, work: int) -> Any:
    """``sum_{k=lo}^{hi-1} (k + q)^-a`` by Euler–Maclaurin on ``f(x) = (x + q)^-a`` over
    ``[lo, hi]``, for a huge exponent whose terms fall slowly (``a / (lo + q)`` below
    ``2 pi``, where the corrections shrink): the integral, ``(f(lo) - f(hi)) / 2`` and
    ``B_2k / (2k)! (f^(2k-1)(hi) - f^(2k-1)(lo))`` until a correction is below
    ``10^-work`` of the sum; ``f`` is completely monotone, so the remainder is smaller
    than that first omitted correction. Differences of nearly equal values are formed
    with ``expm1`` of ``log1p((hi - lo) / (lo + q))``. ``None`` if ``_EM_TERMS``
    corrections do not get there."""
    extra = 8 + _exponent_digits(a)
    with mpmath.workdps(work + extra):
        x0 = lo + q
        f0 = mpmath.exp(-a * mpmath.log(x0))

        def drop(power: Any) -> Any:  # 1 - ((hi + q) / (lo + q))^-power, 1 to infinity
            if hi is None:
                return mpmath.mpf(1)
            return -mpmath.expm1(-power * mpmath.log1p((hi - lo) / x0))

        total = x0 * f0 * drop(a - 1) / (a - 1) + f0 * drop(a) / 2
        derivative = f0 * a / x0  # |f^(2k-1)(lo)| = (a)_(2k-1) x0^(-a-2k+1)
        for k in range(1, _EM_TERMS + 1):
            term = mpmath.bernoulli(2 * k) / mpmath.factorial(2 * k) * derivative
            term *= drop(a + 2 * k - 1)
            total += term
            if abs(term) <= abs(total) * mpmath.mpf(10) ** (-work):
                return total
            derivative *= (a + 2 * k - 1) * (a + 2 * k) / x0**2
    return None


def _steep_power_sum(
    lo: int, hi: int | None, a: mpmath.mpf, q: mpmath.mpf, work: int
) -> mpmath.mpf | None:
    """``sum_{k=lo}^{hi-1} (k + q)^-a`` (``hi=None``: to infinity) for a huge exponent
    ``a > 1``: the first terms plus half the integral-test bound of the rest
    (``[0, (K-1+q)^(1-a)/(a-1)]``), once that bound is below ``10^-work`` of the first
    term; ``None`` if ``_STEEP_TERMS`` terms do not get there. Each term is
    ``exp(-a ln(k + q))`` with ``log10(a)`` more digits (mpmath's integer powering of an
    exponent like ``1e308`` takes seconds per term); Hurwitz zeta at such exponents is
    as slow. Inputs validated by the caller."""
    end = math.inf if hi is None else hi
    extra = 8 + _exponent_digits(a)
    with mpmath.workdps(work + extra):
        def power(x: Any, e: Any) -> Any:
            return mpmath.exp(-e * mpmath.log(x))

        first = power(lo + q, a)
        partial = mpmath.mpf(0)
        for k in range(lo, min(end, lo + _STEEP_TERMS)):
            partial += first if k == lo else power(k + q, a)
            if k + 1 >= end:
                return +partial
            bound = power(k + q, a - 1) / (a - 1)
            if bound <= first * mpmath.mpf(10) ** (-work):
                return partial + bound / 2
    return None


def harmonic_tail(lo: int, hi: int, alpha: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Tail sum ``sum_{k=lo+1}^{hi} k^-alpha = H_hi^(alpha) - H_lo^(alpha)`` without cancellation.

    The log-distance prior mass ``S_hi - S_lo`` on the distances ``lo <= d < hi``
    (docs/theory.md §5–§6); ``power_sum`` with ``shift = 1``.
    """
    return power_sum(lo, hi, alpha, shift=1, dps=dps)


def harmonic_number(m: int, alpha: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Generalised harmonic number ``H_m^(alpha) = sum_{k=1}^m k^-alpha`` (docs/theory.md §6).

    ``zeta(alpha) - zeta(alpha, m+1)`` for ``alpha != 1`` and ``psi(m+1) + gamma_E`` for
    ``alpha == 1``, with the cancellation near ``alpha = 1`` recovered (see
    ``harmonic_tail``). O(1) in ``m``; ``dps`` significant digits.

    >>> from mpmath import workdps, euler, log
    >>> with workdps(30):
    ...     abs(harmonic_number(10**12, 1) - (log(10**12) + euler)) < 1e-12
    True
    """
    m = as_count(m, "m")
    return harmonic_tail(0, m, alpha, dps=dps)


# ----------------------------------------------------------------------------- Arb back end


def exact_arb(value: object) -> flint.arb:
    """``value`` as an Arb ball without rounding: ``arb`` as is, ``mpf``/``int``/``float``
    exactly (they are dyadic rationals), a ``Fraction`` as the quotient of its exact
    numerator and denominator at the current working precision (so that it tightens when
    the precision is raised), anything else through its decimal string."""
    import flint

    if isinstance(value, flint.arb):
        return value
    if isinstance(value, mpmath.mpf):
        # exact at any working precision (a product by 2**exp would be rounded to it);
        # the raw tuple, because ``mpf.man_exp`` drops the sign
        sign, man, exp, _bc = value._mpf_
        return flint.arb((-int(man) if sign else int(man), int(exp)))
    if isinstance(value, numbers.Integral):
        return flint.arb(int(value))
    if isinstance(value, float):
        # a float is an exact dyadic rational: convert without rounding
        return flint.arb(value)
    if isinstance(value, Fraction):
        return flint.arb(value.numerator) / flint.arb(value.denominator)
    return flint.arb(str(value))


def _steep_power_sum_arb(
    lo: int, hi: int | None, alpha: flint.arb, shift: object, prec: int
) -> flint.arb | None:
    """``sum_{k=lo}^{hi-1} (k + shift)^-alpha`` (``hi=None``: to infinity) for a huge
    exponent, where the first terms carry everything: a ball, or ``None`` if it does not
    apply (``alpha < 2^20``, or 64 terms do not bring the tail below ``2^-(prec+16)``).

    With ``K`` terms summed, the rest is in ``[0, (K - 1 + shift)^(1-alpha) / (alpha-1)]``
    (integral test: the terms decrease), put into the ball as its radius. Arb's Hurwitz
    zeta at such exponents (``alpha = 1e308``) does not finish. ``shift`` is taken as in
    ``exact_arb`` at the raised precision of the terms: an inexact shift (``1/r2`` of
    KERPLE-log, a ``Fraction``) rounded at the caller's precision would carry a relative
    error that ``alpha`` multiplies.
    """
    import flint

    if not (alpha.is_exact() and alpha > _STEEP_ALPHA):
        return None
    end = hi if hi is not None else math.inf
    if end <= lo:
        return flint.arb(0)
    size = float(alpha.mid())
    if not math.isfinite(size):
        return None
    # x^-alpha = exp(-alpha ln x) needs ln x to log2(alpha) more bits than the result
    with flint.ctx.workprec(prec + 64 + math.ceil(math.log2(size))):
        shift = exact_arb(shift)
        if not shift > 0:
            return None
        first = flint.arb(lo) + shift
        partial = flint.arb(0)
        k = lo
        while k < end and k < lo + _STEEP_TERMS:
            partial += (flint.arb(k) + shift) ** (-alpha)
            k += 1
            if k >= end:
                return partial
            base = flint.arb(k - 1) + shift
            bound = base ** (1 - alpha) / (alpha - 1)
            # relative size of the omitted tail against the first term
            if (bound / first ** (-alpha)).upper() < flint.arb(2) ** (-(prec + 16)):
                return partial + bound / 2 + flint.arb(0, 1) * (bound / 2)
    return None


def _power_sum_ball(lo: int, hi: int | None, a: flint.arb, shift: object) -> flint.arb:
    """``sum_{d=lo}^{hi-1} (d + shift)^-a`` (``hi=None``: to infinity) at the current Arb
    working precision: direct terms up to 64 of them, digamma differences at ``a = 1``
    exactly, Hurwitz zeta differences otherwise (``zeta(a, lo + shift)`` alone to
    infinity). An integer ``shift`` gives exact integer bases ``d + shift``."""
    import flint

    q = exact_arb(shift)

    def base(d: int) -> flint.arb:
        return flint.arb(d + shift) if isinstance(shift, int) else flint.arb(d) + q

    if hi is not None and hi - lo <= _DIRECT_TERMS:
        return sum((base(d) ** (-a) for d in range(lo, hi)), flint.arb(0))
    if hi is not None and a.is_exact() and a == 1:
        return base(hi).digamma() - base(lo).digamma()
    first = a.zeta() if lo == 0 and shift == 1 else a.zeta(base(lo))
    return first if hi is None else first - a.zeta(base(hi))


def power_sum_arb(
    lo: int, hi: int | None, alpha: object, *, shift: object = 1, prec: int = 128
) -> flint.arb:
    """Ball enclosure of the shifted power sum ``sum_{d=lo}^{hi-1} (d + shift)^-alpha``
    (Arb, python-flint); ``hi=None`` sums to infinity (``zeta(alpha, lo + shift)``, for
    ``alpha > 1``).

    The same sum as ``power_sum``: direct summation for at most 64 terms, digamma
    differences at ``alpha = 1``, Hurwitz zeta differences otherwise, and for a huge
    exponent (``alpha > 2^20``, where Arb's zeta does not finish) the first terms plus a
    rigorous tail bound. ``alpha`` and ``shift`` may be ``arb`` balls (then the result
    encloses the sum for every point of the balls; an ``alpha`` ball must not contain 1
    unless it is exactly 1), floats or ``mpf`` (taken exactly), a ``Fraction`` (``1/r2``
    of KERPLE-log, re-evaluated at each precision) or decimal strings. The working
    precision starts at ``prec + 32`` bits and is doubled until the ball has at least
    ``prec`` bits of relative accuracy (or the width of an input ball limits it).

    With ``shift = 1`` this is the log-distance prior mass on ``lo <= d < hi``
    (docs/theory.md §5–§6); KERPLE-log is ``r2^-r1`` times the sum at ``shift = 1/r2``.
    """
    import flint

    lo = as_count(lo, "lo")
    if hi is not None:
        hi = as_count(hi, "hi")
        if hi < lo:
            raise ValueError(f"hi must be >= lo, got lo={lo}, hi={hi}")
    prec = check_prec(prec)
    if hi is None and not exact_arb(alpha) > 1:
        raise ValueError(f"alpha must be > 1 to sum to infinity, got {alpha!r}")
    if isinstance(shift, flint.arb):
        if not shift > 0:
            raise ValueError(f"shift must be > 0, got {shift}")
    else:
        as_real(shift, "shift", minimum=0)
    if hi == lo:
        return flint.arb(0)
    work = prec + _GUARD_BITS
    steep = _steep_power_sum_arb(lo, hi, exact_arb(alpha), shift, work)
    if steep is not None and steep.rel_accuracy_bits() >= prec:
        return steep
    exact_input = True
    for _ in range(12):
        with flint.ctx.workprec(work):
            a = exact_arb(alpha)
            exact_input = a.rad() == 0
            value = _power_sum_ball(lo, hi, a, shift)
        if value.is_finite() and value.rel_accuracy_bits() >= prec:
            return value
        if not exact_input and value.is_finite() and work > 4 * prec + 256:
            return value  # accuracy limited by the width of alpha itself
        if a > _STEEP_ALPHA and not value.is_finite():
            # Arb's zeta at such exponents costs ~10x per doubling and stays [+/- inf]
            shown = exact_arb(shift).mid().str(17)
            raise ValueError(
                f"no certified enclosure of the power sum at alpha = {alpha} and shift = "
                f"{shown}: its terms fall too slowly for {_STEEP_TERMS} of them plus a tail "
                "bound to carry it, and Arb's Hurwitz zeta gives none at such an exponent"
            )
        work *= 2
    if not value.is_finite():
        raise ValueError(f"alpha ball {alpha} contains 1: the difference is undefined there")
    return value


def harmonic_tail_arb(lo: int, hi: int, alpha: object, *, prec: int = 128) -> flint.arb:
    """Ball enclosure of ``sum_{k=lo+1}^{hi} k^-alpha`` (Arb, python-flint).

    ``power_sum_arb`` with ``shift = 1`` (see there for ``alpha`` and ``prec``): the
    working precision is raised until the result has at least ``prec`` bits of relative
    accuracy (or the input ball's own width limits it).
    """
    as_count(lo, "lo")
    hi = as_count(hi, "hi")
    return power_sum_arb(lo, hi, alpha, shift=1, prec=prec)


def harmonic_number_arb(m: int, alpha: object, *, prec: int = 128) -> flint.arb:
    """Ball enclosure of ``H_m^(alpha)`` (Arb). See ``harmonic_tail_arb``."""
    m = as_count(m, "m")
    return harmonic_tail_arb(0, m, alpha, prec=prec)

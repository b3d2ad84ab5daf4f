"""Generalised harmonic numbers ``H_m^(alpha) = sum_{k=1}^m k^-alpha`` (THEORY.md §6).

These are the partial sums ``S_m`` of the log-distance prior ``b(d) = -alpha ln(1+d)``:
``S_m = sum_{d<m} (1+d)^-alpha = H_m^(alpha)``.

Closed forms, O(1) in ``m``:

* ``alpha != 1``: ``H_m^(alpha) = zeta(alpha) - zeta(alpha, m+1)`` (Hurwitz zeta);
* ``alpha == 1``: ``H_m = psi(m+1) + gamma_E``.

Near ``alpha = 1`` both zeta values are about ``1/(alpha-1)`` while their difference is
about ``ln m``: the subtraction cancels ``log10(1/|alpha-1|)`` digits. Every function here
measures the cancellation it actually suffered and re-evaluates with that many extra
digits (mpmath) or bits (Arb), so the result carries the requested precision.

Two back ends:

* mpmath (``harmonic_number``, ``harmonic_tail``): ``dps`` correct digits (up to a few
  units in the last place), returned as ``mpmath.mpf`` at that precision;
* Arb through python-flint (``harmonic_number_arb``, ``harmonic_tail_arb``): a ball that
  is guaranteed to contain the exact value, with the radius driven below ``2^-prec``
  relative.

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
from typing import TYPE_CHECKING, Any

import mpmath

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = [
    "DEFAULT_DPS",
    "MAX_LENGTH",
    "as_alpha",
    "as_count",
    "exact_arb",
    "harmonic_number",
    "harmonic_number_arb",
    "harmonic_tail",
    "harmonic_tail_arb",
    "power_sum",
]

#: Default working precision (decimal digits) of the mpmath back end.
DEFAULT_DPS = 30
#: Largest count ``m`` accepted (the toolkit is specified up to ``n = 1e15``; beyond
#: ``1e18`` float-valued callers could no longer express every integer).
MAX_LENGTH = 10**18
#: Guard digits added on top of the requested precision.
_GUARD_DPS = 10
#: Direct summation is used below this many terms (exact, and cheaper than two zetas).
_DIRECT_TERMS = 64


def as_count(value: object, name: str, *, minimum: int = 0) -> int:
    """Validate a nonnegative integer count (a length or a window) named ``name``.

    Accepts Python and numpy integers and integral floats (``1e15``); raises
    ``ValueError`` naming the argument otherwise.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        out = int(value)
    elif isinstance(value, (float, mpmath.mpf)) or isinstance(value, numbers.Real):
        fv = float(value)
        if not math.isfinite(fv) or fv != math.floor(fv):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        out = int(mpmath.mpf(value)) if isinstance(value, mpmath.mpf) else int(fv)
    else:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if out < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {out}")
    if out > MAX_LENGTH:
        raise ValueError(f"{name} must be <= {MAX_LENGTH:.0e}, got {out}")
    return out


def as_alpha(value: object, name: str = "alpha") -> mpmath.mpf:
    """Validate a finite real exponent; returned as an exact ``mpf`` (floats are exact)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    try:
        out = mpmath.mpmathify(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a finite real number, got {value!r}") from exc
    if not isinstance(out, mpmath.mpf) or not mpmath.isfinite(out):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return out


def _check_dps(dps: object) -> int:
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral) or int(dps) < 5:
        raise ValueError(f"dps must be an integer >= 5, got {dps!r}")
    return int(dps)


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
    (THEORY.md §5–§6); KERPLE-log ``(1 + r2 d)^-r1 = r2^-r1 (d + 1/r2)^-r1`` uses
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
    dps = _check_dps(dps)
    a = as_alpha(alpha)
    q = as_alpha(shift, "shift")
    if q <= 0:
        raise ValueError(f"shift must be > 0, got {shift!r}")
    if hi == lo:
        with mpmath.workdps(dps):
            return +mpmath.mpf(0)
    work = dps + _GUARD_DPS
    if a > _STEEP_ALPHA and hi - lo > _DIRECT_TERMS:
        steep = _steep_power_sum(lo, hi, a, q, work)
        if steep is not None:
            with mpmath.workdps(dps):
                return +steep
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
                scale = max(abs(first), abs(second))
                # digits cancelled by the subtraction (all of them if it came out 0)
                loss = float(mpmath.log10(scale / abs(value))) if value != 0 else float(work)
        if work >= dps + _GUARD_DPS + loss:
            break
        work = dps + _GUARD_DPS + math.ceil(loss) + 2
    with mpmath.workdps(dps):
        return +value


def _steep_power_sum(lo: int, hi: int, a: mpmath.mpf, q: mpmath.mpf, work: int) -> Any:
    """The first terms of a power sum with a huge exponent, plus half the integral-test
    bound of the rest (``[0, (K-1+q)^(1-a)/(a-1)]``), once that bound is below
    ``10^-work`` of the first term; ``None`` if 64 terms do not get there."""
    with mpmath.workdps(work):
        first = (lo + q) ** (-a)
        partial = mpmath.mpf(0)
        for k in range(lo, min(hi, lo + _DIRECT_TERMS)):
            partial += (k + q) ** (-a)
            bound = (k + q) ** (1 - a) / (a - 1)
            if bound <= first * mpmath.mpf(10) ** (-work):
                return partial + bound / 2
    return None


def harmonic_tail(lo: int, hi: int, alpha: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Tail sum ``sum_{k=lo+1}^{hi} k^-alpha = H_hi^(alpha) - H_lo^(alpha)`` without cancellation.

    The log-distance prior mass ``S_hi - S_lo`` on the distances ``lo <= d < hi``
    (THEORY.md §5–§6); ``power_sum`` with ``shift = 1``.
    """
    return power_sum(lo, hi, alpha, shift=1, dps=dps)


def harmonic_number(m: int, alpha: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Generalised harmonic number ``H_m^(alpha) = sum_{k=1}^m k^-alpha`` (THEORY.md §6).

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


def exact_arb(alpha: object) -> flint.arb:
    """``alpha`` as an Arb ball without rounding: ``arb`` as is, ``mpf``/``int``/``float``
    exactly (they are dyadic rationals), anything else through its decimal string."""
    import flint

    if isinstance(alpha, flint.arb):
        return alpha
    if isinstance(alpha, mpmath.mpf):
        # exact at any working precision (a product by 2**exp would be rounded to it);
        # the raw tuple, because ``mpf.man_exp`` drops the sign
        sign, man, exp, _bc = alpha._mpf_
        return flint.arb((-int(man) if sign else int(man), int(exp)))
    if isinstance(alpha, numbers.Integral):
        return flint.arb(int(alpha))
    if isinstance(alpha, float):
        # a float is an exact dyadic rational: convert without rounding
        return flint.arb(alpha)
    return flint.arb(str(alpha))


#: Exponents from which a steep power sum is tried as a few terms plus a tail bound.
_STEEP_ALPHA = 2**20
#: Terms summed at most in that case.
_STEEP_TERMS = 64


def steep_power_sum_arb(
    lo: int, hi: int | None, alpha: flint.arb, shift: flint.arb, prec: int
) -> flint.arb | None:
    """``sum_{k=lo}^{hi-1} (k + shift)^-alpha`` (``hi=None``: to infinity) for a huge
    exponent, where the first terms carry everything: a ball, or ``None`` if it does not
    apply (``alpha < 2^20``, or 64 terms do not bring the tail below ``2^-(prec+16)``).

    With ``K`` terms summed, the rest is in ``[0, (K - 1 + shift)^(1-alpha) / (alpha-1)]``
    (integral test: the terms decrease), put into the ball as its radius. Arb's Hurwitz
    zeta at such exponents (``alpha = 1e308``) does not finish.
    """
    import flint

    if not (alpha.is_exact() and alpha > _STEEP_ALPHA and shift > 0):
        return None
    end = hi if hi is not None else math.inf
    if end <= lo:
        return flint.arb(0)
    size = float(alpha.mid())
    if not math.isfinite(size):
        return None
    # x^-alpha = exp(-alpha ln x) needs ln x to log2(alpha) more bits than the result
    with flint.ctx.workprec(prec + 64 + math.ceil(math.log2(size))):
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


def harmonic_tail_arb(lo: int, hi: int, alpha: object, *, prec: int = 128) -> flint.arb:
    """Ball enclosure of ``sum_{k=lo+1}^{hi} k^-alpha`` (Arb, python-flint).

    Same formula as ``harmonic_tail``. ``alpha`` may be an ``arb`` (then the result
    encloses the sum for every exponent in the ball; the ball must not contain 1 unless
    it is exactly 1), a float (taken exactly), an ``mpf`` (exactly) or a decimal string.
    The working precision is raised until the result has at least ``prec`` bits of
    relative accuracy (or the input ball's own width limits it).
    """
    import flint

    lo = as_count(lo, "lo")
    hi = as_count(hi, "hi")
    if hi < lo:
        raise ValueError(f"hi must be >= lo, got lo={lo}, hi={hi}")
    if isinstance(prec, bool) or not isinstance(prec, numbers.Integral) or prec < 16:
        raise ValueError(f"prec must be an integer >= 16, got {prec!r}")
    if hi == lo:
        return flint.arb(0)
    work = int(prec) + 32
    steep = steep_power_sum_arb(lo, hi, exact_arb(alpha), flint.arb(1), work)
    if steep is not None and steep.rel_accuracy_bits() >= prec:
        return steep
    exact_input = True
    for _ in range(12):
        with flint.ctx.workprec(work):
            a = exact_arb(alpha)
            exact_input = a.rad() == 0
            if hi - lo <= _DIRECT_TERMS:
                value = sum((flint.arb(k) ** (-a) for k in range(lo + 1, hi + 1)), flint.arb(0))
            elif exact_input and a == 1:
                value = flint.arb(hi + 1).digamma() - flint.arb(lo + 1).digamma()
            else:
                first = a.zeta() if lo == 0 else a.zeta(flint.arb(lo + 1))
                value = first - a.zeta(flint.arb(hi + 1))
        if value.is_finite() and value.rel_accuracy_bits() >= prec:
            return value
        if not exact_input and value.is_finite() and work > 4 * prec + 256:
            return value  # accuracy limited by the width of alpha itself
        work *= 2
    if not value.is_finite():
        raise ValueError(f"alpha ball {alpha} contains 1: the difference is undefined there")
    return value


def harmonic_number_arb(m: int, alpha: object, *, prec: int = 128) -> flint.arb:
    """Ball enclosure of ``H_m^(alpha)`` (Arb). See ``harmonic_tail_arb``."""
    m = as_count(m, "m")
    return harmonic_tail_arb(0, m, alpha, prec=prec)

"""Two-sided brackets of generalised harmonic numbers and window masses (docs/theory.md §6).

For the log-distance prior ``b(d) = -alpha ln(1+d)`` the partial sums are
``S_m = H_m^(alpha) = sum_{k=1}^m k^-alpha`` and the window mass at length ``n`` is
``M_n(W) = H_W / H_n``. This module brackets them in two ways:

* the integral test (``integral_bracket``), for ``delta = alpha - 1``::

      L_m = (1 - (m+1)^-delta) / delta  <=  H_m^(alpha)  <=  1 + (1 - m^-delta) / delta = U_m

  (``delta = 0``: ``ln(m+1) <= H_m <= 1 + ln m``). The derivation only uses that
  ``x -> x^-alpha`` is decreasing, so the same formulas hold for every ``alpha > 0``,
  including ``0 < alpha < 1`` (``delta < 0``);
* Euler–Maclaurin with a rigorous remainder (``euler_maclaurin_bracket``): the first
  ``N - 1`` terms are summed exactly (``N = 16``, more above ~40 digits) and
  ``sum_{k=N}^m k^-alpha`` is written as::

      int_N^m x^-alpha dx + (N^-alpha + m^-alpha)/2
          + sum_{j=1}^p B_{2j}/(2j)! (alpha)_{2j-1} (N^{1-alpha-2j} - m^{1-alpha-2j}) + R_p

  with ``(alpha)_k`` the rising factorial. For ``alpha > 0`` every even derivative of
  ``x^-alpha`` is positive. Writing ``R_p`` as the integral of
  ``(B_{2p+2} - B~_{2p+2}(x)) f^(2p+2)(x) / (2p+2)!`` (``B~`` the periodic Bernoulli
  function; the bracket has constant sign) shows that ``R_p`` and
  ``R_{p+1} = R_p - T_{p+1}`` have opposite signs, so ``R_p = theta T_{p+1}`` with
  ``0 <= theta <= 1`` and ``T_{p+1}`` the first omitted term (the classical enclosure
  property of the Euler–Maclaurin remainder): the bracket is the partial sum plus the
  segment ``[0, T_{p+1}]``. The tests check containment against independent values.

Every endpoint is computed in Arb ball arithmetic (python-flint) and rounded outwards
(lower endpoints towards -inf, upper towards +inf) to ``dps`` decimal digits, so the
brackets are certified, not just accurate. They are returned as ``mpmath.mpf``.

For ``alpha <= 1`` the prior is not summable: ``M_inf(W) = 0`` (``limit_window_mass_bracket``
returns ``(0, 0)``) and ``zeta(alpha)`` diverges (``zeta_bracket`` raises). Near
``alpha = 1``, as ``delta ln n -> 0``, ``M_n(W) -> H_W / H_n`` (``near_one_limit``).

>>> from mpmath import mpf, workdps
>>> lo, hi = integral_bracket(1000, 1.5)
>>> elo, ehi = euler_maclaurin_bracket(1000, 1.5)
>>> with workdps(40):
...     exact = sum(mpf(k) ** -1.5 for k in range(1, 1001))
...     bool(lo <= elo <= exact <= ehi <= hi) and ehi - elo < mpf(10) ** -25
True
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

import mpmath
from mpmath import libmp

from priors.harmonic import DEFAULT_DPS, _power_sum, exact_arb
from priors.validation import as_count, as_real, check_dps, check_window_length

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = [
    "EM_START",
    "euler_maclaurin_bracket",
    "integral_bracket",
    "limit_window_mass_bracket",
    "near_one_limit",
    "window_mass_brackets",
    "zeta_bracket",
]

#: The Euler–Maclaurin formula is applied from ``N = EM_START`` on (``1 .. N-1`` are summed
#: directly); above about 40 digits ``N`` grows with the precision (see ``_em_start``).
EM_START = 16
#: Most correction terms the automatic choice will use (the series is asymptotic: the
#: terms shrink like ``(2 pi EM_START)^-2j`` until ``j ~ pi EM_START``).
_MAX_TERMS = 45
#: Extra working bits on top of the output precision.
_GUARD_BITS = 40

Bracket = tuple[mpmath.mpf, mpmath.mpf]


# ----------------------------------------------------------------------------- helpers


def _bits(dps: int) -> int:
    return math.ceil(dps * math.log2(10)) + 1


def _to_mpf(x: flint.arb, dps: int, rnd: str) -> mpmath.mpf:
    """Exact arb point ``x`` rounded to ``dps`` digits in direction ``rnd`` ('f' or 'c')."""
    man, exp = x.man_exp()
    raw = libmp.from_man_exp(int(man), int(exp), _bits(dps), rnd)
    return mpmath.mp.make_mpf(raw)


def _outward(lo: flint.arb, hi: flint.arb, dps: int) -> Bracket:
    """``(lower end of lo, upper end of hi)`` rounded outwards to ``dps`` digits."""
    if not (lo.is_finite() and hi.is_finite()):
        raise ArithmeticError("non-finite bracket endpoint")  # pragma: no cover
    return _to_mpf(lo.lower(), dps, "f"), _to_mpf(hi.upper(), dps, "c")


def _positive_alpha(alpha: object) -> mpmath.mpf:
    a = as_real(alpha, "alpha")
    if a <= 0:
        raise ValueError(f"alpha must be > 0 (x^-alpha decreasing), got {alpha!r}")
    return a


def _check_terms(terms: object) -> int | None:
    if terms is None:
        return None
    if isinstance(terms, bool) or not isinstance(terms, numbers.Integral) or terms < 0:
        raise ValueError(f"terms must be a nonnegative integer or None, got {terms!r}")
    if terms > 200:
        raise ValueError(f"terms must be <= 200 (the series is asymptotic), got {terms!r}")
    return int(terms)


def _integral_arb(m: int, a: flint.arb) -> tuple[flint.arb, flint.arb]:
    """Arb balls for ``(L_m, U_m)`` at the current working precision."""
    import flint

    if m == 0:
        return flint.arb(0), flint.arb(0)
    delta = a - 1
    if delta == 0:
        return flint.arb(m + 1).log(), 1 + flint.arb(m).log()
    # (1 - x^-delta)/delta = -expm1(-delta ln x)/delta: no cancellation as delta -> 0
    lower = -(-delta * flint.arb(m + 1).log()).expm1() / delta
    upper = 1 - (-delta * flint.arb(m).log()).expm1() / delta
    return lower, upper


def _power(k: int, e: flint.arb) -> flint.arb:
    import flint

    return flint.arb(k) ** e


def _em_start(target_bits: int) -> int:
    """Start index ``N`` of the Euler–Maclaurin tail: ``EM_START``, raised for high precision.

    The smallest term of the asymptotic series is about ``exp(-2 pi N)`` relative, so ``N``
    grows with the target accuracy (``N = 16`` is enough up to ~40 digits).
    """
    return max(EM_START, math.ceil(1.2 * target_bits * math.log(2) / (2 * math.pi)) + 4)


def _em_arb(
    m: int, a: flint.arb, terms: int | None, target_bits: int
) -> tuple[flint.arb, flint.arb, int]:
    """Euler–Maclaurin for ``H_m^(a)``: ``(partial sum S_p, first omitted term T_{p+1}, p)``.

    ``H_m = S_p + theta T_{p+1}``, ``0 <= theta <= 1``, for ``a > 0``. For ``m < N``
    the sum is direct and ``T = 0``.
    """
    import flint

    n0 = _em_start(target_bits)
    if m < n0:
        return sum((_power(k, -a) for k in range(1, m + 1)), flint.arb(0)), flint.arb(0), 0
    head = sum((_power(k, -a) for k in range(1, n0)), flint.arb(0))
    delta = a - 1
    if m == n0:
        integral = flint.arb(0)
    elif delta == 0:
        integral = flint.arb(m).log() - flint.arb(n0).log()
    else:
        ln_ratio = flint.arb(m).log() - flint.arb(n0).log()
        integral = _power(n0, -delta) * (-(-delta * ln_ratio).expm1()) / delta
    total = head + integral + (_power(n0, -a) + _power(m, -a)) / 2

    def term(j: int) -> flint.arb:
        # B_{2j}/(2j)! (a)_{2j-1} (N^{1-a-2j} - m^{1-a-2j})
        coeff = flint.arb.bernoulli(2 * j) / flint.arb.fac_ui(2 * j) * a.rising(2 * j - 1)
        e = 1 - a - 2 * j
        return coeff * (_power(n0, e) - _power(m, e))

    tol = flint.arb(2) ** (-target_bits)
    j = 1
    nxt = term(1)
    while True:
        if terms is not None:
            if j > terms:
                return total, nxt, terms
        elif (
            abs(nxt).upper() <= (tol * total).lower()
            or j > _MAX_TERMS
            or (j > 1 and abs(nxt).upper() > abs(term(j - 1)).lower())
        ):
            return total, nxt, j - 1
        total = total + nxt
        j += 1
        nxt = term(j)


# ----------------------------------------------------------------------------- public API


def integral_bracket(m: int, alpha: object, *, dps: int = DEFAULT_DPS) -> Bracket:
    """Integral-test bracket ``L_m <= H_m^(alpha) <= U_m`` (docs/theory.md §6).

    .. math::

        L_m = \\frac{1 - (m+1)^{-\\delta}}{\\delta}, \\qquad
        U_m = 1 + \\frac{1 - m^{-\\delta}}{\\delta}, \\qquad \\delta = \\alpha - 1,

    with the ``delta -> 0`` limits ``ln(m+1)`` and ``1 + ln m`` used at ``alpha = 1``
    exactly (evaluated as ``-expm1(-delta ln x)/delta``, so there is no cancellation for
    tiny ``delta``). Valid for every ``alpha > 0`` (the proof only needs ``x^-alpha``
    decreasing); ``m = 0`` gives ``(0, 0)``. ``U_1 = H_1 = 1``: the upper end is attained.

    Parameters
    ----------
    m : int
        ``0 <= m <= 1e18``.
    alpha : real
        ``alpha > 0``; floats and ``mpf`` are taken exactly.
    dps : int
        Output digits; the endpoints are certified (Arb) and rounded outwards.

    Returns
    -------
    (lo, hi) : tuple of mpmath.mpf

    >>> from mpmath import log, workdps
    >>> lo, hi = integral_bracket(10**6, 1)
    >>> with workdps(30):
    ...     bool(lo <= log(10**6 + 1) <= lo + 1e-25 and hi - 1 - log(10**6) < 1e-25)
    True
    """
    import flint

    m = as_count(m, "m")
    a = _positive_alpha(alpha)
    dps = check_dps(dps)
    with flint.ctx.workprec(_bits(dps) + _GUARD_BITS):
        lo, hi = _integral_arb(m, exact_arb(a))
        return _outward(lo, hi, dps)


def euler_maclaurin_bracket(
    m: int, alpha: object, *, terms: int | None = None, dps: int = DEFAULT_DPS
) -> Bracket:
    """Euler–Maclaurin bracket of ``H_m^(alpha)`` with a rigorous remainder (docs/theory.md §6).

    ``H_m = sum_{k<N} k^-alpha + int_N^m x^-alpha dx + (N^-alpha + m^-alpha)/2
    + sum_{j=1}^p B_{2j}/(2j)! (alpha)_{2j-1} (N^{1-alpha-2j} - m^{1-alpha-2j}) + R_p``
    with ``N = 16`` (raised above about 40 digits, where ``exp(-2 pi N)`` limits the
    asymptotic series),
    and for ``alpha > 0`` (all even derivatives of ``x^-alpha`` positive) the remainder
    ``R_p`` lies between 0 and the first omitted term ``T_{p+1}``. The bracket is therefore
    ``[S_p + min(0, T_{p+1}), S_p + max(0, T_{p+1})]``, evaluated in Arb and rounded
    outwards: certified. For ``m < N`` the sum is direct and the bracket is the rounding
    of the exact value.

    Parameters
    ----------
    m : int
        ``0 <= m <= 1e18``.
    alpha : real
        ``alpha > 0`` (any side of 1); floats and ``mpf`` are taken exactly.
    terms : int or None
        Number ``p`` of Bernoulli corrections. ``None`` (default) adds terms until the first
        omitted one is below ``10^-(dps+3)`` relative (or the asymptotic series stops
        decreasing), so the width is about ``10^-dps`` relative.
    dps : int
        Output digits.

    Returns
    -------
    (lo, hi) : tuple of mpmath.mpf, with ``lo <= H_m^(alpha) <= hi``; strictly inside the
    integral bracket for ``m >= 1``.

    >>> from mpmath import mpf, zeta, workdps
    >>> lo, hi = euler_maclaurin_bracket(10**12, 1 + mpf(2) ** -27)
    >>> with workdps(60):
    ...     a = 1 + mpf(2) ** -27
    ...     exact = zeta(a) - zeta(a, 10**12 + 1)
    ...     bool(lo <= exact <= hi and (hi - lo) / exact < 1e-29)
    True
    """
    return _euler_maclaurin_bracket(
        as_count(m, "m"), _positive_alpha(alpha), _check_terms(terms), check_dps(dps)
    )


def _euler_maclaurin_bracket(
    m: int, a: float | mpmath.mpf, p: int | None, dps: int
) -> tuple[mpmath.mpf, mpmath.mpf]:
    """``euler_maclaurin_bracket`` for arguments validated by the caller."""
    import flint

    bits = _bits(dps)
    work = bits + _GUARD_BITS
    for _ in range(6):
        with flint.ctx.workprec(work):
            s, t, _used = _em_arb(m, exact_arb(a), p, bits + 10)
            lo = s + t.min(flint.arb(0))
            hi = s + t.max(flint.arb(0))
            if m == 0 or min(lo.rel_accuracy_bits(), hi.rel_accuracy_bits()) >= bits + 4:
                return _outward(lo, hi, dps)
        work *= 2
    return _outward(lo, hi, dps)  # pragma: no cover - Arb always reaches the target


def window_mass_brackets(
    window: int, length: int, alpha: object, *, dps: int = DEFAULT_DPS
) -> dict[str, Bracket]:
    """Brackets of the log-distance window mass ``M_n(W) = H_W^(alpha) / H_n^(alpha)`` (§6).

    ``"integral"``: ``(L_W / U_n, U_W / L_n)`` from ``integral_bracket`` (as in docs/theory.md §6;
    the upper end can exceed 1 for small ``n``, it is not clipped);
    ``"euler_maclaurin"``: the same quotient of the Euler–Maclaurin brackets, which is
    ``10^-dps``-tight. Both certified (Arb, outward rounding). ``alpha > 0``.

    Parameters
    ----------
    window, length : int
        ``1 <= window <= length <= 1e18``.
    alpha : real
        ``alpha > 0``.

    >>> b = window_mass_brackets(512, 65536, 1.1)
    >>> ilo, ihi = b["integral"]; elo, ehi = b["euler_maclaurin"]
    >>> bool(ilo <= elo <= ehi <= ihi)
    True
    """
    w, n = check_window_length(window, length)
    return _window_mass_brackets(w, n, _positive_alpha(alpha), check_dps(dps))


def _window_mass_brackets(w: int, n: int, a: float | mpmath.mpf, dps: int) -> dict[str, Bracket]:
    """``window_mass_brackets`` for arguments validated by the caller
    (``LogDistance._series_brackets`` inside ``priors.mass.mass_report``)."""
    import flint

    out: dict[str, Bracket] = {}
    with flint.ctx.workprec(_bits(dps) + _GUARD_BITS):
        lw, uw = _integral_arb(w, exact_arb(a))
        ln, un = _integral_arb(n, exact_arb(a))
        out["integral"] = _outward(lw.lower() / un.upper(), uw.upper() / ln.lower(), dps)
    ew = _euler_maclaurin_bracket(w, a, None, dps + 5)
    en = _euler_maclaurin_bracket(n, a, None, dps + 5)
    with flint.ctx.workprec(_bits(dps) + _GUARD_BITS):
        lo = _mpf_arb(ew[0]) / _mpf_arb(en[1])
        hi = _mpf_arb(ew[1]) / _mpf_arb(en[0])
        out["euler_maclaurin"] = _outward(lo, hi, dps)
    return out


def _mpf_arb(x: mpmath.mpf) -> flint.arb:
    return exact_arb(x)  # exact conversion of a binary mpf


def limit_window_mass_bracket(
    window: int, alpha: object, *, dps: int = DEFAULT_DPS
) -> Bracket:
    """Bracket of ``M_inf(W) = H_W^(alpha) / zeta(alpha)`` (docs/theory.md §6).

    For ``delta = alpha - 1 > 0``::

        (1 - (W+1)^-delta) / (1 + delta)  <=  M_inf(W)  <=  delta + 1 - W^-delta

    (``L_W / (1 + 1/delta)`` and ``U_W / (1/delta)``). For ``alpha <= 1`` the prior is not
    summable and ``M_inf(W) = 0`` exactly: ``(0, 0)`` is returned (the formulas above
    also tend to 0 as ``delta -> 0+``). Certified, rounded outwards.

    >>> from mpmath import zeta, workdps
    >>> lo, hi = limit_window_mass_bracket(512, 1.1)
    >>> with workdps(30):
    ...     exact = (zeta(1.1) - zeta(1.1, 513)) / zeta(1.1)
    ...     bool(lo <= exact <= hi)
    True
    """
    import flint

    w = as_count(window, "window", minimum=1)
    a = as_real(alpha, "alpha")
    dps = check_dps(dps)
    if a <= 1:
        with mpmath.workdps(dps):
            return mpmath.mpf(0), mpmath.mpf(0)
    with flint.ctx.workprec(_bits(dps) + _GUARD_BITS):
        delta = exact_arb(a) - 1
        lo = -(-delta * flint.arb(w + 1).log()).expm1() / (1 + delta)
        hi = delta - (-delta * flint.arb(w).log()).expm1()
        return _outward(lo, hi, dps)


def zeta_bracket(alpha: object, *, dps: int = DEFAULT_DPS) -> Bracket:
    """``1/delta <= zeta(1 + delta) <= 1 + 1/delta`` for ``delta = alpha - 1 > 0`` (§6).

    The ``m -> inf`` limit of ``integral_bracket``. ``alpha <= 1``: ``zeta`` diverges
    (the prior is not summable), ``ValueError``.

    >>> from mpmath import zeta
    >>> lo, hi = zeta_bracket(1.5)
    >>> bool(lo <= zeta(1.5) <= hi)
    True
    """
    import flint

    a = as_real(alpha, "alpha")
    dps = check_dps(dps)
    if a <= 1:
        raise ValueError(f"alpha must be > 1 (zeta(alpha) diverges otherwise), got {alpha!r}")
    with flint.ctx.workprec(_bits(dps) + _GUARD_BITS):
        inv = 1 / (exact_arb(a) - 1)
        return _outward(inv, 1 + inv, dps)


def near_one_limit(window: int, length: int, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """The ``delta ln n -> 0`` limit of ``M_n(W)``: ``H_W / H_n`` (docs/theory.md §6).

    ``H_W / H_n = (psi(W+1) + gamma_E) / (psi(n+1) + gamma_E)``, the non-summable law
    (about ``ln W / ln n`` to leading order only). ``dps`` significant digits.

    >>> from mpmath import digamma, euler, workdps
    >>> v = near_one_limit(512, 10**12)
    >>> with workdps(40):
    ...     ref = (digamma(513) + euler) / (digamma(10**12 + 1) + euler)
    ...     abs(v / ref - 1) < 1e-28
    True
    """
    w, n = check_window_length(window, length)
    dps = check_dps(dps)
    one = mpmath.mpf(1)
    num = _power_sum(0, w, one, one, dps + 5)  # H_W, with guard digits past DPS_MAX too
    den = _power_sum(0, n, one, one, dps + 5)
    with mpmath.workdps(dps):
        return num / den

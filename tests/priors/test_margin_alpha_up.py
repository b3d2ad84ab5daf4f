"""The reported ``alpha*`` is a float no smaller than ``1 + delta_hi`` (docs/theory.md §7).

``MarginResult.alpha`` (JSON ``alpha`` and ``kerple_log.r1``) is documented as the proven
``alpha* = 1 + delta*``; every ``alpha >= 1 + delta_hi`` satisfies the tolerance, but
``1.0 + delta_hi`` rounded to nearest can fall below it, for a tiny ``delta*`` even below
``1 + delta_lo``, where ``G > tol`` is proven. Setting: ``W = L0 = 2``, ``L1 = 4``,
``B = 0``, where ``G(alpha) = (3^-alpha + 4^-alpha) / (1 + 2^-alpha + 3^-alpha + 4^-alpha)``
(the exact distant mass, nonincreasing in ``alpha``), evaluated in mpmath at 60 digits, not
by the Arb code under test.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import mpmath

from priors.margin import format_result, select_margin

#: ``tol`` a little below ``G(1) = 7/25``: ``delta* ~ 7.6e-8``, where the float spacing of
#: ``alpha`` (2.2e-16) exceeds the bracket width (~3e-17).
TOL = "0.279999984722765"


def closed_form_growth(alpha: float | Fraction) -> mpmath.mpf:
    """``G(alpha) = D_4(2)`` at 60 digits (``alpha`` a float or a rational with a
    power-of-two denominator below 2^150, so exact)."""
    with mpmath.workdps(60):
        q = Fraction(alpha)
        a = mpmath.mpf(q.numerator) / q.denominator
        head, tail = 1 + mpmath.mpf(2) ** -a, mpmath.mpf(3) ** -a + mpmath.mpf(4) ** -a
        return tail / (head + tail)


def test_reported_alpha_satisfies_the_tolerance():
    """Premise: ``1.0 + delta_hi`` rounds to at most ``1 + delta_lo``, a proven violation.
    Then ``alpha >= 1 + delta_hi`` exactly (rationals), ``G(alpha) <= tol`` by the closed form
    (the float rounding of ``alpha`` moves ``G`` by ~3e-17 against a 1e-60 reference
    error), the JSON ``kerple_log.r1`` is the same float, and it is the smallest such float
    (one step down is below ``1 + delta_hi``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bracket meets the float band of tol
        r = select_margin(2, 4, TOL)
    lo, hi = r.delta_bracket
    assert r.delta_lo_proven and 0 < lo < hi < 1e-7
    # the premise: 1 + delta_lo (exact) violates, and 1.0 + delta_hi rounds below it
    with mpmath.workdps(60):
        assert closed_form_growth(1 + Fraction(lo)) > mpmath.mpf(TOL)
    assert Fraction(1.0 + hi) <= 1 + Fraction(lo)
    assert Fraction(r.alpha) >= 1 + Fraction(hi)
    assert Fraction(math.nextafter(r.alpha, 0.0)) < 1 + Fraction(hi)
    with mpmath.workdps(60):
        assert closed_form_growth(r.alpha) <= mpmath.mpf(TOL)
    assert r.to_dict()["kerple_log"]["r1"] == r.alpha
    assert r.sup_location >= r.alpha  # at the margin, the same rounded-up float


def test_printed_supremum_location_is_not_below_the_margin():
    """At the margin the report prints where the supremum is attained; ten digits
    (``.10g``) print ``1`` for ``delta* ~ 7.6e-8``, a point where ``G > tol``. The printed
    number, read back, must be ``>= 1 + delta_hi`` (exact rationals)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = select_margin(2, 4, TOL)
    line = next(x for x in format_result(r).splitlines() if "attained at alpha = " in x)
    printed = line.split("attained at alpha = ")[1].split()[0]
    assert Fraction(float(printed)) >= 1 + Fraction(r.delta_bracket[1])

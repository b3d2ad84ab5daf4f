"""The margin search where ``G`` crosses the band between a decimal ``tol`` and its float.

docs/theory.md §7: safety is certified against ``t``, the largest float ``<= tol``, and a
violation against the decimal ``tol``. Where ``tol`` is not a float, ``G`` crosses the
band ``(t, tol]`` over a ``delta``-interval of width about ``(tol - t) / |G'|``; no point
there is decided either way. With ``delta*`` tiny (``tol`` just below ``G(1)``) that
interval is wider than ``BRACKET_RTOL delta*`` and the search stops unresolved at a
transversal crossing. The report must say so plainly: what is proven, what is not, and
why (not a "tangency?" nor "too little precision").

Setting: ``W = L0 = 1``, ``L1 = 2``, ``B = 0``, ``G(alpha) = 2^-alpha / (1 + 2^-alpha)``
(closed form, strictly decreasing, ``G(1) = 1/3``, ``G'(1) = -ln 2 / 4.5``); at
``tol = 0.3333333333`` the margin is ``delta* ~ 2.2e-10``. References are the closed form
in mpmath and exact rationals, not the Arb code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest

from priors.margin import BRACKET_RTOL, format_result, select_margin

TOL = "0.3333333333"


def closed_form_growth(delta: float) -> mpmath.mpf:
    """``G(1 + delta) = 2^-alpha / (1 + 2^-alpha)`` at 60 digits (``alpha`` exact)."""
    with mpmath.workdps(60):
        q = mpmath.mpf(2) ** -(1 + mpmath.mpf(delta))
        return q / (1 + q)


def largest_float_at_most(text: str) -> Fraction:
    """The largest float ``t <= tol`` in exact rationals (``t = tol`` iff ``tol`` is a float)."""
    exact = Fraction(text)
    t = float(text)
    if Fraction(t) > exact:
        t = math.nextafter(t, -math.inf)
    return Fraction(t)


def test_float_band_is_reported_as_such_with_proven_ends():
    """Premise: the band's ``delta``-width ``(tol - t) / |G'(1)|`` is far above
    ``BRACKET_RTOL delta*`` (so no bracket of that width exists). Then: the ends hold by
    the closed form (``G(1 + delta_hi) <= t``, ``G(1 + delta_lo) > tol``, each ~1e-17 from
    the threshold, against a 1e-60 reference error); the bracket reaches the band (the
    split points reach ``(c - lo) / 4`` either side of the midpoint, so a stop leaves
    ``c - lo <= 2 * band``); and the reason names the band, not a tangency, and the
    printed ``delta*`` says its digits are not all fixed; the point the reason quotes has
    ``t < G <= tol`` by the closed form (60 digits, ~1e-17 from either end)."""
    t = largest_float_at_most(TOL)
    with mpmath.workdps(60):
        tau = mpmath.mpf(TOL)  # 60 digits: at 53 bits it would be the float t itself
        slope = mpmath.log(2) / mpmath.mpf("4.5")  # |G'(1)|, varies by ~1e-10 up to delta*
        delta_star = (mpmath.mpf(1) / 3 - tau) / slope
        gap = Fraction(TOL) - t
        band = mpmath.mpf(gap.numerator) / gap.denominator / slope
    assert band > 1e5 * BRACKET_RTOL * delta_star  # the premise
    with pytest.warns(RuntimeWarning, match=r"meets the band \(t, tol\]"):
        r = select_margin(1, 2, TOL)
    lo, hi = r.delta_bracket
    assert not r.resolved and r.delta_lo_proven and not r.budget_exhausted
    with mpmath.workdps(60):
        assert closed_form_growth(hi) <= mpmath.mpf(t.numerator) / t.denominator
        assert closed_form_growth(lo) > tau
        assert hi - lo <= 2.01 * band
    # the point the reason quotes is in the band by the closed form too
    quoted = float(r.unresolved_reason.split("at delta = ")[1].split()[0])
    with mpmath.workdps(60):
        g = closed_form_growth(quoted)
        assert mpmath.mpf(t.numerator) / t.denominator < g <= tau
    assert "tangency?" not in r.unresolved_reason
    assert "(t, tol]" in r.unresolved_reason and "Not established" in r.unresolved_reason
    assert "fixes delta* only to relative width" in format_result(r)


def test_float_tol_has_no_band_and_resolves():
    """Negative control: ``tol = 0.3125`` is a float (``t = tol``), so no band exists and the
    same near-one search resolves to ``BRACKET_RTOL``; ``G(1) - 0.3125 ~ 0.02`` puts
    ``delta* ~ 0.14`` (closed form), checked at the ends."""
    assert largest_float_at_most("0.3125") == Fraction("0.3125")
    r = select_margin(1, 2, "0.3125")
    lo, hi = r.delta_bracket
    assert r.resolved and r.bracket_relative_width <= BRACKET_RTOL
    assert closed_form_growth(lo) > mpmath.mpf("0.3125") >= closed_form_growth(hi)

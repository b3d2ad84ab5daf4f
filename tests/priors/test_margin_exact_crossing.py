"""The margin search when ``G`` crosses ``tol`` exactly at a bisection midpoint (docs/theory.md §7).

With ``W = L0 = 1``, ``L1 = 2``, ``B = 0`` the growth is ``G(alpha) = D_2(1) =
2^-alpha / (1 + 2^-alpha)``, strictly decreasing, and ``G(2) = 1/5`` exactly: at
``tol = 0.2`` the margin is ``delta* = 1`` exactly, a transversal crossing. The search's
half-line point is ``delta_max = 2`` (``D^+(1 + 1) = tol`` is not certified ``<= tol``), so
its first bisection midpoint is ``delta = 1``, where the ball of ``G`` contains ``tol`` at
every precision. That used to end the search as a "tangency" with the bracket
``(0, 2]``. References here are the closed form and mpmath, not the Arb code under test.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import mpmath
import pytest

from priors.margin import BRACKET_RTOL, select_margin
from priors.margin import search as margin_search

TOLS = ("0.02", "0.05", "0.1", "0.2", "0.3", "0.5")


def closed_form_growth(delta: float) -> mpmath.mpf:
    """``G(1 + delta) = 2^-alpha / (1 + 2^-alpha)`` at ``W = L0 = 1``, ``L1 = 2``, ``B = 0``
    (60 digits; ``delta`` is a float, so ``alpha`` is exact)."""
    with mpmath.workdps(60):
        q = mpmath.mpf(2) ** -(1 + mpmath.mpf(delta))
        return q / (1 + q)


def direct_growth(w: int, l1: int, b: str, delta: float) -> mpmath.mpf:
    """``D^+_{L1}(W)`` at ``L0 = W`` by direct 40-digit summation (docs/theory.md §5)."""
    with mpmath.workdps(40):
        a = 1 + mpmath.mpf(delta)
        terms = [mpmath.mpf(k) ** -a for k in range(1, l1 + 1)]
        s_w, t = mpmath.fsum(terms[:w]), mpmath.fsum(terms[w:])
        e = mpmath.exp(2 * mpmath.mpf(b))
        return e * t / (s_w + e * t)


def test_closed_form_crosses_exactly_at_delta_one():
    """The premise, in exact rationals: ``G(2) = (1/4) / (5/4) = 1/5``."""
    quarter = Fraction(1, 4)
    assert quarter / (1 + quarter) == Fraction(2, 10)


def test_exact_crossing_is_resolved():
    """(1, 2, '0.2'): resolved, no warning, ``delta_lo < 1 <= delta_hi`` with relative
    width ``<= BRACKET_RTOL``; the bracket ends re-checked against the closed form at 60
    digits (the ends are floats ~1e-13 from 1, where ``|G - 0.2| ~ |G'| 1e-13 ~ 1e-14``,
    far above the 1e-60 error of the reference)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = select_margin(1, 2, "0.2")
    lo, hi = r.delta_bracket
    assert r.resolved and r.delta_lo_proven and not r.budget_exhausted
    assert lo < 1.0 <= hi  # delta* = 1 exactly
    assert hi - lo <= BRACKET_RTOL * hi
    assert r.bracket_relative_width <= 1e-9
    tau = mpmath.mpf(1) / 5
    assert closed_form_growth(lo) > tau >= closed_form_growth(hi)
    assert r.delta == hi and r.alpha == 1.0 + hi


def test_trigger_is_present_and_the_fix_is_what_resolves_it(monkeypatch):
    """The failure path is really exercised: ``delta_max = 2``, so the first midpoint is
    the exact crossing. Negative control: without the split points next to a straddling
    midpoint (``_splits_next_to`` yielding nothing) the unchanged search reports the old
    unresolved ``(0, 2]``; with them it resolves."""
    problem = margin_search.GrowthProblem(1, 1, 2, "0.2", "0", 216)
    out = margin_search.certified_search(problem, BRACKET_RTOL)
    assert out.delta_max == 2.0 and 1.0 in problem._cache
    assert out.resolved and out.delta_lo is not None and out.delta_lo < 1.0 <= out.delta_hi
    monkeypatch.setattr(margin_search, "_splits_next_to", lambda lo, mid, c: iter(()))
    problem = margin_search.GrowthProblem(1, 1, 2, "0.2", "0", 216)
    broken = margin_search.certified_search(problem, BRACKET_RTOL)
    assert not broken.resolved and (broken.delta_lo, broken.delta_hi) == (0.0, 2.0)


def test_straddling_everywhere_stays_unresolved(monkeypatch):
    """Negative control for the fallback itself: a system whose balls contain ``tol`` on
    the whole of ``[0.5, 1.5]`` (as at a tangency, or with too little precision) must
    still end unresolved with only proven ends, never with an invented violation."""
    problem = margin_search.GrowthProblem(1, 1, 2, "0.2", "0", 216)
    real = problem.growth

    def blurred(delta: float):
        if 0.5 <= delta <= 1.5:
            return problem.tol_ball + margin_search.flint.arb(0, 1e-3)
        return real(delta)

    monkeypatch.setattr(problem, "growth", blurred)
    out = margin_search.certified_search(problem, BRACKET_RTOL)
    assert not out.resolved
    assert out.delta_lo is None or closed_form_growth(out.delta_lo) > mpmath.mpf(1) / 5
    assert closed_form_growth(out.delta_hi) <= mpmath.mpf(1) / 5


def _scan(windows: range) -> list[tuple]:
    """Every ``(W, L1 = W 2^k, tol, B)`` with ``k = 1..8``, ``L0 = W``: warnings are errors;
    each result must be resolved with a proven lower end (or ``delta* = 0``) and a bracket
    of relative width ``<= BRACKET_RTOL``. Returns the settings that are not."""
    bad = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for b in ("0", "0.5"):
            for tol in TOLS:
                for w in windows:
                    for k in range(1, 9):
                        r = select_margin(w, w * 2**k, tol, score_bound=b)
                        ok = (r.resolved and (r.delta_lo_proven or r.delta == 0.0)
                              and r.bracket_relative_width <= BRACKET_RTOL)
                        if not ok:
                            bad.append((w, k, tol, b, r.delta_bracket))
    return bad


def test_scan_small_windows_resolves_everything():
    """CI size: W <= 4 (384 settings, ~5 s), the part that holds the exact crossing."""
    assert _scan(range(1, 5)) == []


def test_scan_brackets_hold_by_direct_summation():
    """A few brackets of the scan re-checked by direct mpmath summation of ``D^+_{L1}``
    (40 digits; the ends differ from ``delta*`` by ~1e-12 relative, so ``|G - tol|`` is
    ~1e-13 or more, far above the summation error)."""
    for w, k, tol, b in [(1, 1, "0.2", "0"), (1, 3, "0.2", "0"), (3, 2, "0.1", "0.5"),
                         (4, 5, "0.05", "0"), (2, 8, "0.3", "0.5")]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = select_margin(w, w * 2**k, tol, score_bound=b)
        lo, hi = r.delta_bracket
        tau = mpmath.mpf(tol)
        assert direct_growth(w, w * 2**k, b, hi) <= tau
        if r.delta_lo_proven:
            assert direct_growth(w, w * 2**k, b, lo) > tau
        else:
            assert hi == 0.0


@pytest.mark.slow
def test_scan_all_windows_resolves_everything():
    """The full scan: W = 1..64 (6144 settings, ~1 min)."""
    assert _scan(range(1, 65)) == []

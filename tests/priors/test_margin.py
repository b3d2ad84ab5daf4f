"""Margin selection (docs/theory.md §7) against independent references.

References used here never go through ``priors.margin.search`` (Arb Hurwitz zeta):

* direct summation of ``k^-alpha`` in mpmath at 40 digits (``L1 <= 4096``), with the
  §5 bounds written out again below, for the defining property at the bracket ends;
* direct float64 summation (numpy) on dense alpha grids for the supremum checks;
* mpmath's own ``harmonic_tail`` (Hurwitz zeta / digamma in mpmath) for ``L1 = 1e15``.
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from dataclasses import replace

import flint
import mpmath
import numpy as np
import pytest

from priors.harmonic import harmonic_tail
from priors.margin import (
    SUP_BRANCH_AND_BOUND,
    SUP_CROSSING,
    SUP_METHODS,
    SUP_MONOTONE,
    MarginInputError,
    MarginResult,
    format_result,
    select_margin,
)
from priors.margin import search as margin_search

# --------------------------------------------------------------------- independent references


def direct_growth_mp(w: int, l0: int, l1: int, b: str, delta: float, dps: int = 40) -> mpmath.mpf:
    """``D^+_{L1} - D^-_{L0}`` by direct summation of ``k^-alpha`` (docs/theory.md §5, §7)."""
    with mpmath.workdps(dps):
        alpha = mpmath.mpf(1) + mpmath.mpf(delta)  # exact: 1 + float needs < 1100 bits here
        terms = [mpmath.mpf(k) ** (-alpha) for k in range(1, l1 + 1)]
        s_w = mpmath.fsum(terms[:w])
        t0 = mpmath.fsum(terms[w:l0])
        t1 = mpmath.fsum(terms[w:l1])
        e = mpmath.exp(2 * mpmath.mpf(b))
        d_max_hi = e * t1 / (s_w + e * t1)
        d_min_lo = t0 / (e * s_w + t0)
        return d_max_hi - d_min_lo


def direct_growth_grid(w: int, l0: int, l1: int, b: float, alphas: np.ndarray) -> np.ndarray:
    """Float64 direct summation of ``G`` on a grid of exponents (relative error ~ L1 * eps)."""
    k = np.arange(1, l1 + 1, dtype=np.float64)
    weights = k[None, :] ** (-alphas[:, None])  # (n_alpha, L1)
    s_w = weights[:, :w].sum(axis=1)
    t0 = weights[:, w:l0].sum(axis=1)
    t1 = weights[:, w:l1].sum(axis=1)
    e = math.exp(2 * b)
    return e * t1 / (s_w + e * t1) - t0 / (e * s_w + t0)


# ------------------------------------------------------------------------- docs/theory.md §7 table

REFERENCE = [  # (W, L0, L1, tol, B, delta*) as printed in docs/theory.md §7 (10 digits)
    (512, 512, 65536, "0.1", "0", 0.3054437527),
    (64, 64, 4096, "0.1", "0", 0.4589094374),
    (512, 512, 65536, "0.01", "0", 0.6756022922),
    (512, 4096, 65536, "0.05", "0", 0.2584215485),
    (512, 512, 65536, "0.1", "0.5", 0.4618002856),
]


@pytest.mark.parametrize(("w", "l0", "l1", "tol", "b", "ref"), REFERENCE)
def test_reference_table(w, l0, l1, tol, b, ref):
    r = select_margin(w, l1, tol, lmin=l0, score_bound=b)
    lo, hi = r.delta_bracket
    # the reference is rounded to 10 decimals: it lies within 5e-11 of delta*, which lies
    # in [lo, hi]; 1e-13 slack for the float rendering of the printed value
    assert lo - 5e-11 - 1e-13 <= ref <= hi + 5e-11 + 1e-13, (lo, hi, ref)
    assert hi - lo <= 1e-9 * hi  # the bracket width ten printed digits need
    assert r.delta == hi and r.alpha == 1.0 + hi
    assert r.resolved and r.delta_lo_proven  # delta_lo is a proven violation, and says so


# ----------------------------------------------------------- defining property, independently

PROPERTY_CASES = [  # (W, L0, L1, tol, B): L0 = W and L0 > W, B = 0 and B > 0, all L1 <= 4096
    (64, 64, 4096, "0.1", "0"),
    (8, 32, 1024, "0.05", "0"),
    (16, 16, 2048, "0.2", "0.3"),
    (4, 64, 512, "0.1", "0.25"),
    (1, 16, 128, "0.48", "0.5"),  # non-monotone G (docs/theory.md §7)
    (1, 2, 4, "0.02", "0"),  # regression: the sweep once stalled here (lo never moved)
    (7, 117, 224, "0.01", "0"),  # L0 near L1: D_L0 large, G small (product-form bound)
]


@pytest.mark.parametrize(("w", "l0", "l1", "tol", "b"), PROPERTY_CASES)
def test_defining_property_direct_summation(w, l0, l1, tol, b):
    r = select_margin(w, l1, tol, lmin=l0, score_bound=b)
    lo, hi = r.delta_bracket
    assert 0.0 < lo < hi and r.delta_lo_proven
    tau = mpmath.mpf(tol)
    # 40-digit direct sums resolve G - tol to ~1e-35, far below G' * (hi - lo) ~ 1e-13
    assert direct_growth_mp(w, l0, l1, b, hi) <= tau
    assert direct_growth_mp(w, l0, l1, b, lo) > tau
    # supremum over alpha >= 1 + hi: dense float64 grid on [1+hi, 1+hi+4] and a coarse
    # logarithmic one up to alpha = 1e3 (beyond, D+_L1 <= e^{2B} 2^{-alpha} ... is negligible);
    # float64 sums of <= 4096 positive terms: relative error <= 1e-12, hence the slack
    grid = np.concatenate(
        [1 + hi + np.linspace(0.0, 4.0, 4001), 1 + hi + np.geomspace(4.0, 1e3, 200)]
    )
    g = direct_growth_grid(w, l0, l1, float(b), grid)
    assert g.max() <= float(tau) + 1e-12, (grid[g.argmax()], g.max())
    # growth reported at delta* agrees with the direct sum (ball midpoint vs 40 digits)
    assert abs(r.growth - float(direct_growth_mp(w, l0, l1, b, hi))) <= 1e-15


def test_large_lmax_against_mpmath_hurwitz():
    """L1 = 1e15: Arb search vs mpmath's Hurwitz zeta (``harmonic_tail``) at 40 digits."""
    r = select_margin(512, 10**15, 0.1)
    lo, hi = r.delta_bracket

    def growth(delta: float) -> mpmath.mpf:
        with mpmath.workdps(40):
            alpha = mpmath.mpf(1) + mpmath.mpf(delta)
            tail = harmonic_tail(512, 10**15, alpha, dps=40)
            return tail / (harmonic_tail(0, 512, alpha, dps=40) + tail)

    # 40 digits resolve G - tol far below G' (hi - lo) ~ 1e-13
    assert growth(hi) <= mpmath.mpf("0.1") < growth(lo)
    assert hi - lo <= 1e-9 * hi


def test_lmax_monotone_beyond_table():
    """delta*(L1) grows with L1 up to 1e15 (dilution is slower than any fixed length)."""
    values = [select_margin(64, l1, 0.1).delta_bracket for l1 in (10**3, 10**6, 10**10, 10**15)]
    for (lo_a, _), (_, hi_b) in itertools.pairwise(values):
        assert hi_b > lo_a  # exact delta* nondecreasing, stated on the proven brackets


# ------------------------------------------------------------------------ delta* = 0 cases


def test_no_margin_needed_b0():
    """tol above G(1): delta* = 0, and the growth is the alpha = 1 law H_W ... (digamma)."""
    r = select_margin(64, 4096, 0.9)
    assert r.delta == 0.0 and r.delta_bracket == (0.0, 0.0) and r.alpha == 1.0
    with mpmath.workdps(40):  # G(1) = 1 - H_W / H_L1, H_m = psi(m+1) + gamma_E
        g1 = 1 - (mpmath.digamma(65) + mpmath.euler) / (mpmath.digamma(4097) + mpmath.euler)
    assert abs(r.growth - float(g1)) <= 1e-15
    assert r.sup_at_margin and r.sup_value[0] <= float(g1) <= r.sup_value[1]
    assert float(g1) < 0.9


def test_sup_not_at_margin_nonmonotone():
    """B > 0, L0 > W: G_B rises from alpha = 1 to a maximum near 1.45 (docs/theory.md §7)."""
    r = select_margin(1, 128, 0.55, lmin=16, score_bound=0.5)
    assert r.delta == 0.0 and not r.sup_at_margin
    grid = 1 + np.linspace(0.0, 3.0, 30001)
    g = direct_growth_grid(1, 16, 128, 0.5, grid)  # float64, 128 terms: error ~1e-14
    # docs/theory.md §7 facts: 0.45647, 0.50425, 0.45703 at alpha = 1, 1.5, 2
    assert g[0] == pytest.approx(0.45647, abs=5e-6)
    peak = grid[g.argmax()]
    assert r.sup_method == SUP_BRANCH_AND_BOUND  # no violation to pin it: B&B located it
    assert abs(r.sup_location - peak) <= 0.01  # B&B located the maximum
    lo, hi = r.sup_value
    assert lo <= g.max() + 1e-12 and g.max() <= hi + 1e-12  # enclosure holds the peak
    assert hi <= 0.55 and r.sup_location > 1.2


def test_nonmonotone_naive_check_would_fail():
    """tol = 0.48 > G(1) yet delta* > 0: checking G only at alpha = 1 + delta is wrong."""
    r = select_margin(1, 128, 0.48, lmin=16, score_bound=0.5)
    assert float(direct_growth_mp(1, 16, 128, "0.5", 0.0)) < 0.48  # G(1) satisfies tol
    assert 0.5 < r.delta < 1.0  # but the peak near 1.45 violates: the margin is beyond it
    # not by assuming monotonicity: the sweep bounds G beyond delta_hi, the proven violation
    # at delta_lo pins the supremum to tol at delta*
    assert r.sup_method == SUP_CROSSING and r.delta_lo_proven
    assert r.sup_explanation.startswith("certified sweep")


def test_b_positive_never_smaller():
    for w, l0, l1, tol in [(64, 64, 4096, "0.1"), (8, 32, 1024, "0.05")]:
        r0 = select_margin(w, l1, tol, lmin=l0)
        rb = select_margin(w, l1, tol, lmin=l0, score_bound=0.2)
        assert rb.delta_bracket[1] >= r0.delta_bracket[0]
        assert rb.delta > r0.delta  # strictly: G_B > G_0 pointwise when B > 0


# -------------------------------------------------------------------- certification & types


def test_certify_enclosures_and_cross_check():
    r = select_margin(512, 4096, 0.05, lmin=1024, score_bound=0.1, certify=True)
    assert r.certified and r.enclosures is not None
    balls = dict(r.enclosures)
    with flint.ctx.workprec(200):
        growth = flint.arb(balls["growth"])
        lo_growth = flint.arb(balls["growth_at_delta_lo"])
        tol = flint.arb(balls["tol"])
        assert growth.contains(flint.arb(r.growth)) or abs(
            float(growth.mid()) - r.growth) <= 1e-16
        assert growth <= tol and lo_growth > tol  # the two proven facts, re-read from the text
    # the mpmath (Hurwitz zeta in mpmath, dps 40) re-evaluation agrees far below dps 30
    assert r.cross_check_error is not None and r.cross_check_error < 1e-25
    # and is independent of Arb: recompute it here directly
    g = direct_growth_mp(512, 1024, 4096, "0.1", r.delta)
    assert abs(float(g) - r.growth) <= 1e-16


def test_result_frozen_and_json_keys():
    r = select_margin(64, 4096, 0.1)
    assert isinstance(r, MarginResult)
    with pytest.raises(AttributeError):
        r.delta = 0.0  # type: ignore[misc]
    d = r.to_dict()
    for key in ("window", "lmin", "lmax", "tol", "score_bound", "delta", "alpha",
                "delta_bracket", "growth", "distant_mass_lmin", "distant_mass_lmax", "dps",
                "certified", "sup_location", "sup_method", "sup_explanation"):
        assert key in d
    assert "growth_tol" not in d and d["tol"] == r.growth_tol  # the key of the --tol option
    assert d["kerple_log"] == {"r1": r.alpha, "r2": 1.0}
    assert len(d["delta_bracket"]) == 2
    assert json.loads(r.to_json()) == json.loads(json.dumps(d))


def test_sup_method_is_a_value_and_the_prose_is_apart():
    """L0 = W: the supremum is G(1 + delta_hi) by the proved monotonicity, and says so."""
    r = select_margin(64, 4096, 0.1)
    assert r.sup_method == SUP_MONOTONE and r.sup_method in SUP_METHODS
    assert r.sup_explanation.startswith("monotone (proved): L0 = W")
    assert r.sup_at_margin and r.sup_location == r.alpha
    assert f"established by {r.sup_explanation}\n" in format_result(r)  # the text keeps the prose


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"window": 0, "lmax": 10, "growth_tol": 0.1}, "window"),
        ({"window": 2.5, "lmax": 10, "growth_tol": 0.1}, "window"),
        ({"window": True, "lmax": 10, "growth_tol": 0.1}, "window"),
        ({"window": 10, "lmax": 10, "growth_tol": 0.1}, "lmax"),
        ({"window": 10, "lmax": 10**19, "growth_tol": 0.1}, "lmax"),
        ({"window": 10, "lmax": 10**17, "growth_tol": 0.1, "dps": 16}, "lmax"),
        ({"window": 10, "lmax": 100, "growth_tol": 0.1, "lmin": 9}, "lmin"),
        ({"window": 10, "lmax": 100, "growth_tol": 0.1, "lmin": 100}, "lmin"),
        ({"window": 10, "lmax": 100, "growth_tol": 0.0}, "growth_tol"),
        ({"window": 10, "lmax": 100, "growth_tol": 1.0}, "growth_tol"),
        ({"window": 10, "lmax": 100, "growth_tol": float("nan")}, "growth_tol"),
        ({"window": 10, "lmax": 100, "growth_tol": 0.1, "score_bound": -0.1}, "score_bound"),
        ({"window": 10, "lmax": 100, "growth_tol": 0.1, "score_bound": float("inf")},
         "score_bound"),
        ({"window": 10, "lmax": 100, "growth_tol": 0.1, "dps": 10}, "dps"),
        ({"window": 10, "lmax": 100, "growth_tol": 0.1, "dps": 30.0}, "dps"),
    ],
)
def test_bad_input_names_argument(kwargs, argument):
    with pytest.raises(MarginInputError) as info:
        select_margin(**kwargs)
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError) and str(info.value).startswith(argument)


def test_unresolved_search_warns(monkeypatch):
    """Balls that cannot separate G from tol must warn, not pass silently."""
    real = margin_search.certified_search

    def stuck(problem, rtol):
        return replace(real(problem, rtol), resolved=False)

    monkeypatch.setattr(margin_search, "certified_search", stuck)
    with pytest.warns(RuntimeWarning, match="could not separate"):
        r = select_margin(64, 4096, 0.1)
    assert not r.resolved


def test_low_precision_search_reports_unresolved():
    """At 20 bits the balls are ~1e-6 wide: the sweep must stop and say so, not guess."""
    problem = margin_search.GrowthProblem(64, 64, 4096, "0.1", "0", 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = margin_search.certified_search(problem, 1e-12)
    assert not out.resolved
    if out.delta_lo is not None:  # whatever it proved must still be true
        assert direct_growth_mp(64, 64, 4096, "0", out.delta_lo) > mpmath.mpf("0.1")
    assert direct_growth_mp(64, 64, 4096, "0", out.delta_hi) <= mpmath.mpf("0.1")


def test_narrow_float_tol_is_read_as_the_decimal_it_prints_as():
    """``np.float32(0.1)`` prints as ``0.1``: the selector must read 0.1, not the float64
    0.10000000149011612 it widens to (the docstring's promise). Reference: the same call
    with the string "0.1", which keeps its digits by construction."""
    narrow = select_margin(512, 65536, np.float32(0.1))
    exact = select_margin(512, 65536, "0.1")
    assert narrow.growth_tol == exact.growth_tol
    assert narrow.delta_bracket == exact.delta_bracket

"""The margin search's evaluation budget (``max_evaluations``, docs/theory.md §7).

When ``tol`` sits within a tiny distance ``eps`` of a local maximum of the growth ``G`` the
first-order box bound needs ``~ 1/sqrt(eps)`` boxes (hours at ``eps = 1e-12``). The search
must then stop at its budget and say plainly what is proven and what is not. The setting
is the non-monotone example of these tests (``W = 8``, ``L0 = 512``, ``L1 = 100000``,
``B = 0.3``: ``G`` rises from ``G(1) = 0.40986`` to an interior maximum near
``alpha = 1.0446``); the maximum is
located here independently, by mpmath root finding on ``G'`` at 50 digits, with ``G``
from mpmath's Hurwitz zeta (checked against a direct sum below).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import warnings
from decimal import Decimal

import mpmath
import pytest

from priors.margin import (
    MAX_EVALUATIONS,
    EvaluationBudgetWarning,
    MarginInputError,
    format_result,
    select_margin,
)
from priors.margin.__main__ import main

W, L0, L1, B = 8, 512, 100000, "0.3"
DPS = 50


def growth(alpha: mpmath.mpf) -> mpmath.mpf:
    """``G = D^+_{L1} - D^-_{L0}`` at ``alpha > 1`` (docs/theory.md §5, §7), Hurwitz tails.

    At least 50 digits, more if the caller works at more (``mpmath.diff`` raises the
    precision to resolve its step: rounding ``alpha`` back to 50 digits would lose it).
    """
    with mpmath.workdps(max(DPS, mpmath.mp.dps)):
        alpha = mpmath.mpf(alpha)
        s_w = mpmath.fsum(mpmath.mpf(k) ** -alpha for k in range(1, W + 1))
        head = mpmath.zeta(alpha, W + 1)
        t1, t0 = head - mpmath.zeta(alpha, L1 + 1), head - mpmath.zeta(alpha, L0 + 1)
        e = mpmath.exp(2 * mpmath.mpf(B))
        return e * t1 / (s_w + e * t1) - t0 / (e * s_w + t0)


def growth_at(delta: float) -> mpmath.mpf:
    """``G(1 + delta)`` with ``1 + delta`` formed exactly from the float ``delta``."""
    with mpmath.workprec(64 + max(0, -math.frexp(delta)[1])):
        alpha = mpmath.mpf(1) + mpmath.mpf(delta)
    return growth(alpha)


def _maximum() -> tuple[mpmath.mpf, mpmath.mpf]:
    """``(alpha_m, G(alpha_m))``: the interior maximum, from ``G'(alpha_m) = 0`` (mpmath)."""
    with mpmath.workdps(DPS):
        alpha_m = mpmath.findroot(lambda a: mpmath.diff(growth, a), mpmath.mpf("1.0446"))
        return alpha_m, growth(alpha_m)


ALPHA_M, G_MAX = _maximum()
#: tol 1e-12 above and below the maximum, as the float64 decimals select_margin accepts
#: (rounding to float64 moves them by at most 3e-17, far below the 1e-12 that matters)
TOL_ABOVE = repr(float(G_MAX + mpmath.mpf("1e-12")))
TOL_BELOW = repr(float(G_MAX - mpmath.mpf("1e-12")))


def test_reference_is_a_maximum_and_agrees_with_direct_sum():
    """The independent reference itself: a direct 50-digit sum at alpha_m, and G'' < 0."""
    with mpmath.workdps(DPS):
        terms = [mpmath.mpf(k) ** -ALPHA_M for k in range(1, L1 + 1)]
        s_w, t0, t1 = mpmath.fsum(terms[:W]), mpmath.fsum(terms[W:L0]), mpmath.fsum(terms[W:])
        e = mpmath.exp(2 * mpmath.mpf(B))
        direct = e * t1 / (s_w + e * t1) - t0 / (e * s_w + t0)
        assert abs(direct - G_MAX) < mpmath.mpf(10) ** -40  # 50 digits less summation error
        assert mpmath.diff(growth, ALPHA_M, 2) < 0
    assert 1.04 < ALPHA_M < 1.05 and growth(mpmath.mpf("1.000001")) < G_MAX - mpmath.mpf("1e-3")


@pytest.fixture(scope="module")
def above():
    """tol = max G + 1e-12, default budget: one run, shared (it spends the whole budget)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = select_margin(W, L1, TOL_ABOVE, lmin=L0, score_bound=B)
    return r, caught


def test_near_maximum_stops_at_budget_honestly(above):
    r, caught = above
    # the budget, then the closest-approach search (62) and the supremum's B&B (<= 150)
    assert r.budget_exhausted and r.max_evaluations == MAX_EVALUATIONS
    assert r.evaluations <= MAX_EVALUATIONS + 2 + 62 + 150
    assert not r.resolved and not r.delta_lo_proven
    # exactly one warning, of the budget class
    assert [w.category for w in caught] == [EvaluationBudgetWarning]
    assert "evaluation budget" in str(caught[0].message)
    lo, hi = r.delta_bracket
    assert lo == 0.0 < hi and r.delta == hi
    # what is claimed proven is true: sup over alpha >= 1 + delta_hi of G <= tol (G falls
    # beyond the maximum, and alpha_m < 1 + delta_hi); 50 digits resolve G - tol to 1e-45
    tau = mpmath.mpf(TOL_ABOVE)
    assert growth_at(hi) <= tau and ALPHA_M < 1 + hi
    s_lo, s_hi = r.sup_value
    assert s_lo <= s_hi <= float(TOL_ABOVE) and Decimal(s_hi) <= Decimal(TOL_ABOVE)
    # the reason names the budget and how close G comes to tol: tol - max G = 1e-12 exactly
    # by construction; the reported point value can only be farther (G <= max G), and
    # golden section puts it within ~1e-8 of alpha_m, where G is below max G by ~1e-16
    for text in (r.delta_lo_reason, r.unresolved_reason):
        assert "evaluation budget of 20000" in text and "local maximum of G" in text
    assert r.delta_lo_reason.startswith("NOT proven")
    gap = float(re.search(r"G comes within ([0-9.e+-]+) of tol", r.delta_lo_reason).group(1))
    assert 1.0e-12 <= gap <= 1.1e-12
    where = float(re.search(r"at alpha = ([0-9.]+), has tol - G", r.delta_lo_reason).group(1))
    assert abs(where - ALPHA_M) < 1e-6


def test_near_maximum_text_and_json_say_it_plainly(above):
    r, _ = above
    text = format_result(r)
    assert "resolved   NO: the evaluation budget of 20000" in text
    assert "delta_lo: NOT proven" in text and "G(1 + delta_lo) > tol proven" not in text
    d = json.loads(r.to_json())
    assert d["resolved"] is False and d["budget_exhausted"] is True
    assert d["delta_lo_proven"] is False and d["max_evaluations"] == 20000
    assert "evaluation budget" in d["delta_lo_reason"]


def test_below_maximum_budget_keeps_a_proven_but_wide_bracket():
    """tol = max G - 1e-12: G crosses tol twice within ~1e-6 of alpha_m. A small budget runs
    out; the violation the search (or its closest-approach probe) proves must be real and
    the bracket must contain the right crossing, found here by mpmath."""
    with pytest.warns(EvaluationBudgetWarning) as caught:
        r = select_margin(W, L1, TOL_BELOW, lmin=L0, score_bound=B, max_evaluations=3000)
    assert len(caught) == 1
    assert r.budget_exhausted and not r.resolved and r.delta_lo_proven
    lo, hi = r.delta_bracket
    tau = mpmath.mpf(TOL_BELOW)
    assert growth_at(lo) > tau >= growth_at(hi)
    with mpmath.workdps(DPS):
        crossing = mpmath.findroot(lambda a: growth(a) - tau,
                                   (ALPHA_M + mpmath.mpf("1e-9"), ALPHA_M + mpmath.mpf("1e-4")),
                                   solver="anderson")
    assert 1 + lo < crossing <= 1 + hi
    assert "proven but has relative width" in r.unresolved_reason
    assert r.delta_lo_reason.startswith("G(1 + delta_lo) > tol proven")


def test_a_budget_too_small_is_not_blamed_on_a_maximum():
    """40 evaluations on the non-monotone command (tol = 0.411, a transversal crossing): the
    search is cut short with a wide bracket. G is far from tol at both ends (checked here
    with mpmath, independently of the balls the text quotes), and the text says the budget
    was small, not that tol sits near a local maximum; the near-maximum run above (control)
    says it could be either."""
    with pytest.warns(EvaluationBudgetWarning):
        r = select_margin(W, L1, "0.411", lmin=L0, score_bound=B, max_evaluations=40)
    lo, hi = r.delta_bracket
    assert r.delta_lo_proven and not r.resolved
    tau = mpmath.mpf("0.411")
    assert growth_at(lo) - tau > 1e-6 * tau and tau - growth_at(hi) > 1e-6 * tau
    assert "most likely the budget is simply small" in r.unresolved_reason
    assert "local maximum" not in r.unresolved_reason
    assert "budget is simply small" in format_result(r)


def test_near_maximum_says_it_could_be_either(above):
    r, _ = above
    assert "either tol is within a tiny distance of a local maximum" in r.unresolved_reason
    assert "or the budget is simply small" in r.unresolved_reason


def test_tiny_budget_is_still_honest():
    """max_evaluations = 1 on the non-monotone command (tol = 0.411 < max G): the sweep stops at
    once; delta_hi is the certified half-line end, and the closest-approach probe finds the
    maximum, where G exceeds tol by 1.6e-3: a proven violation."""
    with pytest.warns(EvaluationBudgetWarning):
        r = select_margin(W, L1, "0.411", lmin=L0, score_bound=B, max_evaluations=1)
    lo, hi = r.delta_bracket
    assert r.budget_exhausted and not r.resolved and r.delta_lo_proven
    assert growth_at(lo) > mpmath.mpf("0.411") >= growth_at(hi)
    assert hi == r.alpha_max - 1.0  # nothing was certified but the half-line


@pytest.mark.parametrize(("kwargs", "reference"), [
    # docs/theory.md §7 reference table (10 digits), as pinned by test_margin.test_reference_table
    ({"window": 512, "lmax": 65536, "growth_tol": 0.1}, "0.3054437527"),
    ({"window": 64, "lmax": 4096, "growth_tol": 0.1}, "0.4589094374"),
    ({"window": 512, "lmax": 65536, "growth_tol": 0.05, "lmin": 4096}, "0.2584215485"),
    ({"window": 512, "lmax": 65536, "growth_tol": 0.1, "score_bound": 0.5}, "0.4618002856"),
])
def test_budget_does_not_change_a_search_that_fits(kwargs, reference):
    """Default budget, no budget to speak of, and a budget of exactly the evaluations the
    run made: the same result to the bit (only the recorded budget differs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = select_margin(**kwargs)
        unlimited = select_margin(**kwargs, max_evaluations=10**12)
        tight = select_margin(**kwargs, max_evaluations=r.evaluations)
    assert r.resolved and not r.budget_exhausted
    assert f"{r.delta:.10f}" == reference
    for other in (unlimited, tight):
        a, b = r.to_dict(), other.to_dict()
        a.pop("max_evaluations"), b.pop("max_evaluations")
        assert a == b


def test_budget_just_short_is_reported():
    """One evaluation fewer than the search needs (the non-monotone command, 558 of them in all
    with the supremum): it must stop and say so rather than print the resolved bracket."""
    r = select_margin(W, L1, "0.411", lmin=L0, score_bound=B)
    with pytest.warns(EvaluationBudgetWarning):
        short = select_margin(W, L1, "0.411", lmin=L0, score_bound=B,
                              max_evaluations=r.evaluations // 2)
    assert r.resolved and not short.resolved and short.budget_exhausted
    lo, hi = short.delta_bracket
    assert hi >= r.delta  # a certified end, never past the true margin
    assert growth_at(hi) <= mpmath.mpf("0.411")
    if short.delta_lo_proven:
        assert growth_at(lo) > mpmath.mpf("0.411")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "abc", "", None])
def test_bad_budget_names_argument(bad):
    with pytest.raises(MarginInputError) as info:
        select_margin(64, 4096, 0.1, max_evaluations=bad)
    assert info.value.argument == "max_evaluations"


def test_cli_budget_option(capsys):
    assert main(["--window", "64", "--lmax", "4096", "--tol", "0.1",
                 "--max-evaluations", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--max-evaluations" in err


def test_cli_budget_runs_out_in_a_real_process():
    """Through ``python -m priors.margin``: exit 0, one warning line, honest JSON."""
    argv = ["--window", str(W), "--lmin", str(L0), "--lmax", str(L1), "--tol", TOL_ABOVE,
            "--score-bound", B, "--max-evaluations", "500", "--json"]
    proc = subprocess.run([sys.executable, "-m", "priors.margin", *argv],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0
    assert proc.stderr.count("EvaluationBudgetWarning") == 1
    d = json.loads(proc.stdout)
    assert d["resolved"] is False and d["budget_exhausted"] is True
    assert d["delta_lo_proven"] is False and d["max_evaluations"] == 500
    assert growth_at(d["delta_bracket"][1]) <= mpmath.mpf(TOL_ABOVE)


# ------------------------------------------------------------------------ priors.diagnose


def _diagnosis(tmp_path):
    from priors.diagnose import diagnose

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2,
                                "num_attention_heads": 4}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return diagnose(str(path), window=64, lengths=[4096], tol=0.1)


def test_diagnose_report_says_when_lower_end_is_not_proven(tmp_path, above):
    """The checkpoint report must not print "proven bracket" for a margin whose lower end
    is not proven (here: the budget-exhausted result above, put where the report reads it)."""
    diag = _diagnosis(tmp_path)
    assert diag.margin is not None and diag.margin.delta_lo_proven
    text = diag.to_text()
    assert "proven bracket [" in text  # the ordinary case is unchanged
    diag.margin = above[0]
    text = diag.to_text()
    assert "proven bracket" not in text
    assert "lower end not proven: NOT proven: the evaluation budget" in text
    d = diag.to_dict()["margin"]
    assert d["delta_lo_proven"] is False and "lower end not proven" in d["meaning"]

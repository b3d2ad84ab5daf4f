"""``select_margin``: the smallest exponent margin within a growth budget (docs/theory.md §7).

Validates the inputs once (``priors.margin.validate``), runs the certified search
(``priors.margin.search``, Arb ball arithmetic) at ``ceil(dps log2 10) + 8`` bits, once more
at twice the bits if the balls could not separate the growth from the budget
(``_search``), establishes the supremum of the growth beyond the margin, one function per
method of ``SUP_METHODS`` (``_sup_monotone``, ``_sup_crossing``, ``_sup_branch_and_bound``),
and records what is proven and what is not (``_proof_status``). The sentences that say so
are written by ``priors.margin.format``; nothing here formats prose. ``certify=True`` adds
ball enclosures of every reported number and an independent mpmath re-evaluation of the
growth at ``delta`` (``_certificate``, the mpmath power sums of ``priors.harmonic``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from priors.margin import format as explain
from priors.margin.format import exact_one_plus
from priors.margin.result import (
    SUP_BRANCH_AND_BOUND,
    SUP_CROSSING,
    SUP_MONOTONE,
    EvaluationBudgetWarning,
    MarginResult,
)
from priors.margin.validate import MAX_EVALUATIONS, MarginInputs, as_budget, validate_inputs

__all__ = ["BRACKET_RTOL", "select_margin"]

#: Relative width targeted for ``[delta_lo, delta_hi]`` (at most 1e-9 is what ten printed
#: digits need; 1e-12 costs ~10 more evaluations and makes those digits safe from rounding).
BRACKET_RTOL = 1e-12


def alpha_up(delta: float) -> float:
    """The smallest float ``>= 1 + delta`` (exact rationals; docs/theory.md §7).

    ``1.0 + delta`` rounds to nearest: for a small ``delta`` it can land below
    ``1 + delta_hi``, even below ``1 + delta_lo`` (a proven violation), so an ``alpha``
    reported as proven safe is rounded up instead (every ``alpha >= 1 + delta_hi`` is)."""
    alpha = 1.0 + delta
    if Fraction(alpha) < 1 + Fraction(delta):
        alpha = math.nextafter(alpha, math.inf)
    return alpha


def _import_search():  # returns the module priors.margin.search
    """The certified search, imported on first use so that a missing python-flint is one
    clear ``ImportError`` (the command prints it in one line) rather than an import failure
    of the whole package."""
    try:
        from priors.margin import search
    except ImportError as exc:  # pragma: no cover - python-flint is a core dependency
        raise ImportError(
            "priors.margin needs python-flint (Arb ball arithmetic proves the bracket it "
            "reports); install it with `pip install python-flint`"
        ) from exc
    return search


def select_margin(
    window: int,
    lmax: int,
    growth_tol: float | str,
    *,
    lmin: int | None = None,
    score_bound: float = 0.0,
    dps: int = 30,
    certify: bool = False,
    max_evaluations: int = MAX_EVALUATIONS,
) -> MarginResult:
    """Smallest ``delta* >= 0`` with ``sup_{alpha >= 1 + delta*} G(alpha) <= tol``
    (docs/theory.md §7).

    ``G(alpha) = D^+_{L1}(W) - D^-_{L0}(W)`` for the log-distance prior
    ``b(d) = -alpha ln(1 + d)`` under content scores ``|s| <= B`` (docs/theory.md §5); ``B = 0``
    gives the exact distant masses; ``tol = growth_tol`` is the growth budget (``tau`` in
    docs/theory.md §7). The supremum over ``alpha`` is established, not assumed
    (``MarginResult.sup_method``): by the proved monotonicity of ``G`` when ``L0 = W``
    (``"monotone"``); otherwise by the certified sweep of ``priors.margin.search``, which
    bounds ``G <= tol`` beyond ``delta_hi``, together with the proven violation at
    ``delta_lo`` (``"crossing"``: the supremum is ``tol``, attained at ``delta*``) or, where
    none is proven, a certified branch and bound (``"branch-and-bound"``).

    Parameters
    ----------
    window, lmax : int
        ``W >= 1`` and ``L1 > W`` (integral floats such as ``1e15`` accepted; ``<= 1e18``
        and below ``10**dps``).
    growth_tol : float or str
        The growth budget ``tol in (0, 1)``; read as the decimal it prints as (a string
        keeps its digits).
    lmin : int, optional
        ``L0`` in ``[W, L1)``; defaults to ``W``.
    score_bound : float or str
        ``B >= 0`` (at most 1e6).
    dps : int
        Working precision in decimal digits (``DPS_MIN``..``DPS_MAX``); Arb works at
        ``ceil(dps log2 10) + 8`` bits.
    certify : bool
        Attach ball enclosures of every reported number and an mpmath cross-check.
    max_evaluations : int
        Budget of growth evaluations for the search (both precisions together; the
        supremum's branch and bound adds at most 150). When it runs out the result keeps
        what was proven (``delta_hi`` safe; ``delta_lo`` only if a violation was proven),
        has ``resolved = False`` and ``budget_exhausted = True``, and an
        ``EvaluationBudgetWarning`` is issued. Only ``growth_tol`` within a tiny distance of a
        local maximum of ``G`` (or tangent to it) needs more than a few thousand.

    Returns
    -------
    MarginResult

    Raises
    ------
    MarginInputError
        (a ``ValueError``) naming the bad argument.

    Examples
    --------
    The defining property, at the returned bracket (``B = 0``, ``L0 = W``, so
    ``G = D_{L1} = T / S_{L1}``), re-evaluated with mpmath's ``harmonic_tail``:

    >>> from mpmath import mpf, workdps
    >>> from priors.harmonic import harmonic_tail
    >>> r = select_margin(8, 256, 0.2)
    >>> def growth(delta):
    ...     with workdps(40):
    ...         a = 1 + mpf(delta)
    ...         return harmonic_tail(8, 256, a, dps=40) / harmonic_tail(0, 256, a, dps=40)
    >>> growth(r.delta_bracket[1]) <= 0.2 < growth(r.delta_bracket[0])
    True
    """
    inputs = validate_inputs(window, lmax, growth_tol, lmin, score_bound, dps)
    budget = as_budget(max_evaluations)
    search = _import_search()
    problem, outcome, spent = _search(search, inputs, budget)
    delta_hi = outcome.delta_hi
    growth_ball = problem.growth(delta_hi)
    unresolved, lo_reason = _proof_status(search, problem, outcome, budget)
    if inputs.lmin == inputs.window:
        sup = _sup_monotone(search, growth_ball, delta_hi)
    elif outcome.delta_lo is not None and outcome.resolved:
        sup = _sup_crossing(search, outcome, inputs, growth_ball)
    else:
        sup = _sup_branch_and_bound(search, problem, outcome, inputs)
    if not sup.lower <= sup.upper:  # pragma: no cover - both ends are proven bounds
        raise AssertionError(f"ill-formed supremum enclosure [{sup.lower!r}, {sup.upper!r}]")
    enclosures, cross = (
        _certificate(problem, outcome, inputs, growth_ball) if certify else (None, None)
    )
    d_max_hi, d_min_lo = problem.pieces(delta_hi)
    return MarginResult(
        window=inputs.window,
        lmin=inputs.lmin,
        lmax=inputs.lmax,
        growth_tol=inputs.growth_tol,
        score_bound=inputs.score_bound,
        delta=delta_hi,
        alpha=alpha_up(delta_hi),
        delta_bracket=(0.0 if outcome.delta_lo is None else outcome.delta_lo, delta_hi),
        growth=float(growth_ball),
        distant_mass_lmin=float(d_min_lo),
        distant_mass_lmax=float(d_max_hi),
        dps=inputs.dps,
        certified=certify,
        sup_location=sup.location,
        sup_value=(sup.lower, sup.upper),
        sup_at_margin=sup.at_margin,
        sup_method=sup.method,
        sup_explanation=sup.explanation,
        alpha_max=1.0 + outcome.delta_max,
        boxes=outcome.boxes,
        evaluations=spent + problem.evaluations,
        precision_bits=problem.prec,
        resolved=outcome.resolved,
        enclosures=enclosures,
        cross_check_error=cross,
        delta_lo_proven=outcome.delta_lo is not None,
        delta_lo_reason=lo_reason,
        max_evaluations=budget,
        budget_exhausted=outcome.exhausted,
        unresolved_reason=unresolved,
    )


def _search(search: Any, inputs: MarginInputs, budget: int) -> tuple[Any, Any, int]:
    """``(problem, outcome, spent)``: the certified search at ``ceil(dps log2 10) + 8``
    bits, and once more at twice the bits, in what is left of the budget, if the balls
    could not separate the growth from ``tol`` (``spent``: the evaluations of the first)."""
    bits = math.ceil(inputs.dps * math.log2(10)) + 8
    args = (inputs.window, inputs.lmin, inputs.lmax, inputs.growth_tol_text,
            inputs.score_bound_text)
    problem = search.GrowthProblem(*args, bits, max_evaluations=budget)
    outcome = search.certified_search(problem, BRACKET_RTOL)
    spent = 0
    if not (outcome.resolved or outcome.exhausted or problem.evaluations >= budget):
        spent = problem.evaluations
        problem = search.GrowthProblem(*args, 2 * bits, max_evaluations=budget - spent)
        outcome = search.certified_search(problem, BRACKET_RTOL)
    return problem, outcome, spent


def _proof_status(search: Any, problem: Any, outcome: Any, budget: int) -> tuple[str, str]:
    """``(unresolved_reason, delta_lo_reason)``; an unresolved search warns
    (``EvaluationBudgetWarning`` when the budget ran out, else ``RuntimeWarning``)."""
    delta_hi = outcome.delta_hi
    unresolved, budget_lo_reason = "", ""
    band: float | None = None
    if outcome.exhausted:
        unresolved, budget_lo_reason = _budget_note(search, problem, outcome, budget)
        # stacklevel 3: the caller of select_margin
        warnings.warn(unresolved, EvaluationBudgetWarning, stacklevel=3)
    elif not outcome.resolved:
        band = _float_band_point(problem, outcome)
        if band is not None:
            unresolved = explain.unresolved_float_band(
                problem.tol, problem.tol_safe, band,
                (delta_hi - (outcome.delta_lo or 0.0)) / delta_hi, BRACKET_RTOL,
                outcome.delta_lo is not None,
            )
        else:
            unresolved = explain.unresolved_tangency(
                problem.tol, 1 + delta_hi, problem.prec, outcome.delta_lo is not None
            )
        warnings.warn(unresolved, RuntimeWarning, stacklevel=3)
    if outcome.delta_lo is not None:
        return unresolved, explain.LO_PROVEN
    if delta_hi == 0.0:
        return unresolved, explain.LO_NONE_NEEDED
    if outcome.exhausted:
        return unresolved, budget_lo_reason
    if not outcome.resolved and band is not None:
        return unresolved, explain.lo_not_proven_band(problem.tol, problem.tol_safe)
    return unresolved, explain.lo_not_proven(problem.prec, 1 + delta_hi)


def _float_band_point(search_problem: Any, outcome: Any) -> float | None:
    """A ``delta`` just below ``delta_hi`` where ``G`` is proven to lie in ``(t, tol]``,
    ``t = GrowthProblem.tol_safe`` the largest float ``<= tol``, or ``None``.

    Safety is certified against ``t`` (so every reported float bound stays ``<= tol``) and a
    violation against ``tol``; where ``tol`` is not a float, ``G`` crosses the band
    ``(t, tol]`` over a ``delta``-interval of width about ``(tol - t) / |G'|``, on which no
    point can be certified either way. Near ``delta* ~ 0`` that interval is wider than the
    targeted ``BRACKET_RTOL delta*``, and the search ends unresolved where ``G`` crosses
    transversally, at any precision. The points tried are those the search stopped at: the
    midpoint of the bracket and ``delta_hi (1 - rtol 2^-j)`` (cached evaluations, or one
    more each)."""
    hi = outcome.delta_hi
    lo = 0.0 if outcome.delta_lo is None else outcome.delta_lo
    if hi <= 0.0 or search_problem.tol_safe_ball >= search_problem.tol_ball:
        return None
    candidates = [lo + (hi - lo) / 2.0] + [hi - hi * BRACKET_RTOL * 2.0**-j for j in (1, 2)]
    for p in candidates:
        if not lo < p < hi:
            continue
        g = search_problem.growth(p)
        if bool(g > search_problem.tol_safe_ball) and bool(g <= search_problem.tol_ball):
            return p
    return None


def _budget_note(search: Any, problem: Any, outcome: Any, budget: int) -> tuple[str, str]:
    """``(unresolved_reason, delta_lo_reason)`` for a search that spent its budget.

    Every number quoted is an enclosure end of a ball the search evaluated (rounded
    outward), so the sentences of ``priors.margin.format`` are true as stated.
    """
    import flint

    hi = outcome.delta_hi
    with flint.ctx.workprec(problem.prec + 16):
        if outcome.delta_lo is not None:
            below_at_hi = problem.tol_ball - problem.growth(hi)
            above_at_lo = problem.growth(outcome.delta_lo) - problem.tol_ball
            unresolved = explain.budget_bracket_wide(
                budget, (hi - outcome.delta_lo) / hi, BRACKET_RTOL,
                (search.float_down(above_at_lo), search.float_up(above_at_lo)),
                (search.float_down(below_at_hi), search.float_up(below_at_hi)),
                float(problem.tol),
            )
            return unresolved, ""
        near = outcome.closest
        gap = problem.tol_ball - problem.growth(near)
        gap_lo, gap_hi = search.float_down(gap), search.float_up(gap)
    return explain.budget_no_violation(budget, 1 + near, (gap_lo, gap_hi), float(problem.tol))


@dataclass(frozen=True)
class _Supremum:
    """``sup G`` over ``alpha >= 1 + delta_hi``: where, the proven enclosure, how."""

    location: float
    lower: float
    upper: float
    at_margin: bool
    method: str
    explanation: str


def _sweep_text(outcome: Any, inputs: MarginInputs) -> str:
    return explain.describe_sweep(
        outcome.boxes - 1, 1 + outcome.delta_hi, 1.0 + outcome.delta_max,
        product_form=inputs.score_bound == 0,
    )


def _sup_monotone(search: Any, growth_ball: Any, delta_hi: float) -> _Supremum:
    """``L0 = W``: ``G = D^+_{L1}`` is nonincreasing (proved), so the supremum is the ball
    ``G(1 + delta_hi)``."""
    return _Supremum(alpha_up(delta_hi), search.float_down(growth_ball),
                     search.float_up(growth_ball), True, SUP_MONOTONE, explain.sup_monotone())


def _sup_crossing(search: Any, outcome: Any, inputs: MarginInputs,
                  growth_ball: Any) -> _Supremum:
    """A resolved search with a proven violation: the supremum lies between
    ``G(1 + delta_hi)`` (a point value) and the largest certified box bound (``G`` need not
    be monotone beyond ``delta_hi``), a float ``<= tol`` (``GrowthProblem.tol_safe``)."""
    return _Supremum(alpha_up(outcome.delta_hi), search.float_down(growth_ball),
                     outcome.sup_upper, True, SUP_CROSSING,
                     explain.sup_crossing(_sweep_text(outcome, inputs)))


def _sup_branch_and_bound(search: Any, problem: Any, outcome: Any,
                          inputs: MarginInputs) -> _Supremum:
    """Otherwise: the maximum beyond ``delta_hi`` located by branch and bound; its upper
    end is the smaller of that bound and the sweep's (a float ``<= tol``; the branch and
    bound may be looser)."""
    delta_hi = outcome.delta_hi
    sup = search.locate_sup(problem, delta_hi)
    return _Supremum(
        alpha_up(sup.location), sup.lower, min(sup.upper, outcome.sup_upper),
        sup.location == delta_hi, SUP_BRANCH_AND_BOUND,
        explain.sup_branch_and_bound(_sweep_text(outcome, inputs), 1 + delta_hi, sup.boxes),
    )


def _certificate(problem: Any, outcome: Any, inputs: MarginInputs,
                 growth_ball: Any) -> tuple[tuple[tuple[str, str], ...], float]:
    """Ball enclosures of every reported number (20 digits, radius shown) and the mpmath
    cross-check of the growth at ``delta_hi``."""
    import flint

    delta_hi = outcome.delta_hi
    d_max_hi, d_min_lo = problem.pieces(delta_hi)
    with flint.ctx.workprec(problem.prec + 16):
        lo_ball = problem.growth(outcome.delta_lo) if outcome.delta_lo is not None else None
        entries = (
            ("alpha", f"{exact_one_plus(delta_hi)} (exact)"),
            ("tol", problem.tol_ball.str(20, radius=True)),
            ("score_factor_e2B", problem.factor.str(20, radius=True)),
            ("distant_mass_lmin", d_min_lo.str(20, radius=True)),
            ("distant_mass_lmax", d_max_hi.str(20, radius=True)),
            ("growth", growth_ball.str(20, radius=True)),
            ("growth_at_delta_lo", "none (no violation proven)" if lo_ball is None
             else lo_ball.str(20, radius=True)),
            ("distant_mass_lmax_at_alpha_max",
             problem.pieces(outcome.delta_max)[0].str(20, radius=True)),
        )
    cross = _cross_check(inputs.window, inputs.lmin, inputs.lmax, inputs.score_bound_text,
                         delta_hi, inputs.dps, growth_ball)
    return entries, cross


def _cross_check(
    w: int, l0: int, l1: int, b_text: str, delta: float, dps: int, ball: object
) -> float:
    """Re-evaluate ``G(1 + delta)`` with mpmath (Hurwitz power sums of ``priors.harmonic``)
    and compare to the ball."""
    import mpmath

    from priors.content_bounds import distant_mass_bounds
    from priors.harmonic import _power_sum

    work = dps + 10
    with mpmath.workprec(64 + max(0, -math.frexp(delta)[1]) if delta else 64):
        alpha = mpmath.mpf(1) + mpmath.mpf(delta)  # exact
    with mpmath.workdps(work):
        one = mpmath.mpf(1)  # H tails: power sums at shift 1 (work may pass DPS_MAX)
        s_w = _power_sum(0, w, alpha, one, work)
        factor = mpmath.exp(2 * mpmath.mpf(b_text))
        t1 = _power_sum(w, l1, alpha, one, work)
        t0 = _power_sum(w, l0, alpha, one, work)
        g = distant_mass_bounds(s_w, t1, factor)[1] - distant_mass_bounds(s_w, t0, factor)[0]
        mid = mpmath.mpf(ball.mid().str(work + 5, radius=False))
        rad = mpmath.mpf(ball.rad().str(5, radius=False))
        err = abs(g - mid)
        allowed = rad + mpmath.mpf(10) ** (3 - dps) * max(abs(g), mpmath.mpf(10) ** -300)
        ok = err <= allowed
        err_f = float(err)
    if not ok:
        warnings.warn(
            f"mpmath cross-check of the growth differs from the Arb ball by {err_f:.3g}",
            RuntimeWarning,
            stacklevel=4,  # the caller of select_margin (past _certificate and select_margin)
        )
    return err_f



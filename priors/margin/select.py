"""``select_margin``: the smallest exponent margin within a growth budget (docs/theory.md §7).

Validates the inputs (``priors.margin.validate``), runs the certified search
(``priors.margin.search``, Arb ball arithmetic) at ``ceil(dps log2 10) + 8`` bits, once more
at twice the bits if the balls could not separate the growth from the budget, establishes
the supremum of the growth beyond the margin (``SUP_METHODS``) and says in words what is
proven and what is not (``delta_lo_reason``, ``unresolved_reason``). ``certify=True`` adds
ball enclosures of every reported number and an independent mpmath re-evaluation of the
growth at ``delta`` (``priors.harmonic.harmonic_tail``).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from priors.margin.format import exact_one_plus
from priors.margin.result import (
    SUP_BRANCH_AND_BOUND,
    SUP_CROSSING,
    SUP_MONOTONE,
    EvaluationBudgetWarning,
    MarginResult,
)
from priors.margin.validate import MAX_EVALUATIONS, as_budget, validate_inputs

__all__ = ["BRACKET_RTOL", "select_margin"]

#: Relative width targeted for ``[delta_lo, delta_hi]`` (at most 1e-9 is what ten printed
#: digits need; 1e-12 costs ~10 more evaluations and makes those digits safe from rounding).
BRACKET_RTOL = 1e-12

_F = TypeVar("_F", bound=Callable[..., MarginResult])


def _accepts_tol_keyword(func: _F) -> _F:
    """Let ``func`` take its ``growth_tol`` argument under the former keyword ``tol``.

    ``tol=`` still works and issues a ``DeprecationWarning`` naming ``growth_tol`` (at the
    caller's line); giving both is a ``TypeError``, as for any argument given twice.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> MarginResult:
        if "tol" in kwargs:
            if "growth_tol" in kwargs or len(args) >= 3:
                raise TypeError(
                    f"{func.__name__}() got both growth_tol and its former name tol"
                )
            warnings.warn(
                f"{func.__name__}(tol=...) is deprecated; the growth budget is now called "
                "growth_tol (pass it as growth_tol=... or as the third positional argument)",
                DeprecationWarning,
                stacklevel=2,
            )
            kwargs["growth_tol"] = kwargs.pop("tol")
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


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


@_accepts_tol_keyword
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
    """Smallest ``delta* >= 0`` with ``sup_{alpha >= 1 + delta*} G(alpha) <= tol`` (docs/theory.md §7).

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
        keeps its digits). The former keyword ``tol=`` is accepted with a
        ``DeprecationWarning``.
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
    w, l0, l1, tol_f, tol_text, b_f, b_text, dps = validate_inputs(
        window, lmax, growth_tol, lmin, score_bound, dps
    )
    budget = as_budget(max_evaluations)
    search = _import_search()
    import flint

    bits = math.ceil(dps * math.log2(10)) + 8
    problem = search.GrowthProblem(w, l0, l1, tol_text, b_text, bits, max_evaluations=budget)
    outcome = search.certified_search(problem, BRACKET_RTOL)
    spent = 0
    if not (outcome.resolved or outcome.exhausted or problem.evaluations >= budget):
        spent = problem.evaluations  # one retry at twice the precision, in what is left
        bits *= 2
        problem = search.GrowthProblem(
            w, l0, l1, tol_text, b_text, bits, max_evaluations=budget - spent
        )
        outcome = search.certified_search(problem, BRACKET_RTOL)
    delta_hi = outcome.delta_hi
    growth_ball = problem.growth(delta_hi)
    unresolved = ""
    if outcome.exhausted:
        unresolved, budget_lo_reason = _budget_note(search, problem, outcome, budget)
        # stacklevel 3: the caller of select_margin, past the _accepts_tol_keyword wrapper
        warnings.warn(unresolved, EvaluationBudgetWarning, stacklevel=3)
    elif not outcome.resolved:
        unresolved = (
            f"could not separate the growth from tol = {tol_text} near alpha = "
            f"{1 + outcome.delta_hi!r} at {bits} bits (tangency?); delta_hi is proven, "
            + ("delta_lo is a proven violation but the bracket is wide"
               if outcome.delta_lo is not None else "no violation below it is proven")
        )
        warnings.warn(unresolved, RuntimeWarning, stacklevel=3)
    delta_lo = 0.0 if outcome.delta_lo is None else outcome.delta_lo
    lo_proven = outcome.delta_lo is not None
    if lo_proven:
        lo_reason = "G(1 + delta_lo) > tol proven (Arb ball strictly above tol)"
    elif delta_hi == 0.0:
        lo_reason = (
            "no violation exists: sup over alpha >= 1 of G <= tol is certified, so "
            "delta* = 0 exactly and delta_lo = 0 is the floor delta >= 0 of the definition"
        )
    elif outcome.exhausted:
        lo_reason = budget_lo_reason
    else:
        lo_reason = (
            f"NOT proven: no delta below delta_hi was shown to violate (the Arb balls at "
            f"{bits} bits could not separate G from tol near alpha = {1 + delta_hi!r}: a "
            "tangency of G with tol, or too little precision); delta_lo = 0 is only the "
            "floor delta >= 0 of the definition, delta* may be anywhere in [0, delta_hi]"
        )
    d_max_hi, d_min_lo = problem.pieces(delta_hi)
    alpha_max = 1.0 + outcome.delta_max
    monotone = l0 == w
    tol_up = math.nextafter(tol_f, math.inf)  # >= the exact decimal tol (float is nearest)
    sweep = (
        f"certified sweep: {outcome.boxes - 1} boxes [a, b] covering "
        f"[{1 + delta_hi:.12g}, {alpha_max:g}], each with D+_L1(a) - D-_L0(b) <= tol "
        "(both pieces nonincreasing in alpha"
        + ("; or, at B = 0, P(a) Q(b) <= tol with G = P Q, P = (S_L1 - S_L0)/S_L1 "
           "nonincreasing, Q = S_W/S_L0 nondecreasing" if b_f == 0 else "")
        + f"), and D+_L1({alpha_max:g}) <= tol for the half-line beyond"
    )
    if monotone:
        sup_at, sup_lo, sup_hi = 1.0 + delta_hi, search.float_down(growth_ball), search.float_up(
            growth_ball
        )
        method = SUP_MONOTONE
        explanation = (
            "monotone (proved): L0 = W so G = D+_L1(W), nonincreasing in alpha "
            "(the ratio T_l/S_W has d/dalpha ln(T_l/S_W) <= 0); supremum at alpha = 1 + delta"
        )
        at_margin = True
    elif outcome.delta_lo is not None and outcome.resolved:
        # G(1 + delta_hi) is a point value (lower end); the largest certified box bound is
        # the upper end (G need not be monotone beyond delta_hi, so G(1 + delta_hi) is not)
        sup_at = 1.0 + delta_hi
        sup_lo, sup_hi = search.float_down(growth_ball), min(outcome.sup_upper, tol_up)
        method = SUP_CROSSING
        explanation = (
            sweep + "; G(1 + delta_lo) > tol proven, so by continuity the supremum over "
            "alpha >= 1 + delta* is tol, attained at 1 + delta*: over alpha >= 1 + delta_hi "
            "it lies between G(1 + delta_hi) and the largest certified box bound"
        )
        at_margin = True
    else:
        sup = search.locate_sup(problem, delta_hi)
        # the sweep already proved sup <= tol; the B&B bound may be looser than that
        sup_at, sup_lo = 1.0 + sup.location, sup.lower
        sup_hi = min(sup.upper, outcome.sup_upper, tol_up)
        at_margin = sup.location == delta_hi
        method = SUP_BRANCH_AND_BOUND
        explanation = (
            sweep + f"; the maximum over alpha >= {1 + delta_hi:.12g} was then located by "
            f"branch and bound ({sup.boxes} boxes)"
        )
    if not sup_lo <= sup_hi:  # pragma: no cover - both ends are proven bounds
        raise AssertionError(f"ill-formed supremum enclosure [{sup_lo!r}, {sup_hi!r}]")
    enclosures = None
    cross = None
    if certify:
        with flint.ctx.workprec(bits + 16):
            lo_ball = problem.growth(delta_lo) if outcome.delta_lo is not None else None
            entries = [
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
            ]
        enclosures = tuple(entries)
        cross = _cross_check(w, l0, l1, b_text, delta_hi, dps, growth_ball)
    return MarginResult(
        window=w,
        lmin=l0,
        lmax=l1,
        growth_tol=tol_f,
        score_bound=b_f,
        delta=delta_hi,
        alpha=1.0 + delta_hi,
        delta_bracket=(delta_lo, delta_hi),
        growth=float(growth_ball),
        distant_mass_lmin=float(d_min_lo),
        distant_mass_lmax=float(d_max_hi),
        dps=dps,
        certified=certify,
        sup_location=sup_at,
        sup_value=(sup_lo, sup_hi),
        sup_at_margin=at_margin,
        sup_method=method,
        sup_explanation=explanation,
        alpha_max=alpha_max,
        boxes=outcome.boxes,
        evaluations=spent + problem.evaluations,
        precision_bits=bits,
        resolved=outcome.resolved,
        enclosures=enclosures,
        cross_check_error=cross,
        delta_lo_proven=lo_proven,
        delta_lo_reason=lo_reason,
        max_evaluations=budget,
        budget_exhausted=outcome.exhausted,
        unresolved_reason=unresolved,
    )


def _budget_note(search: Any, problem: Any, outcome: Any, budget: int) -> tuple[str, str]:
    """``(unresolved_reason, delta_lo_reason)`` for a search that spent its budget.

    Every number quoted is an enclosure end of a ball the search evaluated (rounded
    outward), so the sentence is true as stated; only "presumably" marks the inference.
    """
    import flint

    hi = outcome.delta_hi
    head = (
        f"the evaluation budget of {budget} growth evaluations (max_evaluations, "
        "--max-evaluations) ran out before the search resolved"
    )
    with flint.ctx.workprec(problem.prec + 16):
        if outcome.delta_lo is not None:
            below_at_hi = problem.tol_ball - problem.growth(hi)
            above_at_lo = problem.growth(outcome.delta_lo) - problem.tol_ball
            lo = outcome.delta_lo
            unresolved = (
                f"{head}: the bracket [delta_lo, delta_hi] is proven but has relative width "
                f"{(hi - lo) / hi:.1e}, not {BRACKET_RTOL:g}: G(1 + delta_lo) - tol in "
                f"[{search.float_down(above_at_lo):.2e}, {search.float_up(above_at_lo):.2e}] "
                f"and tol - G(1 + delta_hi) in [{search.float_down(below_at_hi):.2e}, "
                f"{search.float_up(below_at_hi):.2e}]: G crosses tol with a tiny slope "
                "(tol is presumably within a tiny distance of a local maximum of G, or "
                "tangent to it), where the first-order box bound needs ever smaller boxes"
            )
            return unresolved, ""
        near = outcome.closest
        gap = problem.tol_ball - problem.growth(near)
        gap_lo, gap_hi = search.float_down(gap), search.float_up(gap)
    where = (
        f"G comes within {gap_hi:.1e} of tol at alpha = {1 + near!r} (tol is presumably "
        "within a tiny distance of a local maximum of G, or tangent to it)"
    )
    unresolved = (
        f"{head}: delta_hi is proven, no violation below it is proven. {where[0].upper()}"
        f"{where[1:]}: there tol - G is in [{gap_lo:.2e}, {gap_hi:.2e}] (the largest G found "
        "on [1, 1 + delta_hi], by golden-section search), and the first-order box bound "
        "needs ever smaller boxes"
    )
    lo_reason = (
        f"NOT proven: the evaluation budget of {budget} growth evaluations ran out before "
        f"any delta below delta_hi was shown to violate; {where}; delta_lo = 0 is only the "
        "floor delta >= 0 of the definition, delta* may be anywhere in [0, delta_hi]"
    )
    return unresolved, lo_reason


def _cross_check(
    w: int, l0: int, l1: int, b_text: str, delta: float, dps: int, ball: object
) -> float:
    """Re-evaluate ``G(1 + delta)`` with mpmath (``harmonic_tail``) and compare to the ball."""
    import mpmath

    from priors.content_bounds import distant_mass_bounds
    from priors.harmonic import harmonic_tail

    work = dps + 10
    with mpmath.workprec(64 + max(0, -math.frexp(delta)[1]) if delta else 64):
        alpha = mpmath.mpf(1) + mpmath.mpf(delta)  # exact
    with mpmath.workdps(work):
        s_w = harmonic_tail(0, w, alpha, dps=work)
        factor = mpmath.exp(2 * mpmath.mpf(b_text))
        t1 = harmonic_tail(w, l1, alpha, dps=work)
        t0 = harmonic_tail(w, l0, alpha, dps=work)
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
            stacklevel=4,  # the caller of select_margin (past it and its keyword wrapper)
        )
    return err_f



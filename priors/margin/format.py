"""The words of margin selection: its text reports and the sentences of its evidence.

``format_result`` prints one ``MarginResult`` (inputs, margin, proven bracket, supremum
evidence, precision); ``format_table`` one row per setting. Every printed number says its
precision, and rounding is directed where it matters: ``delta*`` is rounded *up* to the
digits the bracket width supports (a larger margin stays safe), an enclosure outward.

The sentences ``select_margin`` stores in a result are written here too, from the numbers it
computed: how the supremum beyond the margin was established, one function per method of
``SUP_METHODS`` (``sup_monotone``, ``sup_crossing``, ``sup_branch_and_bound``, with
``describe_sweep``), what ``delta_lo`` is (``LO_PROVEN``, ``LO_NONE_NEEDED``,
``lo_not_proven``) and why a search is unresolved (``unresolved_tangency``,
``budget_bracket_wide``, ``budget_no_violation``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

from priors.margin.result import MarginResult

__all__ = [
    "CLEAR_GAP",
    "LO_NONE_NEEDED",
    "LO_PROVEN",
    "budget_bracket_wide",
    "budget_no_violation",
    "describe_sweep",
    "exact_one_plus",
    "format_result",
    "format_table",
    "lo_not_proven",
    "lo_not_proven_band",
    "sup_branch_and_bound",
    "sup_crossing",
    "sup_monotone",
    "unresolved_float_band",
    "unresolved_tangency",
]

#: ``delta_lo`` of a resolved search with a proven violation.
LO_PROVEN = "G(1 + delta_lo) > tol proven (Arb ball strictly above tol)"
#: ``delta_lo`` when no margin is needed.
LO_NONE_NEEDED = (
    "no violation exists: sup over alpha >= 1 of G <= tol is certified, so "
    "delta* = 0 exactly and delta_lo = 0 is the floor delta >= 0 of the definition"
)
#: What ``delta_lo = 0`` means when no violation was proven.
_LO_FLOOR = (
    "delta_lo = 0 is only the floor delta >= 0 of the definition, delta* may be anywhere in "
    "[0, delta_hi]"
)


def lo_not_proven(bits: int, alpha: float) -> str:
    """``delta_lo`` when the balls could not separate ``G`` from ``tol`` below ``delta_hi``."""
    return (
        f"NOT proven: no delta below delta_hi was shown to violate (the Arb balls at "
        f"{bits} bits could not separate G from tol near alpha = {alpha!r}: a "
        f"tangency of G with tol, or too little precision); {_LO_FLOOR}"
    )


def unresolved_tangency(tol_text: str, alpha: float, bits: int, lo_proven: bool) -> str:
    """Why a search that did not run out of budget is unresolved."""
    return (
        f"could not separate the growth from tol = {tol_text} near alpha = "
        f"{alpha!r} at {bits} bits (tangency?); delta_hi is proven, "
        + ("delta_lo is a proven violation but the bracket is wide"
           if lo_proven else "no violation below it is proven")
    )


def unresolved_float_band(
    tol_text: str, tol_float: float, delta: float, width: float, target: float,
    lo_proven: bool,
) -> str:
    """Why a search is unresolved when ``G`` crosses the band ``(t, tol]`` between
    ``t = tol_float``, the largest float ``<= tol``, and the decimal ``tol`` (``G`` proven
    inside it at ``1 + delta``): safety is certified against ``t``, a violation against
    ``tol``, so no point of that band is decided either way, at any precision."""
    return (
        f"the bracket stops at relative width {width:.1e}, not {target:g}, where G meets the "
        f"band (t, tol] (the balls are narrow enough: G(1 + delta) at delta = {delta!r} is "
        "proven to lie in it), with "
        f"t = {Decimal(tol_float)} (exactly) the largest float <= tol = {tol_text}; "
        "delta_hi is certified "
        "against t (so that every reported float bound stays <= tol) and a violation against "
        "tol, so where G crosses that band no delta is decided either way. Proven: "
        "sup over alpha >= 1 + delta_hi of G <= t <= tol"
        + ("; G(1 + delta_lo) > tol" if lo_proven else "; no violation below delta_hi")
        + ". Not established: where delta* lies inside the bracket (only the digits its "
        "width fixes); a tol that is exactly a float (t = tol) has no such band"
    )


def lo_not_proven_band(tol_text: str, tol_float: float) -> str:
    """``delta_lo`` when ``G`` was met in the band between the largest float ``<= tol``
    and ``tol``, and no violation was proven."""
    return (
        f"NOT proven: just below delta_hi, G lies between t = {Decimal(tol_float)} (the largest "
        f"float <= tol, against which safety is certified) and tol = {tol_text}, so no delta "
        f"there is decided either way; {_LO_FLOOR}"
    )


def _budget_head(budget: int) -> str:
    return (
        f"the evaluation budget of {budget} growth evaluations (max_evaluations, "
        "--max-evaluations) ran out before the search resolved"
    )


#: Distance of ``G`` from ``tol`` (relative to ``tol``) beyond which a search that ran out
#: of budget is said to have been cut short rather than slowed by a near-tangency.
CLEAR_GAP = 1e-6
_EITHER = (
    "either tol is within a tiny distance of a local maximum of G (or tangent to it), where "
    "the first-order box bound needs ever smaller boxes, or the budget is simply small for "
    "this setting; a larger --max-evaluations tells which"
)


def budget_bracket_wide(
    budget: int, width: float, target: float,
    above_at_lo: tuple[float, float], below_at_hi: tuple[float, float], tol: float,
) -> str:
    """Why a search that proved a violation but ran out of budget is unresolved:
    ``above_at_lo`` encloses ``G(1 + delta_lo) - tol``, ``below_at_hi``
    ``tol - G(1 + delta_hi)`` (floats rounded outward). Where ``G`` is more than
    ``CLEAR_GAP`` (relative) from ``tol`` at both ends, the budget was simply too small;
    otherwise either a near-tangency or the budget, and the text says it could be both."""
    gap = min(above_at_lo[0], below_at_hi[0])
    if gap > CLEAR_GAP * tol:
        why = (
            "G is well away from tol at both ends of the bracket (by more than one part in "
            "a million), so nothing there is close to a tangency: most likely the budget is "
            "simply small for this setting, and a larger --max-evaluations narrows the bracket"
        )
    else:
        why = f"G comes within {max(gap, 0.0):.1e} of tol at an end of the bracket: {_EITHER}"
    return (
        f"{_budget_head(budget)}: the bracket [delta_lo, delta_hi] is proven but has "
        f"relative width {width:.1e}, not {target:g}: G(1 + delta_lo) - tol in "
        f"[{above_at_lo[0]:.2e}, {above_at_lo[1]:.2e}] "
        f"and tol - G(1 + delta_hi) in [{below_at_hi[0]:.2e}, {below_at_hi[1]:.2e}]; {why}"
    )


def budget_no_violation(
    budget: int, alpha: float, gap: tuple[float, float], tol: float
) -> tuple[str, str]:
    """``(unresolved_reason, delta_lo_reason)`` when the budget ran out with no violation
    proven; ``gap`` encloses ``tol - G`` at ``alpha``, the largest ``G`` found (by
    golden-section search: where to look, not a proof of the maximum)."""
    found = (
        f"the largest G found on [1, 1 + delta_hi] (golden-section search), at alpha = "
        f"{alpha!r}, has tol - G in [{gap[0]:.2e}, {gap[1]:.2e}]"
    )
    if gap[0] > CLEAR_GAP * tol:
        where = (
            f"{found}, so G does not come close to tol there: most likely the budget is "
            "simply small for this setting, and a larger --max-evaluations lets the sweep finish"
        )
    else:
        where = f"{found}: G comes within {gap[1]:.1e} of tol: {_EITHER}"
    unresolved = (
        f"{_budget_head(budget)}: delta_hi is proven, no violation below it is proven; {where}"
    )
    lo_reason = (
        f"NOT proven: the evaluation budget of {budget} growth evaluations ran out before "
        f"any delta below delta_hi was shown to violate; {where}; {_LO_FLOOR}"
    )
    return unresolved, lo_reason


def describe_sweep(boxes: int, start: float, alpha_max: float, *, product_form: bool) -> str:
    """The certified sweep over ``[start, alpha_max]`` and the half-line beyond."""
    return (
        f"certified sweep: {boxes} boxes [a, b] covering "
        f"[{start:.12g}, {alpha_max:g}], each with D+_L1(a) - D-_L0(b) <= tol "
        "(both pieces nonincreasing in alpha"
        + ("; or, at B = 0, P(a) Q(b) <= tol with G = P Q, P = (S_L1 - S_L0)/S_L1 "
           "nonincreasing, Q = S_W/S_L0 nondecreasing" if product_form else "")
        + f"), and D+_L1({alpha_max:g}) <= tol for the half-line beyond"
    )


def sup_monotone() -> str:
    """``SUP_MONOTONE``: the supremum is ``G(1 + delta_hi)`` by the proved monotonicity."""
    return (
        "monotone (proved): L0 = W so G = D+_L1(W), nonincreasing in alpha "
        "(the ratio T_l/S_W has d/dalpha ln(T_l/S_W) <= 0); supremum at alpha = 1 + delta"
    )


def sup_crossing(sweep: str) -> str:
    """``SUP_CROSSING``: the sweep ``sweep`` and a proven violation at ``delta_lo``."""
    return (
        sweep + "; G(1 + delta_lo) > tol proven, so by continuity the supremum over "
        "alpha >= 1 + delta* is tol, attained at 1 + delta*: over alpha >= 1 + delta_hi "
        "it lies between G(1 + delta_hi) and the largest certified box bound"
    )


def sup_branch_and_bound(sweep: str, start: float, boxes: int) -> str:
    """``SUP_BRANCH_AND_BOUND``: the sweep, then the maximum over ``alpha >= start``
    located in ``boxes`` boxes."""
    return (
        sweep + f"; the maximum over alpha >= {start:.12g} was then located by "
        f"branch and bound ({boxes} boxes)"
    )


def _digits(result: MarginResult) -> int:
    """Significant digits of ``delta*`` its bracket supports (10..15; 12 when ``delta* = 0``)."""
    width = result.bracket_relative_width
    if width <= 0.0:
        return 12
    return max(10, min(15, math.floor(-math.log10(width))))


def exact_one_plus(delta: float | str) -> str:
    """The exact decimal ``1 + delta`` (no rounding: ``Decimal`` at 1100 digits)."""
    with localcontext() as ctx:
        ctx.prec = 1100
        return format(Decimal(1) + Decimal(delta), "f")


def _ceil_text(value: float, digits: int, rounding: str = ROUND_CEILING) -> str:
    """``value`` rounded UP to ``digits`` significant digits (a larger margin stays safe).

    ``rounding=ROUND_FLOOR`` rounds down instead (for the lower end of an enclosure).
    """
    if value == 0.0:
        return "0"
    exact = Decimal(value)
    quantum = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    with localcontext() as ctx:
        ctx.prec = 1100  # every float is an exact decimal of at most ~770 digits
        return format(exact.quantize(quantum, rounding=rounding).normalize(), "f")


def _sup_digits(result: MarginResult) -> int:
    """Significant digits for the supremum's enclosure: 10, or as many more (at most 17)
    as it takes for the upper end, rounded up, to stay ``<= tol`` as docs/theory.md §7
    states it (the float upper end is ``<= tol``; ten digits rounded up may not be)."""
    tol = Decimal(repr(result.growth_tol))
    for digits in range(10, 18):
        if Decimal(_ceil_text(result.sup_value[1], digits)) <= tol:
            return digits
    return 17


def format_result(result: MarginResult) -> str:
    """Readable report of one ``MarginResult`` (inputs, margin, bracket, evidence)."""
    r = result
    d = _digits(r)
    delta_text = _ceil_text(r.delta, d)
    alpha_text = exact_one_plus(delta_text)
    lo, hi = r.delta_bracket
    lo_name, hi_name = ("D_L0", "D_L1") if r.score_bound == 0 else ("D-_L0", "D+_L1")
    b_text = "0 (prior alone)" if r.score_bound == 0 else f"{r.score_bound!r} (D+_L1 - D-_L0)"
    lines = [
        "margin selection, docs/theory.md §7: log-distance prior b(d) = -alpha ln(1+d), "
        "alpha = 1 + delta",
        f"  inputs     window W = {r.window}, lengths L0 = {r.lmin} .. L1 = {r.lmax}, "
        f"tol = {r.growth_tol!r}, score bound B = {b_text}",
    ]
    if hi == 0.0:
        lines.append(
            f"  delta*     0: no margin needed; sup over alpha >= 1 of the growth is <= tol "
            f"(certified), so every alpha >= 1 keeps the growth within {r.growth_tol!r}"
        )
        lines.append("  alpha*     1")
        lines.append(f"  bracket    [0.0, 0.0]; delta_lo: {r.delta_lo_reason}")
    else:
        wide = (
            "" if r.bracket_relative_width <= 10.0**-d else
            f"; NOT delta* to {d} digits: the bracket fixes delta* only to relative width "
            f"{r.bracket_relative_width:.1e}"
        )
        lines += [
            f"  delta*     {delta_text}   (delta_hi rounded up to {d} significant digits: "
            f"proven safe{wide})",
            f"  alpha*     {alpha_text}",
            f"  bracket    [{lo!r}, {hi!r}]  relative width {r.bracket_relative_width:.1e}",
            f"             delta_lo: {r.delta_lo_reason}",
            "             delta_hi: sup over alpha >= 1 + delta_hi of G <= tol proven",
        ]
    if not r.resolved:
        lines.append(f"  resolved   NO: {r.unresolved_reason}")
    sd = _sup_digits(r)
    lines += [
        f"  at alpha*  distant mass {lo_name} = {r.distant_mass_lmin:.12g}, "
        f"{hi_name} = {r.distant_mass_lmax:.12g}, growth G = {r.growth:.12g} "
        "(12 significant digits)",
        f"  supremum   of G over alpha >= 1 + delta_hi: in "
        f"[{_ceil_text(r.sup_value[0], sd, ROUND_FLOOR)}, {_ceil_text(r.sup_value[1], sd)}] "
        f"(proven; {sd} significant digits, rounded outward), attained at alpha = "
        + (f"{r.sup_location!r} (= 1 + delta_hi, rounded up)" if r.sup_at_margin
           else f"{r.sup_location:.10g} (NOT at 1 + delta_hi)"),
        f"             established by {r.sup_explanation}",
        f"  meaning    KERPLE-log r1 = {alpha_text} (r2 = 1); "
        f"alpha = 1 + {delta_text} + softplus(theta)",
        f"  precision  Arb ball arithmetic at {r.precision_bits} bits (dps {r.dps}); "
        f"{r.evaluations} growth evaluations",
    ]
    if r.enclosures is not None:
        lines.append("  enclosures (Arb balls [mid +/- radius], every digit shown is correct):")
        lines += [f"    {name:30s} {ball}" for name, ball in r.enclosures]
        lines.append(
            f"  cross-check mpmath (dps {r.dps + 10}) growth vs Arb: |difference| = "
            f"{r.cross_check_error:.2e}"
        )
    return "\n".join(lines)


def format_table(results: Sequence[MarginResult]) -> str:
    """One row per setting: inputs, ``delta*`` (10+ digits), bracket width, growth, sup."""
    header = (
        f"{'W':>8} {'L0':>8} {'L1':>20} {'tol':>8} {'B':>6} {'delta*':>16} {'alpha*':>16} "
        f"{'rel.width':>9} {'growth':>14}  sup at"
    )
    rows = [header]
    for r in results:
        d = _digits(r)
        delta_text = _ceil_text(r.delta, d)
        rows.append(
            f"{r.window:>8} {r.lmin:>8} {r.lmax:>20} {r.growth_tol!r:>8} {r.score_bound!r:>6} "
            f"{delta_text:>16} {exact_one_plus(delta_text):>16} "
            f"{r.bracket_relative_width:>9.1e} {r.growth:>14.10g}  "
            + ("alpha*" if r.sup_at_margin else f"alpha={r.sup_location:.6g}")
            + ("" if r.delta_lo_proven or r.delta == 0.0 else "  (delta_lo NOT proven)")
            + ("" if r.bracket_relative_width <= 10.0**-d or not r.delta_lo_proven
               else "  (bracket wider than these digits)")
            + ("  (evaluation budget ran out)" if r.budget_exhausted else "")
        )
    rows.append(
        "(delta* = delta_hi of a proven bracket, rounded up to the digits its width supports; "
        "growth to 10 significant digits)"
    )
    return "\n".join(rows)

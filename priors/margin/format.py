"""Text reports of margin selections (``python -m priors.margin`` without ``--json``).

``format_result`` prints one ``MarginResult`` (inputs, margin, proven bracket, supremum
evidence, precision); ``format_table`` one row per setting. Every printed number says its
precision, and rounding is directed where it matters: ``delta*`` is rounded *up* to the
digits the bracket width supports (a larger margin stays safe), an enclosure outward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

from priors.margin.result import MarginResult

__all__ = ["exact_one_plus", "format_result", "format_table"]


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


def format_result(result: MarginResult) -> str:
    """Readable report of one ``MarginResult`` (inputs, margin, bracket, evidence)."""
    r = result
    d = _digits(r)
    delta_text = _ceil_text(r.delta, d)
    alpha_text = exact_one_plus(delta_text)
    lo, hi = r.delta_bracket
    lo_name, hi_name = ("D_L0", "D_L1") if r.score_bound == 0 else ("D-_L0", "D+_L1")
    b_text = "0 (prior alone)" if r.score_bound == 0 else f"{r.score_bound:g} (D+_L1 - D-_L0)"
    lines = [
        "margin selection, docs/theory.md §7: log-distance prior b(d) = -alpha ln(1+d), "
        "alpha = 1 + delta",
        f"  inputs     window W = {r.window}, lengths L0 = {r.lmin} .. L1 = {r.lmax}, "
        f"tol = {r.growth_tol:g}, score bound B = {b_text}",
    ]
    if hi == 0.0:
        lines.append(
            f"  delta*     0: no margin needed; sup over alpha >= 1 of the growth is <= tol "
            f"(certified), so every alpha >= 1 keeps the growth within {r.growth_tol:g}"
        )
        lines.append("  alpha*     1")
        lines.append(f"  bracket    [0.0, 0.0]; delta_lo: {r.delta_lo_reason}")
    else:
        lines += [
            f"  delta*     {delta_text}   (delta_hi rounded up to {d} significant digits: "
            "proven safe)",
            f"  alpha*     {alpha_text}",
            f"  bracket    [{lo!r}, {hi!r}]  relative width {r.bracket_relative_width:.1e}",
            f"             delta_lo: {r.delta_lo_reason}",
            "             delta_hi: sup over alpha >= 1 + delta_hi of G <= tol proven",
        ]
    if not r.resolved:
        lines.append(f"  resolved   NO: {r.unresolved_reason}")
    lines += [
        f"  at alpha*  distant mass {lo_name} = {r.distant_mass_lmin:.12g}, "
        f"{hi_name} = {r.distant_mass_lmax:.12g}, growth G = {r.growth:.12g} "
        "(12 significant digits)",
        f"  supremum   of G over alpha >= 1 + delta_hi: in "
        f"[{_ceil_text(r.sup_value[0], 10, ROUND_FLOOR)}, {_ceil_text(r.sup_value[1], 10)}] "
        "(proven; 10 significant digits, rounded outward), attained at alpha = "
        f"{r.sup_location:.10g}"
        + (" (= 1 + delta_hi)" if r.sup_at_margin else " (NOT at 1 + delta_hi)"),
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
            f"{r.window:>8} {r.lmin:>8} {r.lmax:>20} {r.growth_tol:>8g} {r.score_bound:>6g} "
            f"{delta_text:>16} {exact_one_plus(delta_text):>16} "
            f"{r.bracket_relative_width:>9.1e} {r.growth:>14.10g}  "
            + ("alpha*" if r.sup_at_margin else f"alpha={r.sup_location:.6g}")
            + ("" if r.delta_lo_proven or r.delta == 0.0 else "  (delta_lo NOT proven)")
            + ("  (evaluation budget ran out)" if r.budget_exhausted else "")
        )
    rows.append(
        "(delta* = delta_hi of a proven bracket, rounded up to the digits its width supports; "
        "growth to 10 significant digits)"
    )
    return "\n".join(rows)

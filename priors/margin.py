"""Margin selection for log-distance priors: ``python -m priors.margin`` (THEORY.md §5–§7).

Exponents are parameterised as ``alpha = 1 + delta + softplus(theta) >= 1 + delta``. Given a
window ``W``, a length range ``[L0, L1]`` (``L0`` defaults to ``W``), a growth tolerance
``tol in (0, 1)`` and a content-score bound ``B >= 0``, the growth of the distant mass is

    G(alpha) = D^+_{L1}(W; alpha) - D^-_{L0}(W; alpha),
    D^+_l = E T_l / (S_W + E T_l),  D^-_l = T_l / (E S_W + T_l),  E = e^{2B},

with ``S_W = H_W^(alpha)`` and the prior tail ``T_l = H_l^(alpha) - H_W^(alpha)`` (at
``B = 0`` both bounds are the exact distant mass ``D_l = T_l / S_l``). The selected margin
is the smallest ``delta* >= 0`` with ``sup_{alpha >= 1 + delta*} G(alpha) <= tol``.

``select_margin`` returns a frozen ``MarginResult``; the search itself is
``priors.margin_search`` (Arb ball arithmetic, so whenever the search resolves and
``delta* > 0`` the bracket ``delta_lo < delta* <= delta_hi`` is *proven*: ``G(1 + delta_lo)``
is a ball strictly above ``tol`` and the supremum over ``alpha >= 1 + delta_hi`` is
certified ``<= tol``). The reported ``delta`` is ``delta_hi``, the end of the bracket that is
safe to use. Where no violation is proven (``delta* = 0``, or a search the balls could not
resolve, which warns) ``delta_lo_proven`` is ``False``, ``delta_lo = 0`` is only the floor
``delta >= 0`` of the definition, and ``delta_lo_reason`` (also printed) says why.
``certify=True`` adds ball enclosures of every reported number and an independent mpmath
re-evaluation of the growth at ``delta``.

python-flint is required (it is a core dependency): the search is a sequence of
certified comparisons, and a float fallback could not prove the bracket it prints. A
missing python-flint is reported in one line (exit status 1 for the command line).

>>> r = select_margin(64, 4096, 0.1)
>>> lo, hi = r.delta_bracket
>>> lo < hi and (hi - lo) <= 1e-9 * hi   # the bracket the issue asks for
True
>>> r.distant_mass_lmin == 0.0 and abs(r.growth - r.distant_mass_lmax) < 1e-15  # L0 = W
True
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import numbers
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from typing import Any

from priors.cli import OutputError, Parser, UsageError, emit, run
from priors.harmonic import as_count

__all__ = [
    "BRACKET_RTOL",
    "DPS_MAX",
    "DPS_MIN",
    "MAX_EVALUATIONS",
    "EvaluationBudgetWarning",
    "MarginInputError",
    "MarginResult",
    "format_result",
    "format_table",
    "main",
    "select_margin",
]

#: Relative width targeted for ``[delta_lo, delta_hi]`` (the issue asks for at most 1e-9;
#: 1e-12 costs ~10 more evaluations and makes the 10 printed digits safe from rounding).
BRACKET_RTOL = 1e-12
#: Smallest working precision accepted: 10 requested significant digits, a 1e-12 bracket
#: and guard digits for the cancellation in ``G - tol`` near the crossing.
DPS_MIN = 15
#: Largest working precision accepted (beyond it, Arb's Hurwitz zeta gets slow for no gain).
DPS_MAX = 1000
#: Default budget of growth evaluations for one ``select_margin`` call (each three Hurwitz
#: sums: 0.13 ms at dps 30 on an idle core, so ~3 s at most; ~0.5 ms at dps 100, ~85 ms at
#: dps 1000). Each of 162 seeded non-monotone settings (tests) needs under 1800; only
#: ``tol`` within a tiny distance of a local maximum of ``G`` needs more
#: (``priors.margin_search``: the cost grows like ``1 / sqrt(distance)``).
MAX_EVALUATIONS = 20_000

_FLAGS = {
    "window": "--window",
    "lmin": "--lmin",
    "lmax": "--lmax",
    "tol": "--tol",
    "score_bound": "--score-bound",
    "dps": "--dps",
    "max_evaluations": "--max-evaluations",
}


class EvaluationBudgetWarning(RuntimeWarning):
    """The margin search spent its evaluation budget before resolving the bracket.

    What it proved stays proven (``delta_hi`` is safe; ``delta_lo`` only if
    ``delta_lo_proven``); the result has ``resolved = False`` and ``budget_exhausted``.
    """


class MarginInputError(ValueError):
    """Bad input to ``select_margin``; ``argument`` names the offending parameter."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument
        self.detail = message


@dataclass(frozen=True)
class MarginResult:
    """The selected margin and its evidence (THEORY.md §7).

    Attributes
    ----------
    window, lmin, lmax : int
        ``W``, ``L0``, ``L1``.
    tol, score_bound : float
        ``tol`` and ``B`` (read as the decimals they print as).
    delta, alpha : float
        ``delta* = delta_hi`` (proven to satisfy the tolerance) and ``alpha* = 1 + delta*``.
    delta_bracket : (float, float)
        ``(delta_lo, delta_hi)``: ``sup_{alpha >= 1 + delta_hi} G <= tol`` proven, and, when
        ``delta_lo_proven``, ``G(1 + delta_lo) > tol`` proven. ``(0.0, 0.0)`` when no margin
        is needed (``delta* = 0`` exactly; nothing violates, so ``delta_lo`` carries no
        violation). With ``delta_lo_proven`` false and ``delta_hi > 0`` (an unresolved
        search, with a warning) ``delta_lo = 0`` is only the floor of the definition.
    growth, distant_mass_lmin, distant_mass_lmax : float
        ``G``, ``D^-_{L0}`` and ``D^+_{L1}`` at ``alpha*`` (ball midpoints; the exact
        distant masses when ``B = 0``).
    dps, precision_bits : int
        Working precision in decimal digits and the Arb precision derived from it.
    certified : bool
        ``True`` when ``enclosures`` holds a ball for every reported number and the growth
        was re-evaluated independently with mpmath (``cross_check_error``).
    sup_location : float
        The ``alpha`` where ``sup_{alpha >= 1 + delta_hi} G`` is attained, to the resolution
        of the method named in ``sup_method`` (the point where the lower end of
        ``sup_value`` was found).
    sup_value : (float, float)
        Proven enclosure ``lower <= sup_{alpha >= 1 + delta_hi} G <= upper`` (floats rounded
        outward; ``upper <= tol`` rounded up).
    sup_at_margin : bool
        Whether the supremum is attained at ``alpha = alpha* = 1 + delta_hi``.
    sup_method : str
        How the supremum was established.
    alpha_max : float
        The ``alpha`` beyond which ``D^+_{L1}(alpha) <= tol`` certifies the half-line.
    boxes, evaluations : int
        Certified boxes of the sweep and growth evaluations (each three Hurwitz sums).
    resolved : bool
        ``False`` if the balls could not separate ``G`` from ``tol``, or the evaluation
        budget ran out first (a warning was issued; ``unresolved_reason`` says which).
    delta_lo_proven : bool
        ``True`` iff ``G(1 + delta_lo) > tol`` is proven (the ball lies strictly above).
    delta_lo_reason : str
        What ``delta_lo`` is: the proven violation, or why none is reported.
    enclosures : tuple of (name, ball) pairs, or None
        Arb balls ``[mid +/- rad]`` (with ``certify=True``).
    cross_check_error : float or None
        ``|G_mpmath - G_arb|`` at ``alpha*`` (with ``certify=True``).
    max_evaluations : int
        The budget of growth evaluations the search ran under.
    budget_exhausted : bool
        ``True`` if the search stopped because that budget ran out (then not ``resolved``).
    unresolved_reason : str
        Why the search is not resolved (empty when it is).
    """

    window: int
    lmin: int
    lmax: int
    tol: float
    score_bound: float
    delta: float
    alpha: float
    delta_bracket: tuple[float, float]
    growth: float
    distant_mass_lmin: float
    distant_mass_lmax: float
    dps: int
    certified: bool
    sup_location: float
    sup_value: tuple[float, float]
    sup_at_margin: bool
    sup_method: str
    alpha_max: float
    boxes: int
    evaluations: int
    precision_bits: int
    resolved: bool = True
    enclosures: tuple[tuple[str, str], ...] | None = None
    cross_check_error: float | None = None
    delta_lo_proven: bool = False
    delta_lo_reason: str = ""
    max_evaluations: int = MAX_EVALUATIONS
    budget_exhausted: bool = False
    unresolved_reason: str = ""

    @property
    def kerple_log(self) -> tuple[float, float]:
        """KERPLE-log ``(r1, r2)`` with the same tail: ``-r1 ln(1 + r2 d)``, ``r1 = alpha*``."""
        return (self.alpha, 1.0)

    @property
    def bracket_relative_width(self) -> float:
        lo, hi = self.delta_bracket
        return 0.0 if hi == 0.0 else (hi - lo) / hi

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (the keys of the issue plus the evidence fields)."""
        out = asdict(self)
        out["delta_bracket"] = list(self.delta_bracket)
        out["sup_value"] = list(self.sup_value)
        out["enclosures"] = None if self.enclosures is None else dict(self.enclosures)
        out["kerple_log"] = {"r1": self.alpha, "r2": 1.0}
        out["softplus"] = f"alpha = 1 + {self.delta!r} + softplus(theta)"
        return out

    def to_json(self, **kwargs: object) -> str:
        """``json.dumps(self.to_dict(), **kwargs)``."""
        return json.dumps(self.to_dict(), **kwargs)


# ------------------------------------------------------------------------------ validation


def _decimal_text(value: object, name: str) -> tuple[float, str]:
    """A finite real as ``(float, decimal string)``; strings keep their exact decimal."""
    if isinstance(value, bool):
        raise MarginInputError(name, f"must be a real number, got {value!r}")
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise MarginInputError(name, f"must be a real number, got {value!r}") from None
        text = value.strip()
    elif isinstance(value, numbers.Real):
        # a narrower float (numpy float32/float16) prints as its own shortest decimal
        # ("0.1"), not as the float64 it widens to (0.10000000149011612)
        if getattr(getattr(value, "dtype", None), "itemsize", 8) < 8:
            text = str(value)
            number = float(text)
        else:
            number = float(value)
            text = repr(number)
    else:
        raise MarginInputError(name, f"must be a real number, got {value!r}")
    if not math.isfinite(number):
        raise MarginInputError(name, f"must be finite, got {value!r}")
    return number, text


def _count(value: object, name: str) -> int:
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise MarginInputError(name, f"must be a positive integer, got {text!r}") from None
    try:
        out = as_count(value, name, minimum=1)
    except ValueError as exc:
        raise MarginInputError(name, str(exc).removeprefix(f"{name} ")) from None
    return out


def _budget(value: object) -> int:
    """``max_evaluations`` as a positive integer (an int, or a string of decimal digits)."""
    if isinstance(value, str) and value.strip().lstrip("+").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise MarginInputError("max_evaluations", f"must be a positive integer, got {value!r}")
    return int(value)


def _validate(
    window: object, lmax: object, tol: object, lmin: object, score_bound: object, dps: object
) -> tuple[int, int, int, float, str, float, str, int]:
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral):
        raise MarginInputError("dps", f"must be an integer, got {dps!r}")
    dps = int(dps)
    if dps < DPS_MIN:
        raise MarginInputError(
            "dps",
            f"{dps} is too small to give 10 significant digits and a 1e-12 bracket "
            f"(needs >= {DPS_MIN})",
        )
    if dps > DPS_MAX:
        raise MarginInputError("dps", f"must be <= {DPS_MAX}, got {dps}")
    w = _count(window, "window")
    l1 = _count(lmax, "lmax")
    if l1 <= w:
        raise MarginInputError("lmax", f"must be > window = {w}, got {l1}")
    l0 = w if lmin is None else _count(lmin, "lmin")
    if not w <= l0 < l1:
        raise MarginInputError("lmin", f"must lie in [window, lmax) = [{w}, {l1}), got {l0}")
    if l1 >= 10**dps:
        raise MarginInputError(
            "lmax",
            f"{l1} is beyond what dps = {dps} digits represent exactly "
            f"(needs dps >= {len(str(l1))})",
        )
    tol_f, tol_text = _decimal_text(tol, "tol")
    if not 0.0 < tol_f < 1.0:
        raise MarginInputError("tol", f"must lie in (0, 1), got {tol_text}")
    b_f, b_text = _decimal_text(score_bound, "score_bound")
    if b_f < 0.0:
        raise MarginInputError("score_bound", f"must be >= 0, got {b_text}")
    if b_f > 1e6:
        raise MarginInputError("score_bound", f"must be <= 1e6, got {b_text}")
    return w, l0, l1, tol_f, tol_text, b_f, b_text, dps


# -------------------------------------------------------------------------------- library


def _import_search():  # returns the module priors.margin_search
    try:
        from priors import margin_search
    except ImportError as exc:  # pragma: no cover - python-flint is a core dependency
        raise ImportError(
            "priors.margin needs python-flint (Arb ball arithmetic proves the bracket it "
            "reports); install it with `pip install python-flint`"
        ) from exc
    return margin_search


def select_margin(
    window: int,
    lmax: int,
    tol: float,
    *,
    lmin: int | None = None,
    score_bound: float = 0.0,
    dps: int = 30,
    certify: bool = False,
    max_evaluations: int = MAX_EVALUATIONS,
) -> MarginResult:
    """Smallest ``delta* >= 0`` with ``sup_{alpha >= 1 + delta*} G(alpha) <= tol`` (THEORY §7).

    ``G(alpha) = D^+_{L1}(W) - D^-_{L0}(W)`` for the log-distance prior
    ``b(d) = -alpha ln(1 + d)`` under content scores ``|s| <= B`` (THEORY §5); ``B = 0``
    gives the exact distant masses. The supremum over ``alpha`` is established, not
    assumed: by the proved monotonicity of ``G`` when ``L0 = W``, and otherwise by a
    certified branch-and-bound sweep (``priors.margin_search``).

    Parameters
    ----------
    window, lmax : int
        ``W >= 1`` and ``L1 > W`` (integral floats such as ``1e15`` accepted; ``<= 1e18``
        and below ``10**dps``).
    tol : float or str
        ``tol in (0, 1)``; read as the decimal it prints as (a string keeps its digits).
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
        ``EvaluationBudgetWarning`` is issued. Only ``tol`` within a tiny distance of a
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
    w, l0, l1, tol_f, tol_text, b_f, b_text, dps = _validate(
        window, lmax, tol, lmin, score_bound, dps
    )
    budget = _budget(max_evaluations)
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
        warnings.warn(unresolved, EvaluationBudgetWarning, stacklevel=2)
    elif not outcome.resolved:
        unresolved = (
            f"could not separate the growth from tol = {tol_text} near alpha = "
            f"{1 + outcome.delta_hi!r} at {bits} bits (tangency?); delta_hi is proven, "
            + ("delta_lo is a proven violation but the bracket is wide"
               if outcome.delta_lo is not None else "no violation below it is proven")
        )
        warnings.warn(unresolved, RuntimeWarning, stacklevel=2)
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
        method = (
            "monotone (proved): L0 = W so G = D+_L1(W), nonincreasing in alpha "
            "(the ratio T_l/S_W has d/dalpha ln(T_l/S_W) <= 0); supremum at alpha = 1 + delta"
        )
        at_margin = True
    elif outcome.delta_lo is not None and outcome.resolved:
        # G(1 + delta_hi) is a point value (lower end); the largest certified box bound is
        # the upper end (G need not be monotone beyond delta_hi, so G(1 + delta_hi) is not)
        sup_at = 1.0 + delta_hi
        sup_lo, sup_hi = search.float_down(growth_ball), min(outcome.sup_upper, tol_up)
        method = (
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
        method = (
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
                ("alpha", f"{_exact_one_plus(delta_hi)} (exact)"),
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
        tol=tol_f,
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
            stacklevel=3,
        )
    return err_f


# ------------------------------------------------------------------------------ formatting


def _digits(result: MarginResult) -> int:
    width = result.bracket_relative_width
    if width <= 0.0:
        return 12
    return max(10, min(15, math.floor(-math.log10(width))))


def _exact_one_plus(delta: float | str) -> str:
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
    alpha_text = _exact_one_plus(delta_text)
    lo, hi = r.delta_bracket
    lo_name, hi_name = ("D_L0", "D_L1") if r.score_bound == 0 else ("D-_L0", "D+_L1")
    b_text = "0 (prior alone)" if r.score_bound == 0 else f"{r.score_bound:g} (D+_L1 - D-_L0)"
    lines = [
        "margin selection, THEORY.md §7: log-distance prior b(d) = -alpha ln(1+d), "
        "alpha = 1 + delta",
        f"  inputs     window W = {r.window}, lengths L0 = {r.lmin} .. L1 = {r.lmax}, "
        f"tol = {r.tol:g}, score bound B = {b_text}",
    ]
    if hi == 0.0:
        lines.append(
            f"  delta*     0: no margin needed; sup over alpha >= 1 of the growth is <= tol "
            f"(certified), so every alpha >= 1 keeps the growth within {r.tol:g}"
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
        f"             established by {r.sup_method}",
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
            f"{r.window:>8} {r.lmin:>8} {r.lmax:>20} {r.tol:>8g} {r.score_bound:>6g} "
            f"{delta_text:>16} {_exact_one_plus(delta_text):>16} "
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


# ------------------------------------------------------------------------------------ CLI


def _build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m priors.margin",
        description=(
            "Select the smallest exponent margin delta* such that every log-distance prior "
            "with alpha >= 1 + delta* grows its distant mass by at most tol over [L0, L1] "
            "(THEORY.md §7). Several values of --window/--lmax/--tol give a table."
        ),
    )
    p.add_argument("--window", nargs="+", required=True, metavar="W", help="window size(s)")
    p.add_argument("--lmax", nargs="+", required=True, metavar="L1", help="longest length(s)")
    p.add_argument("--tol", nargs="+", required=True, metavar="TAU", help="tolerance(s) in (0,1)")
    p.add_argument("--lmin", default=None, metavar="L0", help="shortest length (default: W)")
    p.add_argument("--score-bound", default="0", metavar="B", help="content-score bound B >= 0")
    p.add_argument("--dps", default="30", metavar="N", help="working precision in digits")
    p.add_argument("--certify", action="store_true", help="print ball enclosures of everything")
    p.add_argument(
        "--max-evaluations", default=str(MAX_EVALUATIONS), metavar="N",
        help=f"budget of growth evaluations per setting (default {MAX_EVALUATIONS})",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; returns the exit status (0 ok, 2 bad input, 1 missing python-flint or
    unwritable output; the ``priors.cli`` contract)."""
    return run("margin", _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        dps_text = args.dps.strip()
        if not dps_text.lstrip("+-").isdigit():
            raise MarginInputError("dps", f"must be an integer, got {args.dps!r}")
        dps = int(dps_text)
        budget = _budget(args.max_evaluations)
        settings = list(itertools.product(args.window, args.lmax, args.tol))
        for w, l1, tol in settings:  # validate everything before computing anything
            _validate(w, l1, tol, args.lmin, args.score_bound, dps)
        results = [
            select_margin(
                w, l1, tol, lmin=args.lmin, score_bound=args.score_bound, dps=dps,
                certify=args.certify, max_evaluations=budget,
            )
            for w, l1, tol in settings
        ]
    except MarginInputError as exc:
        raise UsageError(f"{_FLAGS[exc.argument]}: {exc.detail}") from None
    except ImportError as exc:
        raise OutputError(str(exc)) from None  # one line, exit 1
    if args.json:
        payload = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
        emit(json.dumps(payload, indent=1))
    elif len(results) == 1:
        emit(format_result(results[0]))
    else:
        emit(format_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

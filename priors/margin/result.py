"""The value ``select_margin`` returns: the selected margin and its evidence (docs/theory.md §7).

``MarginResult`` is a frozen record of plain numbers and strings; ``to_dict`` is the JSON
form printed by ``python -m priors.margin --json`` (the growth budget under its command-line
name ``tol``) and ``to_json`` its text. ``sup_method`` says in one word how the supremum of
the growth beyond the margin was established (``SUP_METHODS``), ``sup_explanation`` the
argument in full (the sentence the text report prints).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from priors.margin.validate import MAX_EVALUATIONS

__all__ = [
    "SUP_BRANCH_AND_BOUND",
    "SUP_CROSSING",
    "SUP_METHODS",
    "SUP_MONOTONE",
    "EvaluationBudgetWarning",
    "MarginResult",
]

#: ``L0 = W``: ``G = D^+_{L1}`` is nonincreasing in ``alpha`` (proved), so the supremum over
#: ``alpha >= 1 + delta_hi`` is ``G(1 + delta_hi)``.
SUP_MONOTONE = "monotone"
#: A certified sweep bounds ``G <= tol`` beyond ``delta_hi`` and the search resolved with
#: ``G(1 + delta_lo) > tol`` proven: by continuity the supremum beyond ``delta*`` is ``tol``,
#: attained at ``delta*``.
SUP_CROSSING = "crossing"
#: Otherwise (``L0 > W`` and no resolved bracket with a proven violation): the supremum
#: beyond ``delta_hi`` is located by branch and bound over certified boxes
#: (``priors.margin.search.locate_sup``).
SUP_BRANCH_AND_BOUND = "branch-and-bound"
#: Every value ``MarginResult.sup_method`` takes.
SUP_METHODS = (SUP_MONOTONE, SUP_CROSSING, SUP_BRANCH_AND_BOUND)


class EvaluationBudgetWarning(RuntimeWarning):
    """The margin search spent its evaluation budget before resolving the bracket.

    What it proved stays proven (``delta_hi`` is safe; ``delta_lo`` only if
    ``delta_lo_proven``); the result has ``resolved = False`` and ``budget_exhausted``.
    """


@dataclass(frozen=True)
class MarginResult:
    """The selected margin and its evidence (docs/theory.md §7).

    Attributes
    ----------
    window, lmin, lmax : int
        ``W``, ``L0``, ``L1``.
    growth_tol, score_bound : float
        The growth budget ``tol`` of docs/theory.md §7 (``tau`` there, ``--tol`` on the command
        line, ``"tol"`` in ``to_dict``) and ``B`` (read as the decimals they print as).
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
        How the supremum was established, one of ``SUP_METHODS``: ``"monotone"``,
        ``"crossing"`` or ``"branch-and-bound"`` (module constants ``SUP_*``).
    sup_explanation : str
        The argument behind ``sup_method`` in full, with its numbers (boxes, range).
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
    growth_tol: float
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
    sup_explanation: str
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
        """``(delta_hi - delta_lo) / delta_hi`` (``0`` when ``delta_hi = 0``)."""
        lo, hi = self.delta_bracket
        return 0.0 if hi == 0.0 else (hi - lo) / hi

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict: every field (``growth_tol`` under the key ``"tol"`` of the
        ``--tol`` option), plus ``kerple_log`` and the ``softplus`` parameterisation."""
        out = {("tol" if key == "growth_tol" else key): value
               for key, value in asdict(self).items()}
        out["delta_bracket"] = list(self.delta_bracket)
        out["sup_value"] = list(self.sup_value)
        out["enclosures"] = None if self.enclosures is None else dict(self.enclosures)
        out["kerple_log"] = {"r1": self.alpha, "r2": 1.0}
        out["softplus"] = f"alpha = 1 + {self.delta!r} + softplus(theta)"
        return out

    def to_json(self, **json_kwargs: object) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``."""
        return json.dumps(self.to_dict(), **json_kwargs)

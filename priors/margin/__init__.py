"""Margin selection for log-distance priors (docs/theory.md §5–§7): ``python -m priors.margin``.

Exponents are parameterised as ``alpha = 1 + delta + softplus(theta) >= 1 + delta``. Given a
window ``W``, a length range ``[L0, L1]`` (``L0`` defaults to ``W``), a growth budget
``tol in (0, 1)`` (``growth_tol``; ``tau`` in docs/theory.md §7) and a content-score bound
``B >= 0``, the growth of the distant mass is

    G(alpha) = D^+_{L1}(W; alpha) - D^-_{L0}(W; alpha),
    D^+_l = E T_l / (S_W + E T_l),  D^-_l = T_l / (E S_W + T_l),  E = e^{2B},

with ``S_W = H_W^(alpha)`` and the prior tail ``T_l = H_l^(alpha) - H_W^(alpha)`` (at
``B = 0`` both bounds are the exact distant mass ``D_l = T_l / S_l``). The selected margin
is the smallest ``delta* >= 0`` with ``sup_{alpha >= 1 + delta*} G(alpha) <= tol``.

``select_margin`` returns a frozen ``MarginResult``; the search itself is
``priors.margin.search`` (Arb ball arithmetic, so whenever the search resolves and
``delta* > 0`` the bracket ``delta_lo < delta* <= delta_hi`` is *proven*: ``G(1 + delta_lo)``
is a ball strictly above ``tol`` and the supremum over ``alpha >= 1 + delta_hi`` is
certified ``<= tol``). The reported ``delta`` is ``delta_hi``, the end of the bracket that is
safe to use. Where no violation is proven (``delta* = 0``, or a search the balls could not
resolve, which warns) ``delta_lo_proven`` is ``False``, ``delta_lo = 0`` is only the floor
``delta >= 0`` of the definition, and ``delta_lo_reason`` (also printed) says why.
``certify=True`` adds ball enclosures of every reported number and an independent mpmath
re-evaluation of the growth at ``delta``.

The package, one job per module:

* ``validate``: the input checks (``MarginInputError`` names the argument);
* ``search``: the certified sweep, bisection and branch and bound on Arb balls;
* ``select``: ``select_margin``, which runs the search and establishes what it proved;
* ``result``: ``MarginResult`` and its JSON form (``to_dict``, ``to_json``);
* ``format``: the words: the text report (``format_result``), the table
  (``format_table``) and the sentences of the evidence a result carries;
* ``__main__``: the command line (its entry point ``main``), the only module that parses
  arguments; importing the library does not load it.

python-flint is required (it is a core dependency): the search is a sequence of
certified comparisons, and a float fallback could not prove the bracket it prints. A
missing python-flint is reported in one line (exit status 1 for the command line).

>>> r = select_margin(64, 4096, 0.1)
>>> lo, hi = r.delta_bracket
>>> lo < hi and (hi - lo) <= 1e-9 * hi   # a proven bracket of relative width <= 1e-9
True
>>> r.distant_mass_lmin == 0.0 and abs(r.growth - r.distant_mass_lmax) < 1e-15  # L0 = W
True
"""

from __future__ import annotations

from priors.margin.format import format_result, format_table
from priors.margin.result import (
    SUP_BRANCH_AND_BOUND,
    SUP_CROSSING,
    SUP_METHODS,
    SUP_MONOTONE,
    EvaluationBudgetWarning,
    MarginResult,
)
from priors.margin.select import BRACKET_RTOL, select_margin
from priors.margin.validate import DPS_MAX, DPS_MIN, MAX_EVALUATIONS, MarginInputError

__all__ = [
    "BRACKET_RTOL",
    "DPS_MAX",
    "DPS_MIN",
    "MAX_EVALUATIONS",
    "SUP_BRANCH_AND_BOUND",
    "SUP_CROSSING",
    "SUP_METHODS",
    "SUP_MONOTONE",
    "EvaluationBudgetWarning",
    "MarginInputError",
    "MarginResult",
    "format_result",
    "format_table",
    "select_margin",
]


"""docs/theory.md §1, Proposition 1: the causal obstruction to balanced OT attention.

A nonnegative lower-triangular matrix with unit row sums and column sums ``c`` satisfies, for
every ``k``, ``sum_{j >= k} c_j <= n - k + 1`` (rows ``l >= k`` hold ``n - k + 1`` units, and
column ``j >= k`` is only reached by rows ``l >= j >= k``). The off-diagonal mass of row ``k``
lies in columns ``< k`` and is at most what rows ``>= k`` put there, so

    e_k = 1 - P[k,k] <= (n - k + 1) - sum_{j >= k} c_j,
    1 - trace(P)/n <= (1/n) sum_j j (1 - c_j)                     (*)

(summing over ``k``). With ``c = 1`` the right side is 0: the identity (Proposition 1). Three
checks (docs/theory.md §1):

* ``prop1_identity_collapse``: the batch unbalanced Sinkhorn plan (columns KL-relaxed, §1)
  satisfies (*) for every ``rho`` (ratio measured/bound <= 1), and its diagonal mass
  ``trace(P)/n`` increases towards 1 as ``rho -> 1`` (details);
* ``prop1_diagonal_mass``: that diagonal mass at ``n = 32`` with constant scores is the one
  docs/theory.md §1 gives
  (0.16933, 0.31476, 0.60784, 0.86515, 0.97169 at ``rho = 0.5, 0.9, 0.99, 0.999, 0.9999``);
* ``prop1_feasibility_lp``: targets ``b >= 0``, ``sum b = n`` are feasible iff
  ``sum_{j >= k} b_j <= n - k + 1`` for all ``k``, compared case by case with a linear
  program (``scipy.optimize.linprog``, HiGHS).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from proofs_check.measurements import diagonal_mass
from proofs_check.result import CheckSpec, Measurement, theorem_check, worst_of
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "THEORY_DIAGONAL_MASS", "check_diagonal_mass", "check_feasibility_lp",
           "check_identity_collapse", "lp_feasible"]

THEOREM = "Proposition 1 (§1)"


#: docs/theory.md §1 (computed independently, converged to a relative change below 1e-15 per
#: iteration): the batch plan's diagonal mass ``trace(P)/n`` at ``n = 32``, constant scores.
THEORY_DIAGONAL_MASS = {0.5: 0.16933, 0.9: 0.31476, 0.99: 0.60784, 0.999: 0.86515,
                        0.9999: 0.97169}


@theorem_check("prop1_identity_collapse", THEOREM)
@uses("batch_plan")
def check_identity_collapse(
    n: int = 32,
    rhos: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999),
    samples: int = 2,
    score_bound: float = 1.0,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Batch plan: ``1 - trace(P)/n <= (1/n) sum_j j (1 - c_j)`` (bound (*)), and collapse.

    Scores: constant (0) and ``samples`` uniform draws in ``[-B, B]``. Measured: the largest
    ratio of the diagonal deficit to the bound over all ``rho`` and scores (``<= 1``);
    tolerance ``1e-12`` (both sides are sums of ``n`` float64 terms <= 1 and the bound is
    nonnegative by the tail condition). The bound holds for every nonnegative
    lower-triangular plan with unit row sums, so it tests that the plan is one; it does not
    see ``rho``. The collapse does: the diagonal mass (constant scores) must increase
    strictly with ``rho`` (docs/theory.md §1, measured), and where it does not the measured
    value is ``inf`` (the ratio stays in ``details["worst_ratio"]``). Details: the diagonal
    masses by ``rho`` and whether they increase.

    Negative control: the plan without the causal mask (``system.batch_plan``): its columns
    can balance, the bound's right side vanishes while the diagonal deficit does not.
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    diag: dict[str, float] = {}
    tol_iter = 1e-10 if dtype == torch.float64 else 1e-5
    cases = [torch.zeros(n, n, dtype=torch.float64)]
    cases += [score_bound * (2 * torch.rand(n, n, generator=gen, dtype=torch.float64) - 1)
              for _ in range(samples)]
    scores = torch.stack(cases).to(dtype=dtype, device=device)  # (samples+1, n, n)
    jj = torch.arange(1, n + 1, dtype=torch.float64)
    for rho in rhos:
        res = system.batch_plan(scores, rho, tol=tol_iter,
                                max_iter=max(10_000, int(60 / (1 - rho))))
        plan = res.weights.double().cpu()
        deficit = 1 - diagonal_mass(plan)  # 1 - trace(P)/n, (cases,)
        col = plan.sum(-2)  # (cases, n)
        bound = (jj * (1 - col)).sum(-1) / n
        ratio = torch.where(bound > 0, deficit / bound,
                            torch.where(deficit > 0, math.inf, 0.0))
        ratio = torch.where(torch.isnan(deficit + bound), math.nan, ratio)  # NaN plan: no plan
        worst = worst_of(worst, ratio.max())
        diag[str(rho)] = float(1 - deficit[0])
    values = [diag[str(r)] for r in sorted(rhos)]
    increasing = all(values[i] < values[i + 1] for i in range(len(values) - 1))
    return Measurement(
        quantity="max (1 - tr P/n) / ((1/n) sum_j j (1 - colsum_j)), batch plan "
                 "(inf unless tr P/n increases with rho)",
        measured=worst if increasing else math.inf,
        reference=1.0,
        relation="<=",
        allowance=1e-12,
        details={"worst_ratio": worst, "diagonal_mass_constant_scores": diag,
                 "increasing_in_rho": increasing},
    )


@theorem_check("prop1_diagonal_mass", THEOREM)
@uses("batch_plan")
def check_diagonal_mass(
    rhos: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999),
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
) -> Measurement:
    """The batch plan's diagonal mass at ``n = 32``, constant scores, against docs/theory.md §1.

    Measured: ``max_rho |trace(P)/32 - docs/theory.md §1|`` (``THEORY_DIAGONAL_MASS``; ``rho``
    must be one §1 gives). Tolerance ``5e-6``: §1 prints 5 decimals (half a unit); the plan
    is iterated to ``log v`` increments ``1e-12`` (float64), i.e. within ``kappa 1e-12 <=
    1e-8`` of the fixed point at ``rho = 0.9999``, which moves the diagonal mass by less.
    ``rho = 0.9999`` needs about 2.6e5 sweeps (``--full`` only). float32: increments
    ``1e-6`` reach ``kappa 1e-6``, so the tolerance is ``2e-3`` and ``rho <= 0.99``.

    Negative control: the batch plan at ``0.85 rho`` (``system.batch_plan``).
    """
    unknown = [r for r in rhos if r not in THEORY_DIAGONAL_MASS]
    if unknown:
        raise ValueError(f"rhos {unknown} have no docs/theory.md value; docs/theory.md §1 gives "
                         f"{sorted(THEORY_DIAGONAL_MASS)}")
    n = 32
    plan_tol = 1e-12 if dtype == torch.float64 else 1e-6
    scores = torch.zeros(n, n, dtype=dtype, device=device)
    masses: dict[str, float] = {}
    worst = 0.0
    for rho in rhos:
        plan = system.batch_plan(scores, rho, tol=plan_tol).weights.double().cpu()
        masses[str(rho)] = float(diagonal_mass(plan))
        worst = worst_of(worst, abs(masses[str(rho)] - THEORY_DIAGONAL_MASS[rho]))
    return Measurement(
        quantity="max |trace(P)/n - docs/theory.md §1|, batch plan, n = 32, constant scores",
        measured=worst,
        reference=0.0,
        relation="==",
        allowance=5e-6 if dtype == torch.float64 else 2e-3,
        details={"diagonal_mass": masses,
                 "theory": {str(r): THEORY_DIAGONAL_MASS[r] for r in rhos}},
    )


def lp_feasible(b: np.ndarray) -> bool:
    """Is there ``P >= 0`` lower triangular with unit row sums and column sums ``b``? (LP)."""
    from scipy.optimize import linprog  # lazily: only this check needs it

    n = len(b)
    idx = [(i, j) for i in range(n) for j in range(i + 1)]
    a_eq = np.zeros((2 * n, len(idx)))
    for v, (i, j) in enumerate(idx):
        a_eq[i, v] = 1.0  # row i sums to 1
        a_eq[n + j, v] = 1.0  # column j sums to b_j
    b_eq = np.concatenate([np.ones(n), b])
    res = linprog(np.zeros(len(idx)), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    return res.status == 0


def _targets(n: int, rng: np.random.Generator) -> np.ndarray:
    """Column targets with sum ``n``: feasible, near-boundary or random (often infeasible)."""
    kind = rng.integers(3)
    if kind == 0:  # column sums of a random lower-triangular row-stochastic matrix
        p = np.tril(rng.exponential(size=(n, n)))
        b = (p / p.sum(1, keepdims=True)).sum(0)
    elif kind == 1:  # mix of the identity (tight) with a small random move of mass
        b = np.ones(n) + rng.normal(scale=0.3, size=n)
        b = np.abs(b)
    else:
        b = rng.dirichlet(np.ones(n)) * n
    return b * (n / b.sum())


@theorem_check("prop1_feasibility_lp", THEOREM)
@uses("feasibility")
def check_feasibility_lp(
    cases: int = 60,
    n_max: int = 6,
    *,
    system: System | None = None,
    seed: int = 0,
) -> Measurement:
    """The tail condition agrees with a linear program on random small cases (Prop. 1).

    Measured: the number of cases (``n`` from 1 to ``n_max``, plus ``b = 1`` for every ``n``,
    tight and feasible, and for ``n >= 2`` the two targets ``1e-4`` from it: mass ``1e-4``
    moved from the last column to the first, feasible, and from the first to the last,
    infeasible since ``b_n = 1 + 1e-4 > 1``) where ``priors.feasibility.tail_condition``
    (``system.feasibility``) and ``lp_feasible`` disagree; reference 0. The condition is
    compared with an absolute tolerance ``1e-9`` (random targets are far from the boundary
    at that scale; ``b = 1`` is tight and exact); ``1e-4`` is far above both that and the
    LP's feasibility tolerance (``1e-7``), and far below the slack of a wrong condition
    such as ``n - k + 1.01``, which the random targets alone do not expose.

    Negative control: the wrong condition ``sum_{j >= k} b_j <= n - k + 1.5``
    (``system.feasibility``); some infeasible cases pass it.
    """
    rng = np.random.default_rng(seed)
    disagree = 0
    counts = {"feasible": 0, "infeasible": 0}
    targets = [np.ones(n) for n in range(1, n_max + 1)]
    for n in range(2, n_max + 1):  # 1e-4 either side of the tight boundary b = 1
        for move in (1e-4, -1e-4):
            b = np.ones(n)
            b[0] += move
            b[-1] -= move
            targets.append(b)
    targets += [_targets(int(rng.integers(2, n_max + 1)), rng) for _ in range(cases)]
    for b in targets:
        lp = lp_feasible(b)
        counts["feasible" if lp else "infeasible"] += 1
        disagree += int(lp != system.feasibility(b))
    return Measurement(
        quantity="#cases where sum_{j>=k} b_j <= n-k+1 disagrees with an LP",
        measured=disagree,
        reference=0,
        relation="<=",
        details={"cases_total": len(targets), **counts},
    )


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="prop1_identity_collapse",
        theorem=THEOREM,
        section="§1",
        run=check_identity_collapse,
        ci={"n": 16, "rhos": (0.5, 0.9, 0.99), "samples": 1},
        default={"n": 32, "rhos": (0.5, 0.9, 0.99), "samples": 2},
        full={"n": 64, "rhos": (0.5, 0.9, 0.99, 0.999), "samples": 4},
        negative={"system": System(batch_plan=mutants.noncausal_batch_plan)},
    ),
    CheckSpec(
        name="prop1_diagonal_mass",
        theorem=THEOREM,
        section="§1",
        run=check_diagonal_mass,
        ci={"rhos": (0.5, 0.9, 0.99)},
        default={"rhos": (0.5, 0.9, 0.99, 0.999)},
        full={"rhos": (0.5, 0.9, 0.99, 0.999, 0.9999)},
        negative={"system": System(batch_plan=mutants.batch_plan_at_scaled_rho(0.85))},
    ),
    CheckSpec(
        name="prop1_feasibility_lp",
        theorem=THEOREM,
        section="§1",
        run=check_feasibility_lp,
        ci={"cases": 40, "n_max": 5},
        default={"cases": 120, "n_max": 7},
        full={"cases": 600, "n_max": 9},
        negative={"system": System(feasibility=mutants.wrong_feasibility(0.5))},
        torch_args=False,
    ),
)

"""docs/theory.md §2, Lemma 2.1: the row fixed point of the prefix-consistent operator.

Row ``l`` is strictly positive and solves ``a[l,j] C'[l,j]^kappa = w[l,j] / Z_l`` with
``C' = cumsum over rows of a`` and ``sum_j a[l,j] = 1``. Equivalently
``q[l,j] = log a[l,j] + kappa log C'[l,j] - s[l,j]`` is the same number ``-log Z_l`` for every
key ``j <= l`` of the row. Two checks:

* ``lemma21_fixed_point``: the weights of the operator (``method="newton"``) satisfy the
  equation -- the spread ``max_j q - min_j q`` of every row, the row-sum error, strict
  positivity, and exactly 0 on masked keys -- measured from the weights alone (``C'``
  recomputed here);
* ``lemma21_exact_vs_mp``: the operator agrees with the mpmath solver at 30 digits
  (``causal_ot_exact_mp``), the ground truth.

How close the operator comes is set by its ``tol`` (default ``1e-10`` in float64): the row
solver stops a row once Newton's estimate of the error left in ``log Z_l`` and ``log a[l,j]``
is at most ``tol/10``. That estimate is a model, not a bound, and the errors it leaves are
of the order of ``tol``, not far below it. At the default ``tol``, on uniform scores in
``[-B, B]`` (``B = 2`` and ``6``, past keys masked in half the draws), the weights differ
from the mpmath solver's by up to ``1.4e-12`` (``n <= 32``, ``rho`` from 0.3 to 0.99) and the
fixed-point defect reaches ``2e-11`` at ``rho = 0.6`` and ``9e-11`` (``0.9 tol``) at
``rho = 0.99`` (``n`` from 64 to 512). At ``tol = 1e-13`` they fall to ``3e-15`` (``n <= 24``,
``rho <= 0.9``) and ``7e-13``: the errors come from the stopping rule, not from round-off.
"""

from __future__ import annotations

import math

import mpmath
import torch

from proofs_check.operators.causal_ot import causal_ot_exact_mp
from proofs_check.result import CheckSpec, Measurement, theorem_check, worst_of
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "check_exact_vs_mp", "check_fixed_point", "fixed_point_defect"]

THEOREM = "Lemma 2.1 (§2)"


def fixed_point_defect(weights: torch.Tensor, scores: torch.Tensor, rho: float) -> float:
    """Largest violation of Lemma 2.1 in float64: row spread of ``q``, row sums, positivity.

    Live keys are ``j <= l`` with a finite score; masked keys (``-inf``) are removed keys and
    must carry weight exactly 0. Returns ``inf`` if a live weight is not strictly positive
    or a masked/future weight is not exactly 0.
    """
    a = weights.double().cpu()
    s = scores.double().cpu()
    n = a.shape[-1]
    live = torch.ones(n, n, dtype=torch.bool).tril() & torch.isfinite(s)
    if not bool((a[live] > 0).all()) or not bool((a[~live] == 0).all()):
        return math.inf
    kappa = rho / (1 - rho)
    cp = torch.cumsum(a, dim=-2)  # C'[l, j] = sum_{k <= l} a[k, j]
    q = torch.log(a) + kappa * torch.log(cp) - torch.where(live, s, 0.0)  # -log Z_l (live)
    big = torch.tensor(math.inf, dtype=torch.float64)
    spread = torch.where(live, q, -big).amax(-1) - torch.where(live, q, big).amin(-1)
    row_err = (a.sum(-1) - 1).abs()
    return float(torch.maximum(spread, row_err).max())


def _masked_keys(shape: tuple[int, ...], gen: torch.Generator, fraction: float) -> torch.Tensor:
    """A random mask of strictly-past keys (``j < l``); the diagonal always stays live."""
    n = shape[-1]
    below = torch.ones(n, n, dtype=torch.bool).tril(-1)
    return (torch.rand(shape, generator=gen, dtype=torch.float64) < fraction) & below


@theorem_check("lemma21_fixed_point", THEOREM)
@uses("operator", "scores")
def check_fixed_point(
    n: int = 64,
    rhos: tuple[float, ...] = (0.3, 0.6, 0.9, 0.99),
    samples: int = 2,
    score_bound: float = 2.0,
    long_n: int = 512,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Operator rows satisfy ``a C'^kappa = w / Z``, ``sum a = 1``, ``a > 0`` (Lemma 2.1).

    Scores: ``samples`` uniform draws in ``[-B, B]``, one more draw with 20% of the past keys
    masked (``-inf``: they must get weight exactly 0 and the equation holds on the live
    keys), at every ``rho``; and constant scores at length ``long_n`` at ``rho = 0.9`` (rows
    far beyond the short cases). Measured: the largest row spread of
    ``q = log a + kappa log C' - s`` or row-sum error over all rows and cases.
    Tolerance ``1e-9 = 10 tol`` in float64 (``tol = 1e-10``, the operator's default): the
    solver leaves errors of the order of ``tol`` (module docstring: the defect reaches
    ``0.9 tol`` at ``n = 512``, ``rho = 0.99``), and the round-off of ``C'`` adds at most
    ``kappa n eps <= 99 * 512 * 2.2e-16 = 1.1e-11``; a solver stopped ten times early, or
    weights moved by ``1e-9``, fails. float32: ``1e-2`` (``kappa`` up to 99 amplifies a
    relative round-off of ``n * 6e-8``, n <= 512).

    Negative control: rows past the middle mixed with ``1e-4`` of uniform attention
    (``system.operator``); the defect is then about ``1e-4`` and exceeds the tolerance.
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    per_case: dict[str, float] = {}
    s = score_bound * (2 * torch.rand(samples + 1, n, n, generator=gen, dtype=torch.float64)
                       - 1)
    s[-1] = s[-1].masked_fill(_masked_keys((n, n), gen, 0.2), -math.inf)
    cases = [(f"random rho={rho}", s, rho) for rho in rhos]
    if long_n:
        cases.append((f"constant n={long_n} rho=0.9",
                      torch.zeros(long_n, long_n, dtype=torch.float64), 0.9))
    for label, scores, rho in cases:
        fed = system.scores(scores).to(dtype=dtype, device=device)
        w = system.operator(fed, rho, method="newton").weights
        defect = fixed_point_defect(w, scores, rho)
        per_case[label] = defect
        worst = worst_of(worst, defect)
    return Measurement(
        quantity="max row spread of log a + kappa log C' - s (and |sum a - 1|)",
        measured=worst,
        reference=0.0,
        relation="==",
        # 10 tol: the solver's errors are O(tol) (measured <= 0.9 tol), C' round-off <= 1.1e-11
        allowance=1e-9 if dtype == torch.float64 else 1e-2,
        details={"defect_by_case": per_case},
    )


@theorem_check("lemma21_exact_vs_mp", THEOREM)
@uses("operator")
def check_exact_vs_mp(
    n: int = 6,
    rhos: tuple[float, ...] = (0.3, 0.9, 0.99),
    score_bound: float = 2.0,
    dps: int = 30,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Operator vs the mpmath row solver at ``dps`` digits (ground truth), max abs difference.

    One uniform draw in ``[-B, B]`` with one past key masked (``-inf``) in the last row;
    the operator's default method (``"auto"``, what a user gets) and ``"newton"`` are both
    compared, at the default ``tol = 1e-10``. Tolerance ``tol = 1e-10`` in float64: each
    row's ``log a`` is left within about ``tol/10`` by the solver's estimate, carried to
    later rows through the column masses, and ``a <= 1``, so ``|a - a_mpmath| <= tol`` is the
    accuracy ``tol`` promises (measured: up to ``1.4e-12``, module docstring; the mpmath
    solver's own error is below ``10^-dps``). ``"auto"`` must meet the same accuracy whatever
    solver it names. float32: ``1e-4``.

    Negative control: the operator at ``0.85 rho`` (``system.operator``).
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    s = score_bound * (2 * torch.rand(n, n, generator=gen, dtype=torch.float64) - 1)
    if n >= 3:
        s[n - 1, 1] = -math.inf
    for rho in rhos:
        ref = causal_ot_exact_mp(s, mpmath.mpf(rho), dps=dps)
        for method in ("auto", "newton"):  # what a user gets by default, and the row solver
            w = system.operator(s.to(dtype=dtype, device=device), rho,
                                method=method).weights.double().cpu()
            for l_row, row in enumerate(ref):
                for j, v in enumerate(row):
                    worst = worst_of(worst, abs(float(w[l_row, j]) - float(v)))
                worst = worst_of(worst, w[l_row, len(row):].abs().sum())  # future keys: 0
    return Measurement(
        quantity=f"max |a_operator - a_mpmath(dps={dps})|",
        measured=worst,
        reference=0.0,
        relation="==",
        # the operator's default tol: its log-weights are within about that, and a <= 1
        allowance=1e-10 if dtype == torch.float64 else 1e-4,
    )


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="lemma21_fixed_point",
        theorem=THEOREM,
        section="§2.1",
        run=check_fixed_point,
        ci={"n": 32, "samples": 2, "long_n": 416},
        default={"n": 128, "samples": 4, "long_n": 2048},
        full={"n": 512, "samples": 4, "long_n": 4096},
        negative={"system": System(operator=mutants.late_rows_mixed(1e-4))},
    ),
    CheckSpec(
        name="lemma21_exact_vs_mp",
        theorem=THEOREM,
        section="§2.1",
        run=check_exact_vs_mp,
        ci={"n": 5},
        default={"n": 8},
        full={"n": 12, "dps": 50},
        negative={"system": System(operator=mutants.operator_at_scaled_rho(0.85))},
    ),
)

"""Batch unbalanced Sinkhorn (docs/theory.md §1) against POT, its optimality conditions, §1 numbers.

Independent reference: POT's ``ot.unbalanced.sinkhorn_unbalanced(a, b, M, reg=1,
reg_m=(inf, lam), reg_type='kl', method='sinkhorn')`` with ``a = 1``, ``M = -S`` on the causal
part and ``+inf`` above the diagonal. The method is named on purpose: in POT 0.9.7 the
translation-invariant method is wrong for a hard row marginal and the stabilised one goes
wrong once its absorption triggers (measured: 0.0244 and 0.3139 diagonal mass at
``rho = 0.999``, ``n = 32``, against 0.8651 for ``method='sinkhorn'``). Tested with POT
0.9.7.post1.
"""

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from proofs_check.operators.batch_uot import (
    BatchUOTConvergenceWarning,
    batch_unbalanced_sinkhorn,
)

ot = pytest.importorskip("ot")

F64 = torch.float64


def _pot_plan(scores: torch.Tensor, rho: float, b: np.ndarray | None = None) -> np.ndarray:
    """POT's plan for one ``(n, n)`` score matrix (rows hard, columns KL weight lam)."""
    n = scores.shape[-1]
    lam = rho / (1.0 - rho)
    cost = np.full((n, n), np.inf)
    low = np.tril_indices(n)
    cost[low] = -scores.detach().double().numpy()[low]
    b = np.ones(n) if b is None else b
    # reg_type='kl' takes the entropy relative to c = a b^T by default; our problem
    # (docs/theory.md §1) is relative to the all-ones measure, so pass c = 1 (identical when b = 1).
    return ot.unbalanced.sinkhorn_unbalanced(
        np.ones(n), b, cost, reg=1.0, reg_m=(np.inf, lam), reg_type="kl", c=np.ones((n, n)),
        method="sinkhorn", numItermax=200_000, stopThr=1e-14,
    )


def _random_scores(shape, seed, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=gen, dtype=F64)


@pytest.mark.parametrize("rho", [0.3, 0.7, 0.95])
@pytest.mark.parametrize("kind", ["zero", "random"])
def test_agrees_with_pot_sinkhorn(rho, kind):
    n = 24
    scores = torch.zeros(n, n, dtype=F64) if kind == "zero" else _random_scores((n, n), 1)
    ours = batch_unbalanced_sinkhorn(scores, rho, tol=1e-13)
    assert ours.info.converged
    ref = _pot_plan(scores, rho)
    # Both iterate the same fixed point to increments ~1e-13; the distance of log v to the
    # fixed point is at most rho/(1-rho) * 1e-13 <= 2e-12 at rho = 0.95, and plan entries
    # are <= 1, so 1e-10 leaves two orders of margin for POT's relative stopping rule.
    err = np.abs(ours.weights.numpy() - ref).max()
    assert err <= 1e-10, f"max |P - P_POT| = {err:.3e} at rho={rho}, {kind} scores"


def test_batch_dims_and_col_target_agree_with_pot():
    n, rho = 10, 0.8
    scores = _random_scores((2, 3, n, n), 2)
    gen = torch.Generator().manual_seed(3)
    b = 0.5 + torch.rand(3, n, generator=gen, dtype=F64)  # broadcast over the first batch dim
    res = batch_unbalanced_sinkhorn(scores, rho, col_target=b, tol=1e-13)
    assert res.weights.shape == (2, 3, n, n)
    worst = 0.0
    for i in range(2):
        for h in range(3):
            ref = _pot_plan(scores[i, h], rho, b[h].numpy())
            worst = max(worst, np.abs(res.weights[i, h].numpy() - ref).max())
    assert worst <= 1e-10, f"max |P - P_POT| = {worst:.3e}"  # same justification as above


def test_rows_hard_upper_zero_and_column_optimality():
    # KKT of the column update at the fixed point: v = (b / K^T u)^rho and colsum = v K^T u
    # give log colsum_j = log b_j - log v_j / kappa. Checked from the returned potentials,
    # which is a different identity from the update the solver iterates.
    n, rho = 40, 0.9
    scores = _random_scores((n, n), 4, scale=2.0)
    res = batch_unbalanced_sinkhorn(scores, rho, tol=1e-13)
    plan = res.weights
    eps = torch.finfo(F64).eps
    assert torch.equal(plan.triu(1), torch.zeros_like(plan))  # exactly 0 above the diagonal
    assert (plan[torch.ones(n, n, dtype=torch.bool).tril()] > 0).all()
    # Rows: a final row update is applied, so only round-off of n terms remains.
    assert (plan.sum(-1) - 1).abs().max() <= 4 * n * eps
    kappa = rho / (1 - rho)
    lhs = torch.log(plan.sum(-2))
    rhs = -res.log_v / kappa
    # log v is within rho/(1-rho) * 1e-13 = 9e-13 of its fixed point; dividing by kappa = 9
    # and adding the log of n-term sums (~n eps) stays far below 1e-11.
    assert (lhs - rhs).abs().max() <= 1e-11


def test_rho_zero_is_softmax():
    n = 17
    scores = _random_scores((3, n, n), 5)
    res = batch_unbalanced_sinkhorn(scores, 0.0)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    sm = torch.softmax(scores.masked_fill(mask, -math.inf), dim=-1)
    # exp(S - logsumexp S) vs torch.softmax: a few ulps of entries <= 1.
    assert (res.weights - sm).abs().max() <= 8 * torch.finfo(F64).eps
    assert res.info.converged and res.info.sweeps == 1


def test_row_shift_invariance():
    n, rho = 20, 0.8
    scores = _random_scores((n, n), 6)
    shift = _random_scores((n, 1), 7, scale=5.0)
    a = batch_unbalanced_sinkhorn(scores, rho, tol=1e-13).weights
    b = batch_unbalanced_sinkhorn(scores + shift, rho, tol=1e-13).weights
    # u absorbs a row constant exactly; the iterates differ only by round-off of the shifted
    # log-sum-exps (|shift| <= ~15, ulp ~2e-15), amplified at most by 1/(1-rho) = 5.
    assert (a - b).abs().max() <= 1e-12


def test_masked_key_gets_no_mass():
    n, rho = 12, 0.7
    scores = _random_scores((n, n), 8)
    scores[:, 4] = -math.inf  # key 5 masked for every query (query 5 keeps keys 1..4)
    res = batch_unbalanced_sinkhorn(scores, rho, tol=1e-12)
    assert torch.equal(res.weights[:, 4], torch.zeros(n, dtype=F64))
    assert (res.weights.sum(-1) - 1).abs().max() <= 4 * n * torch.finfo(F64).eps
    assert torch.isfinite(res.log_v).all()


def test_float32_matches_float64():
    n, rho = 32, 0.9
    scores = _random_scores((n, n), 9)
    p64 = batch_unbalanced_sinkhorn(scores, rho).weights
    res32 = batch_unbalanced_sinkhorn(scores.float(), rho)
    assert res32.weights.dtype == torch.float32 and res32.info.converged
    # float32 stops at increments 1e-5, i.e. log v within rho/(1-rho)*1e-5 = 9e-5 of its
    # fixed point, plus ~1e-6 round-off of O(log n) potentials; plan entries <= 1 move by at
    # most ~2e-4 relative. 5e-4 absolute leaves a factor 2.5.
    err = (res32.weights.double() - p64).abs().max()
    assert err <= 5e-4, f"float32 vs float64: {err:.2e}"


def test_half_precision_computed_in_float32_and_cast_back():
    scores = _random_scores((8, 8), 10)
    res = batch_unbalanced_sinkhorn(scores.to(torch.bfloat16), 0.5)
    assert res.weights.dtype == torch.bfloat16
    ref = batch_unbalanced_sinkhorn(scores.to(torch.bfloat16).float(), 0.5).weights
    assert torch.equal(res.weights, ref.to(torch.bfloat16))


def test_non_convergence_warns():
    scores = torch.zeros(16, 16, dtype=F64)
    with pytest.warns(BatchUOTConvergenceWarning, match="did not converge"):
        res = batch_unbalanced_sinkhorn(scores, 0.9, max_iter=3)
    assert not res.info.converged and res.info.sweeps == 3
    assert res.info.residual > res.info.tol
    # The reported error bound is the contraction bound (r + delta) / (1 - rho) for the
    # returned log v, whose residual r = |T(g) - g| is measured; delta is the rounding
    # allowance 8 eps (1 + log2 n + max|f'| + max|g|) ~ 1e-13 here, so /(1 - rho) ~ 1e-12.
    assert 10 * res.info.residual <= res.info.error_bound <= 10 * res.info.residual + 1e-11


def test_error_bound_contains_the_distance_to_the_fixed_point():
    # a posteriori bound rho r/(1-rho) from a short run vs the distance to a tight solve.
    scores = _random_scores((20, 20), 11)
    with pytest.warns(BatchUOTConvergenceWarning):
        short = batch_unbalanced_sinkhorn(scores, 0.8, max_iter=15)
    tight = batch_unbalanced_sinkhorn(scores, 0.8, tol=1e-14, max_iter=10_000)
    dist = float((short.log_v - tight.log_v).abs().max())
    assert 0 < dist <= short.info.error_bound + 1e-12


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((torch.zeros(3),), {}, "at least 2 dimensions"),
        ((torch.zeros(3, 4),), {}, "square"),
        ((torch.zeros(0, 0),), {}, "n >= 1"),
        ((torch.zeros(3, 3, dtype=torch.int64),), {}, "scores must have dtype"),
        ((torch.zeros(3, 3, dtype=torch.float8_e4m3fn),), {}, "scores must have dtype"),
        ((torch.tensor([[math.nan, 0.0], [0.0, 0.0]]),), {}, "NaN"),
        ((torch.tensor([[0.0, 0.0], [-math.inf, -math.inf]]),), {}, "every key masked"),
        ((torch.zeros(3, 3), 1.0), {}, "rho"),
        ((torch.zeros(3, 3), -0.1), {}, "rho"),
        ((torch.zeros(3, 3), math.nan), {}, "rho"),
        ((torch.zeros(3, 3), 0.5), {"col_target": torch.tensor([1.0, 0.0, 1.0])}, "col_target"),
        ((torch.zeros(3, 3), 0.5), {"col_target": torch.ones(4)}, "col_target"),
        ((torch.zeros(3, 3), 0.5), {"tol": 0.0}, "tol"),
        ((torch.zeros(3, 3), 0.5), {"max_iter": 0}, "max_iter"),
    ],
)
def test_bad_input(args, kwargs, match):
    if len(args) == 1:
        args = (*args, 0.5)
    with pytest.raises(ValueError, match=match):
        batch_unbalanced_sinkhorn(*args, **kwargs)


def test_n_equals_one():
    res = batch_unbalanced_sinkhorn(torch.tensor([[3.0]], dtype=F64), 0.9)
    assert torch.equal(res.weights, torch.ones(1, 1, dtype=F64))


# docs/theory.md §1's numbers (diagonal masses, leak) are reproduced in test_theorems_s1_numbers.py.


def _diag_mass(rho: float, *, tol: float, max_iter: int | None = None) -> float:
    res = batch_unbalanced_sinkhorn(torch.zeros(32, 32, dtype=F64), rho, tol=tol,
                                    max_iter=max_iter)
    assert res.info.converged
    return float(torch.diagonal(res.weights).mean())


@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99])
def test_constant_score_diagonal_mass_matches_pot(rho):
    ours = _diag_mass(rho, tol=1e-12)
    n = 32
    ref = float(np.trace(_pot_plan(torch.zeros(n, n, dtype=F64), rho)) / n)
    # converged to increments 1e-12: diagonal entries within ~rho/(1-rho)*1e-12 <= 1e-10
    assert abs(ours - ref) <= 1e-9, (ours, ref)


def test_importable_in_a_fresh_process():
    # The module has no import-time side effects beyond torch (no global precision, no TF32).
    code = (
        "import torch; from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn"
        " as f; r = f(torch.zeros(32, 32, dtype=torch.float64), 0.5);"
        " print(repr(float(r.weights.diagonal().mean())))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    ref = float(np.trace(_pot_plan(torch.zeros(32, 32, dtype=F64), 0.5)) / 32)
    assert abs(float(out.stdout) - ref) <= 1e-9  # converged at tol 1e-10 (see above)

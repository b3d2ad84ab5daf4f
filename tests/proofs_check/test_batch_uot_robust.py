"""Batch unbalanced Sinkhorn (docs/theory.md §1) under large, shifted and hostile input.

Independent reference: the scaling iteration ``u = 1/(K v)``, ``v = (b/(K^T u))^rho`` in the
*linear* domain in mpmath at 40 digits, on the exact stored float values of the scores
(mpmath's exponent range is unbounded, so ``exp(1e16)`` is an ordinary number there). The
solver under test works in float32/float64 in the log domain on row-shifted scores: a
different method, dtype and parametrisation.
"""

import math
import warnings

import mpmath
import numpy as np
import pytest
import torch

from proofs_check.operators import batch_uot
from proofs_check.operators.batch_uot import (
    BatchUOTConvergenceWarning,
    batch_unbalanced_sinkhorn,
)

F64, F32 = torch.float64, torch.float32


def _mp_plan(scores: torch.Tensor, rho: float, dps: int = 40) -> list[list[mpmath.mpf]]:
    """Plan of one ``(n, n)`` score matrix (b = 1) by linear-domain scaling in mpmath."""
    return _mp_solve(scores, rho, dps)[0]


def _mp_solve(scores: torch.Tensor, rho: float, dps: int = 40):
    """``(plan, log v)`` of one ``(n, n)`` score matrix (b = 1), linear-domain mpmath."""
    n = scores.shape[-1]
    vals = scores.detach().double().tolist()  # exact: float32 -> float64 is exact
    with mpmath.workdps(dps):
        kern = [[mpmath.exp(mpmath.mpf(vals[q][j])) for j in range(q + 1)] for q in range(n)]
        v = [mpmath.mpf(1)] * n
        for _ in range(20_000):
            u = [1 / mpmath.fsum(kern[q][j] * v[j] for j in range(q + 1)) for q in range(n)]
            v_new = [(1 / mpmath.fsum(kern[q][j] * u[q] for q in range(j, n))) ** rho
                     for j in range(n)]
            # relative change of log v (log v may be ~1e16 in size: an absolute test would
            # ask for more digits than dps holds)
            change = max(abs(mpmath.log(a) - mpmath.log(b)) / (1 + abs(mpmath.log(b)))
                         for a, b in zip(v_new, v, strict=True))
            v = v_new
            if change < mpmath.mpf(10) ** (-(dps - 8)):
                break
        else:  # pragma: no cover - the contraction makes this unreachable
            raise AssertionError("mpmath reference did not converge")
        u = [1 / mpmath.fsum(kern[q][j] * v[j] for j in range(q + 1)) for q in range(n)]
        plan = [[u[q] * kern[q][j] * v[j] if j <= q else mpmath.mpf(0) for j in range(n)]
                for q in range(n)]
        return plan, [mpmath.log(x) for x in v]


def _max_err(plan: torch.Tensor, ref: list[list[mpmath.mpf]]) -> float:
    p = plan.double().tolist()
    return max(abs(float(ref[q][j]) - p[q][j]) for q in range(len(ref)) for j in range(len(ref)))


def _rows_err(plan: torch.Tensor) -> float:
    return float((plan.double().sum(-1) - 1).abs().max())


def _scores(kind: str, n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n, n, generator=gen, dtype=F64)
    if kind == "f32 randn*3e4":
        return (z * 3e4).float()
    if kind == "f32 randn+1e7":
        return (z + 1e7).float()
    if kind == "f64 randn*1e16":
        return z * 1e16
    if kind == "f64 randn+1e7":
        return z + 1e7
    return torch.sign(z) * 9e307  # "f64 +-9e307": differences overflow float64


# Scores whose scale or shift breaks an unshifted solve (n = 64, rho = 0.9): without the
# row shift the first three give rows summing to 0.35-0.69 while reporting convergence.
@pytest.mark.parametrize("kind", ["f32 randn*3e4", "f32 randn+1e7", "f64 randn*1e16",
                                  "f64 randn+1e7", "f64 +-9e307"])
@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_large_scores_agree_with_mpmath(kind, rho):
    n = 7
    scores = _scores(kind, n, seed=3)
    with warnings.catch_warnings():
        # Whether float32 resolves log v of starved columns (size ~1e5 here) to 1e-5 depends
        # on the draw; a stop at the round-off floor is reported (converged=False, warning),
        # and the plan must be right either way. Tested on its own below.
        warnings.simplefilter("ignore", BatchUOTConvergenceWarning)
        res = batch_unbalanced_sinkhorn(scores, rho)
    eps = torch.finfo(scores.dtype).eps
    # Rows are a softmax of the shifted scores: n terms of round-off, whatever the scale.
    assert _rows_err(res.weights) <= 4 * n * eps
    # measured on the returned plan (1e-15: the order of a float64 summation)
    assert res.info.residual >= _rows_err(res.weights) - 1e-15
    # |delta log P| <= |delta g_j| + |delta f_l| <= 2 |g - g*| <= 2 r / (1 - rho) in exact
    # arithmetic (entries <= 1, so the absolute error is at most that), plus round-off: 64 eps
    # for float64 inputs (shifted exponents of size O(1)); 1e-5 for float32 (log-potentials
    # of size up to ~1e5 are resolved only to ~1e-2, but only in columns whose mass is
    # ~exp(-1e4), i.e. 0; the columns that hold mass have O(1) exponents).
    slack = 1e-5 if scores.dtype == F32 else 64 * eps
    err = _max_err(res.weights, _mp_plan(scores, rho))
    bound = 2 * res.info.residual / (1 - rho) + slack
    assert err <= bound, f"{kind}, rho={rho}: max |P - P_mp| = {err:.3e} > {bound:.3e}"
    assert torch.isfinite(res.log_v).all() and torch.isfinite(res.log_u).all()


def _exact_shift_scores(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    """Scores on a grid where adding 1e7 is exact: integers (float32, ulp 1 at 1e7) or
    multiples of 2^-20 (float64, ulp 2^-29 at 1e7)."""
    gen = torch.Generator().manual_seed(seed)
    z = 3 * torch.randn(n, n, generator=gen, dtype=F64)
    step = 1.0 if dtype == F32 else 2.0**-20
    return (torch.round(z / step) * step).to(dtype)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("rho", [0.3, 0.9])
def test_constant_shift_gives_the_same_plan(dtype, rho):
    n = 24
    scores = _exact_shift_scores(dtype, n, seed=5)
    gen = torch.Generator().manual_seed(6)
    row_shift = torch.randint(-10**6, 10**6, (n, 1), generator=gen).to(dtype)
    base = batch_unbalanced_sinkhorn(scores, rho)
    assert base.info.converged
    for shift in (1e7, -1e7, row_shift, 1e7 + row_shift):
        shifted = scores + shift
        assert torch.equal(shifted - shift, scores)  # the shift is exact in this dtype
        res = batch_unbalanced_sinkhorn(shifted, rho)
        # S - rowmax(S) is then bit-for-bit the same matrix, so is everything computed from
        # it: the plan must be identical, not merely close (before the fix: 0.16-0.23 apart
        # in float32, 2e-10 in float64, for randn + 1e7).
        assert torch.equal(res.weights, base.weights)
        assert res.info.converged and res.info.sweeps == base.info.sweeps
        # log_u carries the shift: f = f' - rowmax, so f + rowmax is unchanged (to the
        # rounding of a number of size 1e7: ulp 1 in float32, 2e-9 in float64).
        shift_err = (res.log_u + shifted.amax(-1) - base.log_u - scores.amax(-1)).abs().max()
        assert float(shift_err) <= 2 * torch.finfo(dtype).eps * 2e7


def test_shifted_float64_plan_agrees_with_pot():
    ot = pytest.importorskip("ot")
    n, rho = 16, 0.8
    scores = _exact_shift_scores(F64, n, seed=7)
    res = batch_unbalanced_sinkhorn(scores + 1e7, rho, tol=1e-13)
    cost = np.full((n, n), np.inf)
    low = np.tril_indices(n)
    cost[low] = -scores.numpy()[low]  # POT sees the unshifted scores (exp(1e7) overflows)
    lam = rho / (1 - rho)
    ref = ot.unbalanced.sinkhorn_unbalanced(
        np.ones(n), np.ones(n), cost, reg=1.0, reg_m=(np.inf, lam), reg_type="kl",
        c=np.ones((n, n)), method="sinkhorn", numItermax=200_000, stopThr=1e-14)
    # log v within 1e-13/(1-rho) = 5e-13 of the fixed point; entries <= 1 (see the POT tests).
    assert np.abs(res.weights.numpy() - ref).max() <= 1e-10


def test_residual_is_the_column_condition_of_the_returned_plan():
    # Recompute T(g) - g = rho (log b - log colsum(P) + g) - g from the returned plan and
    # log_v in the linear domain (nothing underflows at this scale): it must be what the
    # solver reports, up to the round-off of log colsum (~n eps on O(log n) numbers).
    n, rho = 20, 0.9
    gen = torch.Generator().manual_seed(8)
    scores = 2 * torch.randn(2, n, n, generator=gen, dtype=F64)
    b = 0.5 + torch.rand(n, generator=gen, dtype=F64)
    with pytest.warns(BatchUOTConvergenceWarning):  # a short run: residual well above tol
        res = batch_unbalanced_sinkhorn(scores, rho, col_target=b, max_iter=40)
    g = res.log_v
    r_col = float((rho * (b.log() - res.weights.sum(-2).log() + g) - g).abs().max())
    assert res.info.residual == pytest.approx(max(r_col, _rows_err(res.weights)), abs=1e-13)
    assert res.info.error_bound == pytest.approx(r_col / (1 - rho), abs=1e-12)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_tolerance_at_the_resolution_ends_honestly(dtype):
    # tol = eps: the smallest tolerance accepted. Before: float32 tol 1e-30 ran all 200000
    # sweeps (13 s) at n = 32, reporting a residual of 1.2e-7. Now every run ends within a
    # bounded number of sweeps, and either meets tol (on the returned plan) or says it did
    # not (warning, converged=False). Which of the two depends on the last bits of the
    # rounding, so both are allowed; the stop rule itself is tested below.
    n = 32
    eps = torch.finfo(dtype).eps
    for seed, rho in ((0, 0.5), (1, 0.9), (2, 0.9)):
        gen = torch.Generator().manual_seed(seed)
        scores = (3 * torch.randn(n, n, generator=gen, dtype=F64)).to(dtype)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = batch_unbalanced_sinkhorn(scores, rho, tol=eps, max_iter=10**12)
        # about log(1/eps)/(1 - rho) sweeps to reach the floor, plus the stop rule's
        # patience STALL_SWEEPS (1 + 1/(1 - rho)) (module docstring): below 2000 here.
        assert res.info.sweeps <= 2000, (seed, rho, res.info.sweeps)
        warned = [w for w in caught if issubclass(w.category, BatchUOTConvergenceWarning)]
        assert res.info.converged == (res.info.residual <= eps) == (not warned)
        assert res.info.residual >= _rows_err(res.weights) - 1e-15  # summation order


@pytest.mark.parametrize("dtype", [F32, F64])
def test_round_off_stop_is_reported(dtype, monkeypatch):
    # With no patience (stop at the first sweep that sets no new smallest increment), the
    # stop happens once r <= 2 delta / (1 - rho) (module docstring), i.e. well above eps at
    # rho = 0.9: measured 3e-6 to 8e-6 (float32) and 6e-15 to 1.6e-14 (float64) over seeds
    # 0..5 at n = 16 and 32, all stopped this way. The stop must be reported, not passed
    # off as convergence, and the plan must still be a plan.
    monkeypatch.setattr(batch_uot, "STALL_SWEEPS", 0)
    n, rho = 12, 0.9
    eps = torch.finfo(dtype).eps
    gen = torch.Generator().manual_seed(0)
    scores = (3 * torch.randn(n, n, generator=gen, dtype=F64)).to(dtype)
    with pytest.warns(BatchUOTConvergenceWarning, match="stopped shrinking"):
        res = batch_unbalanced_sinkhorn(scores, rho, tol=eps, max_iter=10**12)
    assert not res.info.converged and res.info.residual > eps
    assert res.info.sweeps < 1000  # ~log(1/eps)/(-log rho) = 150-340, then one miss
    assert _rows_err(res.weights) <= 4 * n * eps
    # The reported error bound contains the distance of log v to the fixed point computed
    # by mpmath (measured ratio 0.7-0.85 for such early stops, rho = 0.5-0.99).
    _, log_v_mp = _mp_solve(scores, rho)
    dist = max(abs(float(a) - b) for a, b in zip(log_v_mp, res.log_v.double().tolist(),
                                                    strict=True))
    assert dist <= res.info.error_bound, (dist, res.info.error_bound)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_error_bound_contains_the_mpmath_distance_at_the_floor(dtype, rho):
    # Run to the resolution (tol = eps): here the distance of log v to the fixed point is
    # round-off, up to 1.6 times the contraction term r/(1 - rho) alone (measured); the
    # rounding allowance delta in error_bound must cover it (module docstring).
    n = 8
    eps = torch.finfo(dtype).eps
    gen = torch.Generator().manual_seed(1)
    scores = (3 * torch.randn(n, n, generator=gen, dtype=F64)).to(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BatchUOTConvergenceWarning)  # either end is fine
        res = batch_unbalanced_sinkhorn(scores, rho, tol=eps, max_iter=10**6)
    _, log_v_mp = _mp_solve(scores, rho)
    dist = max(abs(float(a) - b) for a, b in zip(log_v_mp, res.log_v.double().tolist(),
                                                    strict=True))
    assert dist <= res.info.error_bound, (dist, res.info.error_bound)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_tolerance_below_machine_epsilon_is_refused(dtype):
    eps = torch.finfo(dtype).eps
    with pytest.raises(ValueError, match=r"tol .* below the resolution"):
        batch_unbalanced_sinkhorn(torch.zeros(4, 4, dtype=dtype), 0.5, tol=eps / 2)
    # bfloat16 is computed in float32: its floor is float32's epsilon.
    with pytest.raises(ValueError, match="tol"):
        batch_unbalanced_sinkhorn(torch.zeros(4, 4, dtype=torch.bfloat16), 0.5, tol=1e-10)


class _Opaque:
    pass


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scores": torch.zeros(0, 3, 3)}, "scores .*empty"),
        ({"scores": torch.zeros(2, 0, 3, 3)}, "scores .*empty"),
        ({"scores": torch.zeros(3, 3, device="meta")}, "scores .*meta"),
        ({"scores": [[0.0]]}, "scores must be a torch.Tensor"),
        ({"rho": torch.tensor(0.5, requires_grad=True)}, "rho"),
        ({"rho": torch.tensor(0.5, device="meta")}, "rho .*meta"),
        ({"rho": "0.5"}, "rho"),
        ({"tol": math.inf}, "tol must be a positive finite"),
        ({"tol": -math.inf}, "tol must be a positive finite"),
        ({"tol": math.nan}, "tol must be a positive finite"),
        ({"tol": True}, "tol must be a positive finite"),
        ({"tol": -1e-3}, "tol must be a positive finite"),
        ({"tol": "1e-5"}, "tol must be a positive finite"),
        ({"tol": 1e-300}, "tol .*below the resolution"),
        ({"tol": 10**400}, "tol must be a positive finite"),
        ({"rho": 10**400}, "rho"),
        ({"max_iter": 0}, "max_iter must be a positive integer"),
        ({"max_iter": -5}, "max_iter must be a positive integer"),
        ({"max_iter": 2.5}, "max_iter must be a positive integer"),
        ({"max_iter": 1e3}, "max_iter must be a positive integer"),
        ({"max_iter": True}, "max_iter must be a positive integer"),
        ({"max_iter": "5"}, "max_iter must be a positive integer"),
        ({"max_iter": np.int64(0)}, "max_iter must be a positive integer"),
        ({"col_target": "x"}, "col_target"),
        ({"col_target": _Opaque()}, "col_target"),
        ({"col_target": torch.ones(3, dtype=torch.complex128)}, "col_target .*dtype"),
        ({"col_target": torch.ones(3, dtype=torch.bool)}, "col_target .*dtype"),
        ({"col_target": torch.ones(3, device="meta")}, "col_target .*meta"),
        ({"col_target": [1.0, math.inf, 1.0]}, "col_target must be finite"),
        ({"col_target": [1.0, math.nan, 1.0]}, "col_target must be finite"),
        ({"col_target": [[1.0, 1.0]]}, "col_target .*broadcast"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_argument(kwargs, match):
    args = {"scores": torch.zeros(3, 3), "rho": 0.5, **kwargs}
    with pytest.raises(ValueError, match=match):
        batch_unbalanced_sinkhorn(args.pop("scores"), args.pop("rho"), **args)


def test_good_unusual_arguments_are_accepted():
    s = torch.zeros(3, 3, dtype=F64)
    ref = batch_unbalanced_sinkhorn(s, 0.5).weights
    for kwargs in ({"tol": np.float64(1e-10)}, {"max_iter": np.int64(10**9)},
                   {"col_target": [1, 1, 1]}, {"col_target": np.ones(3)},
                   {"col_target": torch.ones(1, dtype=torch.int64)}):
        got = batch_unbalanced_sinkhorn(s, np.float64(0.5), **kwargs).weights
        assert torch.allclose(got, ref, rtol=0, atol=1e-9)  # converged at 1e-10 (see POT test)


@pytest.mark.parametrize("tol", [10.0, 6150.0, 1e300])
def test_huge_tolerance_still_runs_one_sweep_and_returns_a_plan(tol):
    """A tolerance above every possible increment (found by the operator fuzz test: tol =
    6150 made the default sweep budget negative). One sweep meets it; the plan's rows still
    sum to one (checked in float64 directly, not through the solver's residual)."""
    s = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    res = batch_unbalanced_sinkhorn(s, 0.9375, tol=tol)
    assert res.info.converged and res.info.sweeps >= 1
    rows = res.weights.sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-12, rtol=0)


def test_rho_too_close_to_one_for_the_default_budget_is_refused_before_any_sweep(monkeypatch):
    """rho = 1 - 1e-7 contracts by 1e-7 a sweep: about 2.8e8 sweeps to the float32 default tol
    1e-5, far beyond MAX_DEFAULT_SWEEPS. Without max_iter: a ValueError naming rho and max_iter
    before any sweep (the solver replaced by one that fails if called); with max_iter, the
    sweeps run and the result says it did not converge."""
    scores = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))  # float32

    def no_sweeps(*args, **kwargs):
        raise AssertionError("the solver ran")

    with monkeypatch.context() as m:
        m.setattr(batch_uot, "_solve", no_sweeps)
        with pytest.raises(ValueError, match=r"rho = 0\.9999999 is too close to 1.*max_iter"):
            batch_unbalanced_sinkhorn(scores, 0.9999999)
    with pytest.warns(BatchUOTConvergenceWarning, match="max_iter reached"):
        res = batch_unbalanced_sinkhorn(scores, 0.9999999, max_iter=50)
    assert not res.info.converged and res.info.sweeps == 50


def test_default_budget_covers_the_theory_table_up_to_rho_09999():
    """docs/theory.md §1's diagonal-mass table converges at rho = 0.9999 in 258132 sweeps (to a
    relative change of 1e-15); its check runs the plan at tol 1e-12 with the default budget,
    which must hold those sweeps (the contraction estimate, not a run: 10 s)."""
    assert batch_uot._default_max_iter(0.9999, 1e-12) >= 258132
    with pytest.raises(ValueError, match="rho"):
        batch_uot._default_max_iter(0.99999, 1e-12)

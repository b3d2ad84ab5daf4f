"""Checks of the prefix-consistent causal OT operator itself (docs/theory.md §2).

References are always a different method: mpmath at 30 digits (Lemma 2.1 solved independently
in arbitrary precision), torch.softmax, the operator on a shorter/edited sequence, or another
solver of the same fixed point.
"""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest
import torch

from proofs_check.operators import (
    CausalOTResult,
    ConvergenceInfo,
    ConvergenceWarning,
    causal_ot_attention,
    causal_ot_exact_mp,
)

METHODS = ["sinkhorn", "anderson", "newton"]
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
        ],
    ),
]
F64 = torch.float64


@pytest.fixture(autouse=True)
def _no_tf32():
    """TF32 off in checks (matters only on CUDA)."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def rand_scores(*shape: int, seed: int = 0, dtype=F64, device="cpu", scale=1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g, dtype=F64)).to(dtype=dtype, device=device)


def causal_softmax_ref(s: torch.Tensor) -> torch.Tensor:
    n = s.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
    return torch.softmax(s.masked_fill(upper, float("-inf")), dim=-1)


def mp_reference(s: torch.Tensor, rho: float, dps: int = 30) -> torch.Tensor:
    rows = causal_ot_exact_mp(s, rho, dps=dps)
    out = torch.zeros(s.shape[-1], s.shape[-1], dtype=F64)
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            out[i, j] = float(v)
    return out


def fixed_point_spread(w: torch.Tensor, s: torch.Tensor, rho: float) -> float:
    """max over rows of the spread of ``log a + kappa log C' - s`` over live keys (= -log Z_l).

    Lemma 2.1 says it is constant along each row; returns max(row max - row min).
    """
    kappa = rho / (1 - rho)
    cp = torch.cumsum(w, dim=-2)
    n = w.shape[-1]
    live = torch.ones(n, n, dtype=torch.bool).tril() & torch.isfinite(s)
    val = torch.log(w) + kappa * torch.log(cp) - s
    hi = val.masked_fill(~live, -math.inf).amax(-1)
    lo = val.masked_fill(~live, math.inf).amin(-1)
    return (hi - lo).max().item()


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", [*METHODS, "auto"])
@pytest.mark.parametrize("rho", [0.3, 0.9])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_rows_sum_to_one_and_upper_triangle_is_zero(device, method, rho, dtype):
    s = rand_scores(2, 3, 12, 12, seed=1, dtype=dtype, device=device)
    s = s + torch.triu(torch.full((12, 12), float("nan"), dtype=dtype, device=device), 1)
    res = causal_ot_attention(s, rho, method=method)
    assert isinstance(res, CausalOTResult) and isinstance(res.info, ConvergenceInfo)
    w = res.weights
    assert w.shape == s.shape and w.dtype == dtype and w.device == s.device
    assert res.info.converged
    # exactly zero above the diagonal, even though NaN was stored there (ignored entries)
    assert torch.count_nonzero(torch.triu(w, 1)) == 0
    # rows sum to 1 up to the rounding of a length-12 sum: 12 * eps is ample
    eps = torch.finfo(dtype).eps
    assert (w.sum(-1) - 1).abs().max().item() <= 12 * eps
    assert (w >= 0).all() and torch.isfinite(w).all()


@pytest.mark.parametrize("method", [*METHODS, "auto"])
def test_rho_zero_is_softmax_bit_for_bit(method):
    # rho = 0 short-circuits to the masked-softmax code path (documented): bitwise equal.
    s = rand_scores(3, 9, 9, seed=2)
    res = causal_ot_attention(s, 0.0, method=method)
    assert torch.equal(res.weights, causal_softmax_ref(s))
    assert res.info.method == "softmax" and res.info.converged


def test_n_equal_one():
    res = causal_ot_attention(torch.tensor([[[-3.0]]], dtype=F64), 0.7)
    assert torch.equal(res.weights, torch.ones(1, 1, 1, dtype=F64))


@pytest.mark.parametrize("method", METHODS)
def test_constant_added_to_a_row_changes_nothing(method):
    rho = 0.6
    s = rand_scores(10, 10, seed=3)
    shift = torch.linspace(-20, 35, 10, dtype=F64).unsqueeze(-1)  # one constant per row
    a = causal_ot_attention(s, rho, method=method, tol=1e-13).weights
    b = causal_ot_attention(s + shift, rho, method=method, tol=1e-13).weights
    # Proposition 2.4. Both solves stop at increment 1e-13; the weights then differ by
    # O(tol / (1 - rho)^2) ~ 1e-12 at most, plus rounding of scores up to 35 (~1e-14).
    assert (a - b).abs().max().item() <= 2e-12


@pytest.mark.parametrize("method", METHODS)
def test_prefix_consistency(method):
    rho = 0.5
    n, m = 24, 9
    s = rand_scores(2, n, n, seed=4)
    full = causal_ot_attention(s, rho, method=method, tol=1e-14).weights
    pref = causal_ot_attention(s[..., :m, :m].contiguous(), rho, method=method, tol=1e-14).weights
    # Proposition 2.3: exactly equal in exact arithmetic; 1e-12 allows float64 rounding.
    assert (full[..., :m, :m] - pref).abs().max().item() <= 1e-12
    assert torch.count_nonzero(full[..., :m, m:]) == 0


# --------------------------------------------------------------------------- accuracy


MP_CASES = [
    pytest.param(m, r, marks=[pytest.mark.slow] if (m, r) == ("sinkhorn", 0.99) else [])
    for m in METHODS
    for r in (0.2, 0.5, 0.9, 0.99)
]  # plain sweeps at rho = 0.99 need ~3000 sweeps (10 s): that case runs with -m slow


@pytest.mark.parametrize(("method", "rho"), MP_CASES)
def test_solvers_agree_with_mpmath(method, rho):
    n = 8
    s = rand_scores(n, n, seed=5, scale=2.0)
    ref = mp_reference(s, rho, dps=30)
    tol = 1e-13
    res = causal_ot_attention(s, rho, method=method, tol=tol)
    err = (res.weights - ref).abs().max().item()
    if method == "newton":
        # quadratically convergent Newton stopped at step 1e-13, then polished: only float64
        # rounding of O(kappa) log terms remains; 1e-14 * (1 + kappa) covers it.
        bound = 1e-14 * (1 + rho / (1 - rho))
    else:
        # increment tol -> fixed-point residual tol/(1-rho) -> logV error about that over the
        # (1 - rho) contraction gap: tol/(1-rho)^2, times a safety factor 10.
        bound = 10 * tol / (1 - rho) ** 2 + 1e-14
    assert err <= bound, f"{method} rho={rho}: max |a - a_mp| = {err:.3e} > {bound:.1e}"


@pytest.mark.parametrize("rho", [0.3, 0.9, pytest.param(0.99, marks=pytest.mark.slow)])
def test_iterative_methods_agree_with_newton_at_n_32(rho):
    s = rand_scores(2, 32, 32, seed=6)
    ex = causal_ot_attention(s, rho, method="newton", tol=1e-13).weights
    for method in ("sinkhorn", "anderson"):
        if method == "sinkhorn" and rho == 0.99:
            continue  # thousands of sweeps; covered against mpmath at n = 8 above
        w = causal_ot_attention(s, rho, method=method, tol=1e-12).weights
        bound = 10 * 1e-12 / (1 - rho) ** 2  # same reasoning as the mpmath test
        assert (w - ex).abs().max().item() <= bound, method


@pytest.mark.parametrize("rho", [0.3, 0.8, 0.99])
def test_fixed_point_equation_of_lemma_2_1(rho):
    # a * C'^kappa * Z == w, i.e. log a + kappa log C' - s is the same (-log Z_l) along a row.
    s = rand_scores(40, 40, seed=7, scale=3.0)
    w = causal_ot_attention(s, rho, method="newton", tol=1e-13).weights
    spread = fixed_point_spread(w, s, rho)
    # Each term is O(1 + kappa * |log C'|) <= O(1 + kappa * log 40) in size: float64
    # rounding then allows about 20 eps times that.
    bound = 20 * 2.3e-16 * (1 + rho / (1 - rho) * math.log(40)) + 1e-14
    assert spread <= bound, spread


@pytest.mark.parametrize("rho", [0.6, 0.99])
def test_default_tol_bounds_the_weights_error_and_the_fixed_point_defect(rho):
    # ConvergenceInfo: at the default tol each row stops once its own error estimate is
    # <= tol/10, given the rows before it; the errors add up over rows and the fixed-point
    # defect carries a factor up to 2 + kappa. Measured here against the pure-torch solver
    # (other code and arithmetic) at tol 1e-13: both must stay within tol = 1e-10 itself at
    # n = 512 (weights: absolute; defect: the spread of -log Z_l along a row).
    from proofs_check.operators.causal_ot._common import live_mask, shift_rows
    from proofs_check.operators.causal_ot._newton import solve_dense

    s = rand_scores(1, 512, 512, seed=20)
    res = causal_ot_attention(s, rho)
    assert res.info.converged and res.info.residual <= res.info.tol / 10
    ref, _, _ = solve_dense(*shift_rows(s, live_mask(s)), rho, 1e-13, 100)
    err = (res.weights - ref).abs().max().item()
    # the reference's own defect is ~1e-13 (tol 1e-13 plus rounding): far below 1e-10
    assert err <= res.info.tol, err
    assert fixed_point_spread(res.weights[0], s[0], rho) <= res.info.tol


def test_mp_solver_matches_a_closed_form_row():
    # constant scores, rho = 1/2 (kappa = 1): row 2 has a_1 (1 + a_1) = a_2^2, a_1 + a_2 = 1
    # -> a_1 = 1/3 exactly; row 3 is the root of a quartic, checked through the fixed point.
    rows = causal_ot_exact_mp([[0.0] * 3] * 3, 0.5, dps=40)
    with mpmath.workdps(40):
        assert abs(rows[1][0] - mpmath.mpf(1) / 3) < mpmath.mpf(10) ** -38
        c = [rows[0][0] + rows[1][0] + rows[2][0], rows[1][1] + rows[2][1], rows[2][2]]
        z = [rows[2][j] * c[j] for j in range(3)]
        assert max(abs(z[j] - z[0]) for j in range(3)) < mpmath.mpf(10) ** -38
        assert abs(mpmath.fsum(rows[2]) - 1) < mpmath.mpf(10) ** -38


def test_float32_agrees_with_float64():
    rho = 0.9
    s = rand_scores(2, 24, 24, seed=8)
    ref = causal_ot_attention(s, rho, method="newton").weights
    for method in METHODS:
        w = causal_ot_attention(s.float(), rho, method=method).weights
        assert w.dtype == torch.float32
        # float32 log-potentials carry about 5e-7 absolute error and the default
        # float32 tol is 1e-5 on increments, i.e. 1e-4 on the fixed-point residual at rho=0.9;
        # weights are <= 1, so an absolute 2e-4 is the justified bound (measured ~1e-6 for newton).
        err = (w.double() - ref).abs().max().item()
        assert err <= 2e-4, (method, err)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32_and_cast_back(dtype):
    s = rand_scores(16, 16, seed=9)
    w = causal_ot_attention(s.to(dtype), 0.5).weights
    assert w.dtype == dtype
    ref = causal_ot_attention(s.to(dtype).float(), 0.5).weights.to(dtype)
    assert torch.equal(w, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_device_result_matches_cpu_float64(device):
    s = rand_scores(2, 20, 20, seed=10)
    ref = causal_ot_attention(s, 0.7, method="newton", tol=1e-13).weights
    for method in METHODS:
        w = causal_ot_attention(s.to(device), 0.7, method=method, tol=1e-12).weights
        assert w.device.type == torch.device(device).type
        # tol 1e-12 on increments at rho = 0.7: 10 tol/(1-rho)^2 ~ 1.1e-10
        assert (w.cpu() - ref).abs().max().item() <= 1.2e-10


# --------------------------------------------------------------------------- masking


def test_masked_keys_behave_like_removed_tokens():
    # Isolate token k: row k sees only itself, and no later row sees key k. Then token k
    # exchanges no mass with the others, so the other rows/columns equal the operator on the
    # sequence with token k deleted (the causal structure is respected), and row k = e_k.
    n, k, rho = 12, 5, 0.8
    s = rand_scores(n, n, seed=11)
    masked = s.clone()
    masked[k, :k] = -math.inf
    masked[k + 1 :, k] = -math.inf
    keep = [i for i in range(n) if i != k]
    short = s[keep][:, keep].contiguous()
    for method in METHODS:
        w = causal_ot_attention(masked, rho, method=method, tol=1e-14).weights
        ref = causal_ot_attention(short, rho, method="newton", tol=1e-14).weights
        assert (w[keep][:, keep] - ref).abs().max().item() <= 1e-12, method
        assert torch.equal(w[k], torch.eye(n, dtype=F64)[k])
        assert torch.count_nonzero(w[k + 1 :, k]) == 0


def test_left_padding_equals_unpadded_sequence():
    # p padding tokens attend only to themselves and are masked for every real query.
    n, p, rho = 10, 3, 0.6
    s = rand_scores(n, n, seed=12)
    big = torch.zeros(n + p, n + p, dtype=F64)
    big[p:, p:] = s
    big[p:, :p] = -math.inf
    for i in range(p):
        big[i, :i] = -math.inf
    w = causal_ot_attention(big, rho, method="newton", tol=1e-14).weights
    ref = causal_ot_attention(s, rho, method="newton", tol=1e-14).weights
    assert (w[p:, p:] - ref).abs().max().item() <= 1e-14  # same arithmetic up to summation


def test_mp_solver_masks_like_the_torch_solver():
    s = rand_scores(6, 6, seed=13)
    s[4, 1] = -math.inf
    s[5, 0] = -math.inf
    ref = mp_reference(s, 0.7)
    w = causal_ot_attention(s, 0.7, method="newton", tol=1e-13).weights
    assert (w - ref).abs().max().item() <= 1e-14 * (1 + 0.7 / 0.3)
    assert w[4, 1] == 0 and w[5, 0] == 0


# --------------------------------------------------------------------------- convergence


def test_plain_sweeps_contract_by_about_rho():
    # docs/theory.md §2 gives 0.1992, 0.4991, 0.8003 at rho = 0.2, 0.5, 0.8 (measured apart).
    # We measure the geometric-mean ratio of successive sup-norm increments over the last 10
    # sweeps whose increment is still above 1e-11 (below that, rounding noise takes over).
    from proofs_check.operators.causal_ot._sinkhorn import sweep

    n = 64
    s = rand_scores(n, n, seed=14)
    live = torch.ones(n, n, dtype=torch.bool).tril()
    s_m = s.masked_fill(~live, -math.inf).unsqueeze(0)
    for rho, theory in [(0.2, 0.1992), (0.5, 0.4991), (0.8, 0.8003)]:
        log_v = torch.zeros_like(s_m)
        incs = []
        for _ in range(80):
            new, _ = sweep(s_m, live, log_v, rho)
            incs.append((new - log_v).abs().max().item())
            log_v = new
        k2 = max(k for k, v in enumerate(incs) if v > 1e-11)
        ratio = (incs[k2] / incs[k2 - 10]) ** (1 / 10)
        # The linearised map is block triangular with spectrum rho(1 - a/C') <= rho clustered
        # at rho; early sweeps contract faster (transient ratios 0.03..0.78 at rho = 0.8), the
        # tail approaches rho. 0.01 admits the slow approach we see; docs/theory.md's own runs sit
        # within 0.0009 of rho, so the two measurements must agree to 0.011.
        assert abs(ratio - rho) <= 0.01, (rho, ratio)
        assert abs(ratio - theory) <= 0.011, (rho, ratio, theory)


def test_newton_needs_few_steps_per_row_at_rho_099():
    # The accelerated route for rho -> 1: the row solver does not sweep at all; its Newton
    # iteration per row is quadratic, so 1e-10 takes a handful of steps (<= 100 required).
    s = rand_scores(128, 128, seed=15)
    res = causal_ot_attention(s, 0.99, method="newton", tol=1e-10)
    assert res.info.converged and res.info.sweeps <= 20, res.info


def test_anderson_beats_plain_sweeps():
    s = rand_scores(32, 32, seed=15)
    plain = causal_ot_attention(s, 0.9, method="sinkhorn", tol=1e-10).info
    acc = causal_ot_attention(s, 0.9, method="anderson", tol=1e-10).info
    # plain needs about log(1e-10)/log(0.9) ~ 220 sweeps; Anderson at least 2x fewer.
    assert plain.converged and acc.converged
    assert acc.sweeps * 2 <= plain.sweeps, (acc.sweeps, plain.sweeps)


@pytest.mark.parametrize("method", METHODS)
def test_non_convergence_warns_and_is_flagged(method):
    s = rand_scores(16, 16, seed=16)
    with pytest.warns(ConvergenceWarning, match="stopped"):
        res = causal_ot_attention(s, 0.95, method=method, tol=1e-15, max_iter=1)
    assert res.info.converged is False and res.info.residual > res.info.tol


# --------------------------------------------------------------------------- autograd


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("rho", [0.4, 0.9])
def test_gradcheck(method, rho):
    s = rand_scores(1, 4, 4, seed=17).requires_grad_(True)

    def f(x):
        return causal_ot_attention(x, rho, method=method, tol=1e-13).weights

    # Central differences (eps 1e-6) against the implicit (adjoint) gradient. The forward is
    # solved to 1e-13, so finite-difference noise is ~ 1e-13/(1-rho)^2 / 1e-6 <= 1e-5 at
    # rho = 0.9: gradcheck's atol 1e-5, rtol 1e-3 are therefore meaningful and not loose.
    # fast_mode checks random projections v^T J u (same test, far fewer backward passes).
    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-5, rtol=1e-3, fast_mode=True)


@pytest.mark.slow
def test_gradcheck_full_jacobian():
    s = rand_scores(2, 5, 5, seed=17).requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda x: causal_ot_attention(x, 0.7, tol=1e-13).weights, (s,), eps=1e-6, atol=1e-5
    )


def test_gradient_with_masked_keys_is_finite_and_zero_there():
    s = rand_scores(6, 6, seed=18)
    s[3, 1] = -math.inf
    s.requires_grad_(True)
    w = causal_ot_attention(s, 0.7).weights
    (w * torch.arange(36, dtype=F64).reshape(6, 6)).sum().backward()
    assert torch.isfinite(s.grad).all() and s.grad[3, 1] == 0


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("scores", "rho", "match"),
    [
        (torch.zeros(3), 0.5, "at least 2 dimensions"),
        (torch.zeros(3, 4), 0.5, "square"),
        (torch.zeros(0, 0), 0.5, "n >= 1"),
        (torch.zeros(3, 3, dtype=torch.int64), 0.5, "scores must have dtype"),
        (torch.zeros(3, 3, dtype=torch.float8_e4m3fn), 0.5, "scores must have dtype"),
        (torch.zeros(3, 3, dtype=torch.float8_e5m2), 0.5, "scores must have dtype"),
        (torch.zeros(3, 3, dtype=torch.complex64), 0.5, "scores must have dtype"),
        (torch.tensor([[0.0, 0.0], [math.nan, 0.0]]), 0.5, "NaN"),
        (torch.tensor([[0.0, 0.0], [math.inf, 0.0]]), 0.5, r"\+inf"),
        (torch.tensor([[0.0, 0.0], [-math.inf, -math.inf]]), 0.5, "every key masked"),
        (torch.zeros(3, 3), 1.0, "rho"),
        (torch.zeros(3, 3), -0.1, "rho"),
        (torch.zeros(3, 3), math.nan, "rho"),
        (torch.zeros(3, 3), math.inf, "rho"),
        (torch.zeros(3, 3), "0.5", "rho"),
        ([[0.0]], 0.5, "torch.Tensor"),
    ],
)
def test_bad_input_raises_value_error(scores, rho, match):
    with pytest.raises(ValueError, match=match):
        causal_ot_attention(scores, rho)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "newtons"}, "method"),
        ({"tol": 0.0}, "tol"),
        ({"tol": math.inf}, "tol"),
        ({"tol": math.nan}, "tol"),
        ({"tol": True}, "tol"),
        ({"tol": "1e-3"}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 2**31}, "max_iter"),
        ({"max_iter": 2**63}, "max_iter"),
        ({"max_iter": 10**400}, "max_iter"),
        ({"max_iter": 5.0}, "max_iter"),
        ({"max_iter": np.float64(5)}, "max_iter"),
    ],
)
def test_bad_options_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        causal_ot_attention(torch.zeros(3, 3), 0.5, **kwargs)


@pytest.mark.parametrize("method", METHODS)
def test_numpy_and_python_integers_give_the_same_max_iter(method):
    # numpy integers are integers (numbers.Integral), as numpy floats are reals for rho; the
    # largest accepted count, 2**31 - 1, is a valid cap (the solvers stop at tol first)
    # (7 sweeps stop sinkhorn and anderson short of tol: their warnings are expected)
    s = rand_scores(8, 8, seed=19)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = causal_ot_attention(s, 0.5, method=method, max_iter=7)
        for max_iter in (np.int64(7), np.int32(7), np.uint8(7)):
            got = causal_ot_attention(s, np.float64(0.5), method=method, max_iter=max_iter)
            assert torch.equal(got.weights, ref.weights) and got.info == ref.info
    assert ref.info.sweeps <= 7
    top = causal_ot_attention(s, 0.5, method=method, max_iter=2**31 - 1)
    assert top.info.converged


def test_mp_solver_bad_input():
    with pytest.raises(ValueError, match="rho"):
        causal_ot_exact_mp([[0.0]], 1.0)
    with pytest.raises(ValueError, match="square"):
        causal_ot_exact_mp([[0.0, 1.0]], 0.5)
    with pytest.raises(ValueError, match="masked"):
        causal_ot_exact_mp([[-math.inf]], 0.5)
    with pytest.raises(ValueError, match="dps"):
        causal_ot_exact_mp([[0.0]], 0.5, dps=0)
    for flag in (False, True):  # a bool is no rho, as for causal_ot_attention
        with pytest.raises(ValueError, match="rho"):
            causal_ot_exact_mp([[0.0]], flag)
        with pytest.raises(ValueError, match="rho"):
            causal_ot_attention(torch.zeros(1, 1, dtype=F64), flag)


@pytest.mark.parametrize(("scores", "match"), [
    (torch.full((2, 2), 1 + 5j, dtype=torch.complex128), "complex128"),  # was: real part
    (torch.ones(2, 2, dtype=torch.bool), "bool"),  # was: True read as the score 1
    (np.full((2, 2), 1 + 0j), r"scores\[0\]\[0\]"),
    (torch.zeros(2, 2, 2, dtype=F64), r"scores\[0\]\[0\]"),  # (n, n, n): no batch
    ([[None, 0.0], [0.0, 0.0]], r"scores\[0\]\[0\]"),
    ([[0.0, 0.0], [True, 0.0]], r"scores\[1\]\[0\]"),
    ([[0.0, 0.0], ["x", 0.0]], r"scores\[1\]\[0\]"),
])
def test_mp_solver_refuses_scores_that_are_not_real(scores, match):
    """The ground truth takes real scores only: complex or boolean tensors, entries that
    are no real number (complex, None, a bool, a string mpmath cannot read) and a batch
    it does not take raise ValueError naming them, never a TypeError or an answer for other
    scores (the dense operator refuses these dtypes too)."""
    with pytest.raises(ValueError, match=match):
        causal_ot_exact_mp(scores, 0.5)


def test_mp_solver_takes_numpy_scalars_as_the_numbers_they_are():
    """numpy integers and floats in a nested list are the real numbers they hold (float32
    and float64 convert to a float exactly): the same mpf rows as for Python numbers."""
    plain = [[1, 0.0], [0.5, 2]]
    numpy_scalars = [[np.int64(1), np.float64(0.0)], [np.float32(0.5), np.int32(2)]]
    assert causal_ot_exact_mp(numpy_scalars, 0.5) == causal_ot_exact_mp(plain, 0.5)


@pytest.mark.parametrize("method", ["sinkhorn", "anderson"])
@pytest.mark.parametrize("max_iter", [1, 3, 10])
def test_sweeps_stopped_early_return_weights_and_potentials_that_belong_together(
        method, max_iter):
    """Stopped at ``max_iter`` (unconverged, with a warning), the sweeps still return the
    log-potentials of their weights: every row is ``softmax(s + logV)`` over its live keys
    (``CausalOTResult.log_potentials``), and ``info.residual`` is the plain-sweep increment
    at that ``logV``, ``(1 - rho) max |logV + kappa log C'|`` (Lemma 2.2), recomputed here
    from the returned weights. Tolerances: a softmax of 6 terms, a few ulp (1e-14); the
    increment, the same logs summed in another order (1e-12)."""
    n, rho = 6, 0.9
    kappa = rho / (1 - rho)
    s = torch.randn(n, n, dtype=F64, generator=torch.Generator().manual_seed(0))
    s[4, 1] = -math.inf
    live = torch.isfinite(s) & torch.ones(n, n, dtype=torch.bool).tril()
    with pytest.warns(ConvergenceWarning):
        res = causal_ot_attention(s, rho, method=method, max_iter=max_iter, tol=1e-12)
    log_v = res.log_potentials
    neg = torch.tensor(-math.inf, dtype=F64)
    assert (torch.softmax(torch.where(live, s + log_v, neg), -1) - res.weights).abs().max() <= 1e-14
    cp = torch.cumsum(res.weights, dim=-2)
    increment = ((1 - rho) * (log_v + kappa * torch.log(cp)))[live].abs().max().item()
    assert increment == pytest.approx(res.info.residual, rel=1e-12, abs=1e-14)


def test_rho_that_requires_grad_is_refused():
    """No gradient w.r.t. ``rho`` is provided: a ``rho`` tensor that requires grad is a
    ValueError naming ``rho`` (as in ``batch_unbalanced_sinkhorn``), not a silent
    ``rho.grad is None`` after backward; the same value without grad gives the float's
    weights bit for bit."""
    s = torch.randn(4, 4, dtype=F64, generator=torch.Generator().manual_seed(1))
    rho = torch.tensor(0.5, dtype=F64, requires_grad=True)
    with pytest.raises(ValueError, match="rho: gradients"):
        causal_ot_attention(s.requires_grad_(), rho)
    same = causal_ot_attention(s.detach(), rho.detach()).weights
    assert torch.equal(same, causal_ot_attention(s.detach(), 0.5).weights)

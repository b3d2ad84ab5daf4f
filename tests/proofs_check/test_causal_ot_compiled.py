"""The compiled CPU kernel of the causal OT operator against independent references.

References: mpmath (Lemma 2.1 at 30 digits), the pure-torch row solver (same equations, other
code and arithmetic), plain Lemma 2.2 sweeps (another algorithm), central finite differences
(gradcheck) for the exact backward. Also the hostile inputs (overflowing score
differences, huge shifts, unreachable tolerances, meta tensors) and the no-compiler fallback.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import replace

import pytest
import torch

from proofs_check.operators import (
    ConvergenceWarning,
    causal_ot_attention,
    causal_ot_exact_mp,
    stream_causal_ot,
)
from proofs_check.operators.causal_ot import CompiledFallbackWarning
from proofs_check.operators.causal_ot import _compiled as compiled
from proofs_check.operators.causal_ot._common import live_mask, shift_rows
from proofs_check.operators.causal_ot._compiled import KernelOptions
from proofs_check.operators.causal_ot._newton import reverse_sweep_backward, solve_dense

F64 = torch.float64

pytestmark = pytest.mark.skipif(
    compiled.load_extension() is None, reason="compiled kernel unavailable (fallback tested)"
)


def rand_scores(*shape: int, seed: int = 0, dtype=F64, scale=1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g, dtype=F64)).to(dtype)


def mp_weights(s: torch.Tensor, rho: float) -> torch.Tensor:
    rows = causal_ot_exact_mp(s, rho, dps=30)
    n = s.shape[-1]
    out = torch.zeros(n, n, dtype=F64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor([float(v) for v in row], dtype=F64)
    return out


def _no_compiler(cpp_extension):
    raise RuntimeError("error: command 'c++' failed: No such file or directory")


@pytest.fixture
def pure_path(monkeypatch):
    """Run the operator as on a machine without a compiler (the warning is expected once)."""
    monkeypatch.setattr(compiled, "_build", _no_compiler)
    monkeypatch.delitem(compiled._state, "module", raising=False)
    with pytest.warns(CompiledFallbackWarning, match="pure-torch"):
        assert compiled.load_extension() is None
    yield
    # monkeypatch restores _build and the compiled module in _state afterwards


MP64 = [
    pytest.param(std, rho, marks=[] if (std, rho) in {(1, 0.99), (3, 0.9), (6, 0.3)}
                 else [pytest.mark.slow])
    for std in (1, 3, 6)
    for rho in (0.3, 0.9, 0.99)
]  # each mpmath solve at n = 64 takes ~4 s: three cases by default, the grid with -m slow


@pytest.mark.parametrize(("std", "rho"), MP64)
def test_compiled_float64_within_1e_10_of_mpmath_at_n_64(std, rho):
    s = rand_scores(64, 64, seed=31 + std, scale=float(std))
    w = causal_ot_attention(s, rho, tol=1e-10).weights
    err = (w - mp_weights(s, rho)).abs().max().item()
    # 1e-10 at the default tolerance (Newton's error estimate <= 1e-10 on
    # log-weights, and weights <= 1, so the absolute weight error is at most that, plus
    # rounding of O(kappa log n) terms ~ 1e-13).
    assert err <= 1e-10, err


def test_compiled_matches_pure_torch_solver_with_masks_and_batch():
    s = rand_scores(2, 3, 48, 48, seed=32, scale=2.0)
    s[0, 1, 20:, 7] = -math.inf  # a column masked for all later queries
    s[1, 2, 30, :25] = -math.inf  # a row seeing only recent keys
    sb = s.reshape(-1, 48, 48)
    sh, live = shift_rows(sb, live_mask(sb))
    for rho in (0.3, 0.9, 0.99):
        fast = causal_ot_attention(s, rho, tol=1e-13).weights
        ref, _, _ = solve_dense(sh, live, rho, 1e-13, 100)  # the pure-torch row solver
        # both Newton solvers stop at 1e-13 in the log-weights: 1e-12 covers both plus rounding
        assert (fast - ref.reshape(fast.shape)).abs().max().item() <= 1e-12, rho
        assert torch.count_nonzero(fast[0, 1, 20:, 7]) == 0


def test_upper_triangle_is_written_zero_on_reused_dirty_memory():
    # The kernel's output buffer is uninitialised (torch.empty_like): it must write the zeros
    # above the diagonal itself. A freed NaN-filled block of the same size is what the
    # allocator most likely hands back next (small blocks come from the heap), so without
    # those writes NaN would show through.
    s = rand_scores(3, 40, 40, seed=5)
    for rho in (0.3, 0.99):
        for dtype, tol in ((F64, 1e-10), (torch.float32, 1e-5)):
            junk = torch.full((3, 40, 40), math.nan, dtype=dtype)
            del junk
            w, _ = compiled.forward(s.to(dtype), rho, tol, 100)
            assert torch.count_nonzero(torch.triu(w, 1)) == 0
            assert bool(torch.isfinite(w).all())
            assert (w.sum(-1) - 1).abs().max().item() <= 10 * tol


def test_backward_upper_triangle_is_written_zero_on_reused_dirty_memory():
    # the backward's output is uninitialised too (torch.empty_like), as in the forward test
    s = rand_scores(3, 40, 40, seed=67)
    w = causal_ot_attention(s, 0.9).weights
    g = rand_scores(3, 40, 40, seed=68)
    for _ in range(3):
        junk = torch.full((3, 40, 40), math.nan, dtype=F64)
        del junk
        gs = compiled.backward(w, g, 0.9)
        assert torch.count_nonzero(torch.triu(gs, 1)) == 0
        assert bool(torch.isfinite(gs).all())


@pytest.mark.parametrize("rho", [0.3, 0.9])
def test_compiled_matches_plain_sweeps_at_n_64(rho):
    s = rand_scores(64, 64, seed=33)
    fast = causal_ot_attention(s, rho).weights
    res = causal_ot_attention(s, rho, method="sinkhorn", tol=1e-12)
    # sweeps contract by ~rho: after k sweeps the increment is d_k and the distance to the
    # fixed point in logV is about d_k/(1-rho); weights move by at most twice that (softmax is
    # 1-Lipschitz in sup-norm per row, and C' enters through logV). The kernel adds 1e-10.
    bound = 2 * res.info.residual / (1 - rho) + 1e-10
    assert (fast - res.weights).abs().max().item() <= bound


def test_float32_never_nan_or_inf_for_scores_up_to_1e4():
    for scale, rho in [(6.0, 0.3), (1e2, 0.9), (1e4, 0.3), (1e4, 0.99)]:
        s = rand_scores(3, 96, 96, seed=34, scale=scale, dtype=torch.float32).clamp(-1e4, 1e4)
        with warnings.catch_warnings():
            # at |s| ~ 1e4 float32 resolves log-weights only to ~eps |s| = 1e-3 > tol: the
            # solver says so (ConvergenceWarning) instead of iterating on rounding noise
            warnings.simplefilter("ignore", ConvergenceWarning)
            w = causal_ot_attention(s, rho).weights
        assert torch.isfinite(w).all() and (w >= 0).all(), (scale, rho)
        # rows sum to 1 up to float32 rounding of a length-96 sum
        assert (w.sum(-1) - 1).abs().max().item() <= 96 * 1.2e-7, (scale, rho)
        ref = causal_ot_attention(s.double(), rho).weights
        # float32 log-weights carry ~1e-5 (tol) plus the rounding of the scores, |s| * 6e-8
        # (6e-4 at 1e4): weights move by at most their log-error times the weight, i.e. <= 2e-3.
        assert (w.double() - ref).abs().max().item() <= 2e-3, (scale, rho)


def test_float32_agrees_with_float64_to_float32_accuracy_at_score_std_6():
    s = rand_scores(64, 64, seed=35, scale=6.0)
    for rho in (0.3, 0.9, 0.99):
        w32 = causal_ot_attention(s.float(), rho).weights.double()
        w64 = causal_ot_attention(s, rho).weights
        # tol 1e-5 on float32 log-weights plus rounding of scores ~|s| 6e-8: 2e-5 absolute
        assert (w32 - w64).abs().max().item() <= 2e-5, rho


@pytest.mark.parametrize("method", ["newton", "sinkhorn", "anderson"])
def test_overflowing_score_difference_gives_the_limit_not_nan(method):
    # +9e307 and -9e307 in one row. Their difference overflows; the key at
    # -9e307 has weight below any float (exp(-1.8e308)), so the row equals the row with that
    # key masked, and a constant shift of every row changes nothing (Proposition 2.4).
    s = rand_scores(6, 6, seed=36)
    s[3, 0] = 9e307
    s[3, 2] = -9e307
    res = causal_ot_attention(s, 0.5, method=method, tol=1e-12)
    masked = s.clone()
    masked[3, 2] = -math.inf
    masked[3, 0] = 0.0
    masked[3, 1] = -math.inf
    masked[3, 3] = -math.inf  # row 4 then puts all its mass on key 1
    ref = causal_ot_attention(masked, 0.5, method="newton", tol=1e-12).weights
    assert res.info.converged and torch.isfinite(res.weights).all()
    assert (res.weights - ref).abs().max().item() <= 1e-10


@pytest.mark.parametrize("method", ["newton", "sinkhorn", "anderson"])
def test_huge_constant_shift_in_float32_changes_nothing(method):
    # float32 randn + 1e7: unshifted, the sweeps never meet tol. Shifted by the row max first, the
    # solve sees the same numbers up to the rounding of randn + 1e7 (ulp 1 at 1e7).
    s = rand_scores(24, 24, seed=37, dtype=torch.float32)
    base = causal_ot_attention(s, 0.8, method=method)
    big = causal_ot_attention(s + 1e7, 0.8, method=method)
    assert big.info.converged and big.info.sweeps <= 2 * base.info.sweeps + 5
    ref = causal_ot_attention(torch.round(s + 1e7) - 1e7, 0.8, method=method).weights
    assert (big.weights - ref).abs().max().item() <= 1e-4


@pytest.mark.parametrize(
    ("method", "compiled_path"),
    [("newton", True), ("newton", False), ("sinkhorn", False), ("anderson", False)],
)
def test_unreachable_tol_stops_unconverged_instead_of_hanging(method, compiled_path,
                                                              monkeypatch):
    if not compiled_path:  # the pure-torch solvers (sweeps never use the kernel)
        monkeypatch.setitem(compiled._state, "module", None)
    s = rand_scores(12, 12, seed=38)
    with pytest.warns(ConvergenceWarning, match="stopped"):
        res = causal_ot_attention(s, 0.9, method=method, tol=1e-300, max_iter=2**31 - 1)
    assert not res.info.converged and res.info.sweeps < 10**6
    ref = causal_ot_attention(s, 0.9, tol=1e-13).weights
    # stalled at rounding level: the weights are as good as float64 allows
    assert (res.weights - ref).abs().max().item() <= 1e-11


def test_meta_tensor_is_refused():
    with pytest.raises(ValueError, match="meta"):
        causal_ot_attention(torch.zeros(4, 4, device="meta"), 0.5)


def test_invalid_values_are_refused_by_the_compiled_path():
    for bad, match in [(math.nan, "NaN"), (math.inf, r"\+inf")]:
        s = torch.zeros(2, 5, 5, dtype=F64)
        s[1, 3, 1] = bad
        with pytest.raises(ValueError, match=match):
            causal_ot_attention(s, 0.5)
    s = torch.zeros(5, 5, dtype=F64)
    s[2, :3] = -math.inf
    with pytest.raises(ValueError, match="every key masked"):
        causal_ot_attention(s, 0.5)


def test_fallback_without_compiler_warns_once_and_matches(pure_path, monkeypatch):
    s = rand_scores(2, 20, 20, seed=39)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would fail here
        w = causal_ot_attention(s, 0.7, tol=1e-13).weights
        rows = dict(stream_causal_ot(10, 0.7, tol=1e-13))
    # pure torch vs the kernel compiled in the same session (_state restored after the test)
    assert compiled._state.get("module") is None
    monkeypatch.undo()  # the compiler back, and the compiled module
    assert compiled.load_extension() is not None
    fast = causal_ot_attention(s, 0.7, tol=1e-13).weights
    assert (w - fast).abs().max().item() <= 1e-12
    fast_rows = dict(stream_causal_ot(10, 0.7, tol=1e-13))
    for l_row in rows:
        assert (rows[l_row] - fast_rows[l_row]).abs().max().item() <= 1e-12


@pytest.mark.parametrize("rho", [0.3, 0.9, 0.99])
def test_exact_backward_passes_gradcheck(rho):
    s = rand_scores(2, 6, 6, seed=40, scale=1.5)
    s[1, 4, 2] = -math.inf
    s.requires_grad_(True)

    def f(x):
        return causal_ot_attention(x, rho, tol=1e-13).weights

    # Finite differences of a forward solved to 1e-13 (log-weights): noise ~ 1e-13/1e-6 = 1e-7
    # per entry, so atol 1e-5 / rtol 1e-4 are meaningful. Full Jacobian (72 x 72), not fast mode.
    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_compiled_backward_equals_pure_reverse_sweep():
    s = rand_scores(3, 40, 40, seed=41, scale=2.0)
    s[0, 30, 3] = -math.inf
    for rho in (0.3, 0.95):
        w = causal_ot_attention(s, rho).weights
        g = rand_scores(3, 40, 40, seed=42)
        fast = compiled.backward(w, g, rho)
        pure = reverse_sweep_backward(w, g, rho)
        # same formula, different summation order: rounding ~ n eps kappa
        assert (fast - pure).abs().max().item() <= 1e-12 * (1 + rho / (1 - rho))
        assert torch.count_nonzero(torch.triu(fast, 1)) == 0 and fast[0, 30, 3] == 0


def test_gradient_rows_sum_to_zero():
    # A constant added to a row changes nothing (Proposition 2.4), so every row of dL/ds sums
    # to zero for any upstream gradient: an identity the backward formula must respect.
    s = rand_scores(50, 50, seed=43).requires_grad_(True)
    w = causal_ot_attention(s, 0.9).weights
    (w * rand_scores(50, 50, seed=44)).sum().backward()
    assert s.grad.sum(-1).abs().max().item() <= 1e-12


def test_stream_progress_callback_and_stderr(capsys):
    seen = []
    rows = list(stream_causal_ot(5, 0.5, progress=lambda l_row, n: seen.append((l_row, n))))
    assert seen == [(i, 5) for i in range(1, 6)] and len(rows) == 5
    list(stream_causal_ot(3, 0.5, progress=True))
    assert "row 3/3" in capsys.readouterr().err
    with pytest.raises(ValueError, match="progress"):
        stream_causal_ot(3, 0.5, progress="yes")
    for silent in (False, None):  # the default: silent, whatever the environment
        list(stream_causal_ot(4, 0.5, progress=silent))
        assert capsys.readouterr().err == ""


def test_log_potentials_agree_between_methods_and_vanish_at_rho_zero():
    s = rand_scores(2, 24, 24, seed=45)
    s[1, 10, 3] = -math.inf
    newton = causal_ot_attention(s, 0.5, tol=1e-13).log_potentials  # from the weights
    sweeps = causal_ot_attention(s, 0.5, method="sinkhorn", tol=1e-13).log_potentials
    # sweeps' own logV, stopped at increment 1e-13: within 10 tol/(1-rho)^2 of the fixed point
    # (see test_causal_ot), times kappa log-scale ~ 1: 1e-11 is ample
    assert (newton - sweeps).abs().max().item() <= 1e-11
    assert newton[1, 10, 3] == 0 and torch.count_nonzero(torch.triu(newton, 1)) == 0
    zero = causal_ot_attention(s, 0.0).log_potentials
    assert zero.shape == s.shape and torch.count_nonzero(zero) == 0


# --- one head on two threads: the kernel splits each row of length >= 256 between two workers
# that exchange the row-level sums (a different summation order from the one-thread solve, and
# a different code path through every exchange). These run on two torch threads; the pure-torch
# row solver is the reference.


# the serial build (a compiler without OpenMP) runs both workers' halves on one thread: no team
needs_openmp_build = pytest.mark.skipif(
    (compiled.load_extension() is None
     or compiled.load_extension().__name__.endswith("_serial")),
    reason="serial build of the kernel (no OpenMP): no team of two",
)


# The team's first shared row follows the measured cost of an exchange (256 where it is cheap,
# later where it is not; test_team_start_row_follows_the_exchange_cost): fixed at 256 here, so
# that the team tests exercise it on every machine. STAYS: the team's waiting check off too (a
# shared machine may really make a team dissolve; these tests pin what a formed team does).
TEAM = KernelOptions(team_from=256)
STAYS = KernelOptions(team_from=256, team_give_up=1e9)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("rho", [0.3, 0.9, 0.99])
def test_one_head_on_two_threads_matches_pure_torch_solver(two_threads, rho):
    s = rand_scores(1, 300, 300, seed=61, scale=2.0)
    s[0, 280:, 17] = -math.inf  # masked keys in split rows: those rows are solved alone
    s[0, 290, :40] = -math.inf
    sh, live = shift_rows(s, live_mask(s))
    fast, _ = compiled.forward(s, rho, 1e-13, 100, TEAM)
    ref, _, _ = solve_dense(sh, live, rho, 1e-13, 100)
    # both Newton solvers stop at 1e-13 in the log-weights: 1e-12 covers both plus rounding
    assert (fast - ref).abs().max().item() <= 1e-12
    assert torch.count_nonzero(torch.triu(fast[0], 1)) == 0


def test_one_head_team_alternating_masked_and_split_rows_matches_pure_torch_solver(two_threads):
    # Each worker of the team keeps its own copy of the column masses and takes from the
    # other's what changed hands: a masked row (solved by worker 0 alone, which first needs
    # worker 1's keys) followed by split rows (worker 1 then needs its keys back), and h moving
    # up (every 64 rows) in between. Rows 300, 301, 365, 430 masked, the rest split. A row's
    # range and NaN check come from the previous row's first pass, and the takes follow an
    # exchange of their own where any are due; after a masked row (solved alone, no first
    # pass), from the row's own scan and its exchange
    s = rand_scores(1, 460, 460, seed=64, scale=2.0)
    for row in (300, 301, 365, 430):
        s[0, row, 5] = -math.inf
    sh, live = shift_rows(s, live_mask(s))
    fast, _ = compiled.forward(s, 0.9, 1e-13, 100, TEAM)
    ref, _, _ = solve_dense(sh, live, 0.9, 1e-13, 100)
    # both Newton solvers stop at 1e-13 in the log-weights: 1e-12 covers both plus rounding
    assert (fast - ref).abs().max().item() <= 1e-12


def test_one_head_float32_on_two_threads_and_on_one_matches_float64(two_threads):
    s = rand_scores(1, 400, 400, seed=62, dtype=torch.float32, scale=3.0)
    team, _ = compiled.forward(s, 0.9, 1e-5, 100, TEAM)
    torch.set_num_threads(1)
    alone, _ = compiled.forward(s, 0.9, 1e-5, 100, TEAM)
    ref = causal_ot_attention(s.double(), 0.9, tol=1e-12).weights
    # each path to float32 accuracy of the float64 solve (tol 1e-5 in the log-weights)
    for w in (team, alone):
        assert (w.double() - ref).abs().max().item() <= 2e-5
        assert bool(torch.isfinite(w).all())


def test_one_head_two_threads_unconverged_rows_are_finished_by_one_worker(two_threads):
    # max_iter = 2 stops every row's joint Newton early: the unconverged branch hands the row
    # to worker 0, which normalises all of it. Same decisions as one thread, so the same
    # iterates up to rounding.
    s = rand_scores(1, 320, 320, seed=63)
    team, st_team = compiled.forward(s, 0.99, 1e-13, 2, TEAM)
    torch.set_num_threads(1)
    alone, st_alone = compiled.forward(s, 0.99, 1e-13, 2, TEAM)
    assert not st_team.converged[0]
    assert st_team.fallback_rows[0] == st_alone.fallback_rows[0] > 0  # fallbacks, counted
    assert (team - alone).abs().max().item() <= 1e-10
    assert (team.sum(-1) - 1).abs().max().item() <= 1e-12


@needs_openmp_build
def test_one_head_team_shares_every_row_from_256_on(two_threads):
    # team_rows counts the rows the two workers solved together: rows 256..n-1 unless the
    # team dissolves (its waiting check off: STAYS); a formed team shares every long row.
    s = rand_scores(1, 600, 600, seed=65)
    _, st = compiled.forward(s, 0.9, 1e-10, 100, STAYS)
    assert st.team_rows[0] == 600 - 255
    torch.set_num_threads(1)
    _, st_alone = compiled.forward(s, 0.9, 1e-10, 100, STAYS)
    assert st_alone.team_rows[0] == 0


@needs_openmp_build
def test_one_head_team_forced_to_dissolve_finishes_alone_and_agrees(two_threads):
    # a negative give-up threshold dissolves the team at its first check (row 320, after the
    # 64 shared rows 256..319); worker 0 then solves the rest alone, from the same column
    # masses: the weights agree with one thread's to rounding (different summation orders
    # in the 64 shared rows, ~1e-16 each, carried through later rows' column masses)
    s = rand_scores(1, 500, 500, seed=66, scale=2.0)
    torch.set_num_threads(1)
    alone, _ = compiled.forward(s, 0.99, 1e-12, 100)
    torch.set_num_threads(2)
    dissolved, st = compiled.forward(s, 0.99, 1e-12, 100,
                                     KernelOptions(team_from=256, team_give_up=-1.0))
    assert st.team_rows[0] == 64 and st.converged[0]
    assert (dissolved - alone).abs().max().item() <= 1e-11


@needs_openmp_build
def test_one_head_team_outlasts_one_slow_window(two_threads):
    # a give-up threshold of 0 makes every window with any waiting "slow"; it takes two slow
    # windows in a row to dissolve the team (one window can hold a pause of one worker on
    # time-shared cores), so at least 128 shared rows, not 64
    s = rand_scores(1, 700, 700, seed=69)
    torch.set_num_threads(1)
    alone, _ = compiled.forward(s, 0.9, 1e-12, 100)
    torch.set_num_threads(2)
    team, st = compiled.forward(s, 0.9, 1e-12, 100, KernelOptions(team_from=256, team_give_up=0.0))
    assert st.team_rows[0] >= 128 and st.converged[0]
    assert (team - alone).abs().max().item() <= 1e-11


@needs_openmp_build
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_one_head_on_one_cpu_forms_no_team_and_matches_one_thread(two_threads):
    # two torch threads but one CPU (a process confined to one core): a team there only takes
    # turns at every exchange; it must solve alone, by the one-thread path (STAYS: a formed
    # team would stay formed)
    s = rand_scores(1, 300, 300, seed=70)
    cpus = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(cpus)})
        confined, st = compiled.forward(s, 0.9, 1e-10, 100, STAYS)
    finally:
        os.sched_setaffinity(0, cpus)
    assert st.team_rows[0] == 0
    torch.set_num_threads(1)
    alone, _ = compiled.forward(s, 0.9, 1e-10, 100, STAYS)
    assert torch.equal(confined, alone)  # the same serial code on the same data: bit for bit
    if len(cpus) >= 2:  # the control: the same call on two CPUs does form the team
        torch.set_num_threads(2)
        _, st_free = compiled.forward(s, 0.9, 1e-10, 100, STAYS)
        assert st_free.team_rows[0] == 300 - 255


def _team_row_for_cost(ns: float) -> int:
    # the rule of team_start_row (csrc/team.h), restated: 6 rows per ns of an exchange,
    # the nearest rung in log scale of 256, 384, 512, 768, 1024, 1536, 2048
    want = 6.0 * ns
    if not want > 256:
        return 256
    return min((256, 384, 512, 768, 1024, 1536, 2048), key=lambda r: abs(math.log(want / r)))


@needs_openmp_build
@pytest.mark.parametrize(
    "ns, n, first",
    [("20", 600, 256), ("100", 600, 512), ("170", 1100, 1024), ("1000", 1100, 1100),
     ("nan", 600, 256)],
)
def test_team_start_row_follows_the_exchange_cost(two_threads, ns, n, first):
    # team_from: the team's first shared row, exchange_ns: the exchange's cost it came from; a
    # cost substituted for the measurement (KernelOptions.exchange_ns) sets the row by the
    # rule, at most n (2048 at n = 1100: only the last row shared), and the team shares every
    # row from there (its waiting check off)
    opt = KernelOptions(team_give_up=1e9, exchange_ns=float(ns), poison_output=True)
    s = rand_scores(1, n, n, seed=71)
    w, st = compiled.forward(s, 0.9, 1e-10, 100, opt)
    assert first == min(_team_row_for_cost(float(ns)), n)
    assert st.team_from[0] == first and st.team_rows[0] == n - first + 1
    assert bool(torch.isfinite(w).all()) and torch.count_nonzero(torch.triu(w[0], 1)) == 0
    torch.set_num_threads(1)
    alone, st1 = compiled.forward(s, 0.9, 1e-10, 100, opt)
    assert st1.team_from[0] == 0 and st1.team_rows[0] == 0  # no team, no row chosen
    # the shared rows sum in another order: rounding, carried through later rows
    assert (w - alone).abs().max().item() <= 1e-12


@needs_openmp_build
def test_team_start_row_comes_from_the_measured_exchange(two_threads):
    # without a substitute, the row is the rule's for the cost worker 0 measured (exchange_ns:
    # a positive time, tens to hundreds of ns)
    s = rand_scores(1, 2100, 2100, seed=72)
    _, st = compiled.forward(s, 0.3, 1e-8, 100, KernelOptions(team_give_up=1e9))
    ns = st.exchange_ns[0]
    assert ns > 0 and st.team_from[0] == _team_row_for_cost(ns)
    assert st.team_rows[0] == 2100 - st.team_from[0] + 1


def test_one_head_two_threads_refuses_an_invalid_split_row(two_threads):
    s = rand_scores(1, 300, 300, seed=64)
    s[0, 299, 150] = math.nan  # in worker 1's half of a split row
    with pytest.raises(ValueError, match="NaN"):
        causal_ot_attention(s, 0.5)


@pytest.mark.parametrize("row", [10, 254])
def test_one_head_two_threads_refuses_an_invalid_short_row(two_threads, row):
    # rows shorter than 256 are worker 0's alone while worker 1 zeroes the upper triangle; an
    # invalid one there must stop worker 1 too (the hand-over exchange carries the stop; else
    # worker 1 would wait at its first shared row for the lost-step error, a RuntimeError)
    s = rand_scores(1, 600, 600, seed=67)
    s[0, row, 3] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        causal_ot_attention(s, 0.5)
    s = rand_scores(1, 600, 600, seed=67)
    s[0, row, : row + 1] = -math.inf
    with pytest.raises(ValueError, match="every key masked"):
        causal_ot_attention(s, 0.5)


@needs_openmp_build
def test_one_head_team_zeroes_the_upper_triangle_and_stops_cleanly(two_threads):
    # the team's zeros come from three places (worker 1 ahead of worker 0, the short rows left
    # at the hand-over, the shared rows' halves): out is torch.empty, which the kernel fills
    # with NaN first (poison_output), so an entry missed shows. Worker 1 usually zeroes every
    # row before worker 0 reaches row 256; capped at 40 rows ahead (a slow worker 1), rows
    # 40..254 are left over.
    for n, ahead in [(256, None), (257, None), (700, None), (700, 40), (600, 0)]:
        opt = KernelOptions(team_from=256, poison_output=True, zero_ahead=ahead)
        s = rand_scores(1, n, n, seed=68)
        for _ in range(3):
            w, st = compiled.forward(s, 0.9, 1e-10, 100, opt)
            assert bool(torch.isfinite(w).all())
            assert torch.count_nonzero(torch.triu(w[0], 1)) == 0
            assert (w[0].sum(-1) - 1).abs().max().item() <= 1e-12
        # an invalid short row: the kernel returns (no lost-step error), code 1, zeros after it
        s[0, 100, 7] = math.nan
        w, st = compiled.forward(s, 0.9, 1e-10, 100, opt)
        assert st.invalid_row[0] == 1 and bool(torch.isfinite(w).all())
        assert torch.count_nonzero(w[0, 101:]) == 0
        assert torch.count_nonzero(torch.triu(w[0], 1)) == 0


@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_streamed_output_equals_plain_stores_bit_for_bit(two_threads, dtype):
    # Outputs of 16 MiB and more are written by streaming stores (stream_stores="always"
    # forces them, "never" forbids them): the same values must land in every entry, the weights
    # of converged rows and the zeros above the diagonal alike, with rows of every length
    # mod 16 (unaligned starts and tails), alone (3 heads), in a team (one head, split rows
    # and worker 1's zeros ahead), and with masked and unconverged rows (plain stores there).
    # Poisoned output: an entry neither path writes shows as NaN.
    tol = 1e-10 if dtype == F64 else 1e-5
    cases = [rand_scores(3, 77, 77, seed=81, dtype=dtype),
             rand_scores(1, 333, 333, seed=82, dtype=dtype, scale=2.0)]
    masked = rand_scores(1, 300, 300, seed=83, dtype=dtype)
    masked[0, 280:, 17] = -math.inf
    cases.append(masked)
    for s in cases:
        for rho in (0.3, 0.99):
            got = {}
            for stores in ("never", "always"):
                opt = KernelOptions(team_from=256, poison_output=True, stream_stores=stores)
                got[stores] = [compiled.forward(s, rho, tol, 100, opt),
                               compiled.forward(s, rho, 0.0, 3, opt)]
            for (w0, st0), (w1, st1) in zip(got["never"], got["always"], strict=True):
                assert bool(torch.isfinite(w1).all())
                assert torch.count_nonzero(torch.triu(w1, 1)) == 0
                if st0.team_rows == st1.team_rows:  # the same rows shared by a team
                    # (all statistics but the exchange's measured cost)
                    assert torch.equal(w0, w1)
                    assert replace(st0, exchange_ns=()) == replace(st1, exchange_ns=())
                else:  # a busy machine: worker 1 came late once (alone: other rounding)
                    assert (w0 - w1).abs().max().item() <= 10 * max(tol, 1e-6)


def test_build_falls_back_to_the_serial_kernel_without_openmp():
    # a compiler without OpenMP (Apple clang): the first build fails, the second (no
    # -fopenmp, at::parallel_for serial) is used; both under distinct cache names
    calls = []

    class FakeExtension:
        @staticmethod
        def load(name, sources, extra_cflags, extra_ldflags, verbose):
            calls.append((name, "-fopenmp" in extra_cflags, "-fopenmp" in extra_ldflags))
            if "-fopenmp" in extra_cflags:
                raise RuntimeError("clang: error: unsupported option '-fopenmp'")
            return "serial module"

    assert compiled._build(FakeExtension) == "serial module"
    assert calls[0][1:] == (True, True) and calls[1][1:] == (False, False)
    assert calls[0][0] != calls[1][0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_kernel_shares_torchs_openmp_runtime():
    # two OpenMP runtimes would each keep a spinning thread pool on the same cores: the
    # extension must resolve libgomp to the copy torch already loaded. In a fresh process (this
    # one has other libraries' runtimes, e.g. POT's own libgomp, loaded by other tests).
    import json
    import subprocess

    compiled.load_extension()  # built (and cached) before the child loads it
    code = (
        "import json, torch\n"
        "from proofs_check.operators.causal_ot import _compiled as c\n"
        "torch.set_num_threads(2)\n"
        "s = torch.randn(2, 300, 300, dtype=torch.float64)\n"
        "c.forward(s, 0.5, 1e-10, 100)\n"
        "maps = open('/proc/self/maps').read().splitlines()\n"
        "print(json.dumps(sorted({l.split()[-1] for l in maps if 'gomp' in l or 'iomp' in l})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    runtimes = json.loads(out.strip().splitlines()[-1])
    assert len(runtimes) == 1, runtimes


# --- The series solve (csrc/series.h): on rows of 256 keys and more (640 in a team of two),
# zeta and the keys near their column mass are solved first, with the far keys' mass from a
# power series, and every far key's weight is then written from the series in one pass, with
# no joint Newton loop. KernelOptions(series=False) leaves every row to the joint loop (the
# other live algorithm, which short rows always take); series_rows counts the rows it solved.

NO_SERIES = KernelOptions(series=False)


def _forward(s, rho, tol=1e-10, options=compiled.DEFAULT_OPTIONS):
    return compiled.forward(s, rho, tol, 100, options)


@pytest.mark.parametrize("rho", [0.3, 0.9, 0.99])
def test_series_solve_matches_pure_torch_solver_on_long_rows(rho):
    s = rand_scores(2, 420, 420, seed=71, scale=2.0)
    s[1, 400:, 33] = -math.inf  # masked keys: compacted rows take the series solve too
    sh, live = shift_rows(s, live_mask(s))
    ref, _, _ = solve_dense(sh, live, rho, 1e-13, 100)  # the pure-torch joint Newton solver
    fast, st = _forward(s, rho)
    assert all(st.series_rows) and st.all_converged  # it ran, and the rows converged
    joint, st_joint = _forward(s, rho, options=NO_SERIES)
    assert not any(st_joint.series_rows)
    # accuracy at the default tolerance: Newton's error bound 1e-10 on the
    # log-weights (rows aim at tol/10; weights <= 1), for the series solve and the joint loop
    assert (fast - ref).abs().max().item() <= 1e-10
    assert (joint - ref).abs().max().item() <= 1e-10


@needs_openmp_build
@pytest.mark.parametrize("rho", [0.9, 0.99])
def test_series_solve_in_a_team_matches_pure_torch_solver(two_threads, rho):
    # one head on two threads: rows from 640 on are solved by both workers, the moments and
    # the new near keys exchanged (17 values, three mailbox lines)
    s = rand_scores(1, 700, 700, seed=72, scale=2.0)
    sh, live = shift_rows(s, live_mask(s))
    ref, _, _ = solve_dense(sh, live, rho, 1e-13, 100)
    fast, st = _forward(s, rho, options=STAYS)
    assert st.team_rows[0] == 700 - 255 and st.series_rows[0] > 0 and st.converged[0]
    assert (fast - ref).abs().max().item() <= 1e-10  # as above


# --- A row's first pass over a worker's keys (csrc/row_driver.h, first_pass): the copy into
# the work arrays (shifted by the row max, from the previous row's pass, which scanned this
# row's scores), q_j, the fresh keys' count and, with the previous row's max of q as a guess of
# this row's, E_j = e^{q_j - guess} and their sum; the E_j are recomputed where the guess is
# out of range (max q - kERefHi to max q + 8: overflow, keys lost to underflow). guess_rows
# counts the rows that kept them (alone; worker 0's part in a team).


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("rho", [0.3, 0.9, 0.99])
def test_first_pass_keeps_its_guess_and_matches_pure_torch_solver(one_thread, rho):
    n = 420
    s = rand_scores(2, n, n, seed=74, scale=2.0)
    s[1, 400:, 33] = -math.inf  # masked keys: those rows take the compaction, not the pass
    sh, live = shift_rows(s, live_mask(s))
    ref, _, _ = solve_dense(sh, live, rho, 1e-13, 100)  # the pure-torch joint Newton solver
    fast, st = _forward(s, rho)
    # no guess for the first two rows (the first with old keys is row 1), none for the masked
    # rows; at score std 2 the max of q moves by more than 8 between rows now and then (a few
    # rows of each slice). A mutant whose E_j are 1e-9 too large fails the accuracy check below
    # at rho = 0.3 (the far keys' weights come from the series)
    assert st.guess_rows[0] >= 0.97 * (n - 2) and st.guess_rows[1] >= 0.97 * (n - 2 - 20)
    assert st.guess_rows[0] <= n - 2 and st.guess_rows[1] <= n - 2 - 20 and st.all_converged
    # the default tolerance's accuracy (Newton's bound 1e-10 on the log-weights, weights <= 1)
    assert (fast - ref).abs().max().item() <= 1e-10


def _float32_errors(s32: torch.Tensor, rho: float, w32: torch.Tensor) -> tuple[float, float]:
    """Max weight errors of w32 and of the pure-torch solver in float32 (same row shift,
    Proposition 2.4), both against the pure-torch float64 solve of the same float32 scores."""
    ref, _, _ = solve_dense(*shift_rows(s32.double(), live_mask(s32.double())), rho, 1e-13, 100)
    torch32, _, _ = solve_dense(*shift_rows(s32, live_mask(s32)), rho, 1e-5, 100)
    return tuple((w.double() - ref).abs().max().item() for w in (w32, torch32))


@pytest.mark.parametrize("threads", [1, 2])
def test_first_pass_in_float32_is_as_accurate_as_the_pure_torch_solver(threads):
    # The pass shifts the keys by the row max, known before it from the previous row's pass
    # (which scanned this row's scores; in a team, both workers' parts exchanged). A shift by
    # another score of the row loses float32 digits in the row's dominant keys, whose
    # log-weights then cancel two values ~ max - shift. Reference: the pure-torch solver in
    # float32 (the shift by the row max, other code and arithmetic); both errors are float32
    # rounding of O(|s|) log-terms in different orders: the kernel may have twice the pure-torch
    # solver's error plus 2 ulp.
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        s32 = rand_scores(1, 300, 300, seed=5, scale=6.0).float()
        w32, st = _forward(s32, 0.3, 1e-5, STAYS)
    finally:
        torch.set_num_threads(before)
    if threads == 2 and not compiled.load_extension().__name__.endswith("_serial"):
        assert st.team_rows[0] > 0  # the team shared rows (the first pass in a team)
    err, err_torch = _float32_errors(s32, 0.3, w32)
    assert err <= 2 * err_torch + 2 * 2.0**-24, (err, err_torch)


def test_first_pass_recomputes_e_when_its_guess_is_out_of_range(one_thread):
    # Every other row's diagonal score 100 above the rest (the diagonal then takes almost all
    # of that row's weight) moves the max of q, against the row max, by ~100 from row to
    # row, beyond float32's range for the guess (E_j up to e^{+-100}: fexp clamps at
    # e^88.7): the E_j must be recomputed there. Accuracy as in the test above.
    n = 160
    s = rand_scores(1, n, n, seed=75)
    idx = torch.arange(0, n, 2)
    s[0, idx, idx] += 100.0
    s32 = s.float()
    fast, st = _forward(s32, 0.9, 1e-5)
    # the guess was out of range in (almost) every row
    assert st.guess_rows[0] <= 10 and st.converged[0]
    err, err_torch = _float32_errors(s32, 0.9, fast)
    assert err <= 2 * err_torch + 2 * 2.0**-24, (err, err_torch)


@pytest.mark.parametrize(("rho", "std"), [(0.9, 100.0), (0.999, 30.0)])
def test_float32_keys_whose_start_weight_underflowed_still_get_their_weight(rho, std):
    # In float32 a row's E_j = e^{q_j - qmax} underflows (below e^-87) for keys next to one of
    # tiny column mass (q_j = s_j - kappa log C_j huge): a start a_j = E_j e^{qmax - zeta} of 0
    # would stay 0 (the polynomial passes never refresh it) for keys of weight up to ~5e-4
    # here. The float64 solve (e^-708) is the reference, float32's contract (tol 1e-5) the
    # bound.
    s = rand_scores(2, 1024, 1024, seed=1031, scale=std)
    ref, _ = _forward(s, rho, 1e-13)
    w, _ = _forward(s.float(), rho, 1e-5)
    assert (w.double() - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("rho", [0.3, 0.9, 0.99])
def test_float32_series_solve_is_as_accurate_as_its_joint_loop(rho):
    # float32 sums 8 series terms, not 16: at v <= 0.05 they leave at most 4.4e-9 relative in u
    # and log1p(u) (mpmath, rho 0.05 to 0.999999), below float32's 2^-24 = 6e-8. So the series
    # path must be as accurate, key by key, as float32's joint loop (the path it replaces),
    # both against the pure-torch float64 solver at tol 1e-13 (relative errors over weights
    # > 1e-6 grow with kappa, float32's conditioning, for either path); the bound allows each
    # path 1.5x the other's plus 2 ulp of float32. A float32 series without its v^2 and v^3
    # terms fails it; without v^4 and v^5 (at most ~1e-5 relative) the change hides in
    # float32's own rounding on these rows, which the mpmath bound above covers.
    s = rand_scores(2, 600, 600, seed=5, scale=2.0)
    sh, live = shift_rows(s, live_mask(s))
    ref, _, _ = solve_dense(sh, live, rho, 1e-13, 100)  # the pure-torch joint Newton solver
    big = ref > 1e-6

    def rel_err(w):
        return ((w.double() - ref).abs() / ref)[big].max().item()

    w_series, st = _forward(s.float(), rho, 1e-5)
    assert all(st.series_rows) and st.all_converged  # it ran, and the rows converged
    w_joint, st_joint = _forward(s.float(), rho, 1e-5, NO_SERIES)
    assert not any(st_joint.series_rows)
    assert rel_err(w_series) <= 1.5 * rel_err(w_joint) + 1.2e-7
    assert (w_series.double() - ref).abs().max().item() <= 1e-5  # the float32 contract


@pytest.mark.parametrize("max_iter", [1, 3, 12])
def test_pure_torch_newton_keeps_to_max_iter_like_the_kernel(max_iter, monkeypatch):
    """``max_iter`` caps a row's Newton steps on both paths: the pure-torch solver, stopped
    unconverged (``tol = 1e-300``, hard rows at ``rho = 0.99``), reports at most
    ``max_iter`` steps like the compiled kernel (it took up to twice as many: the joint
    steps, then as many safeguarded ones again), and its weights stay finite, zero above
    the diagonal, with rows summing to 1 within 1e-14 (a final normalisation)."""
    s = rand_scores(2, 8, 8, seed=40) * 5
    with pytest.warns(ConvergenceWarning):
        kernel = causal_ot_attention(s, 0.99, tol=1e-300, max_iter=max_iter)
    monkeypatch.setitem(compiled._state, "module", None)
    with pytest.warns(ConvergenceWarning):
        pure = causal_ot_attention(s, 0.99, tol=1e-300, max_iter=max_iter)
    assert kernel.info.sweeps <= max_iter and pure.info.sweeps <= max_iter
    w = pure.weights
    assert torch.isfinite(w).all() and (w.triu(1) == 0).all()
    assert (w.sum(-1) - 1).abs().max().item() <= 1e-14

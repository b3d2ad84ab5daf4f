"""Theorem checks of docs/theory.md §4-§8 beyond the registry tests (which run every check at
CI size and its negative control, in ``test_theorem_checks.py``).

Here: the helpers the checks rely on are checked against brute force, the independently
computed numbers of docs/theory.md §4-§8 are reproduced (to the digits printed there), and the
torch checks run in float32 and on CUDA where available.
"""

import math

import pytest
import torch

from proofs_check import measurements
from proofs_check.theorems import (
    bias_extension,
    classification,
    margin_control,
    near_one,
    scale_invariant_convergence,
)

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device")]),
]


# --------------------------------------------------------------------------- §4 helpers


def _brute_sup(row, rho, grid=20000):
    """sup_y |F_l(y) - G(y)| by evaluating both CDFs on a fine grid of y (plus left limits)."""
    from scipy.special import gammaincc

    a = row.to(torch.float64)
    n = a.numel()
    c = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(a, 0)])
    worst = 0.0
    ys = [k / grid for k in range(1, grid)] + [j / n - 1e-13 for j in range(1, n + 1)]
    for y in ys:
        step = float(c[math.floor(y * n + 1e-12)])  # sum of a[l, i] for i <= y l
        cont = float(gammaincc(1 - rho, math.log(1 / y)))
        worst = max(worst, abs(step - cont))
    return worst


def test_grid_distances_against_brute_force():
    gen = torch.Generator().manual_seed(1)
    row = torch.rand(40, generator=gen, dtype=torch.float64)
    row /= row.sum()
    stats = measurements.grid_distances(row, 0.3)
    brute = _brute_sup(row, 0.3)
    # The closed-form sup (endpoints of each step) dominates any grid evaluation and is
    # reached within the continuum CDF's change over the grid spacing.
    assert stats["sup_y"] >= brute - 1e-12
    assert stats["sup_y"] - brute < 1e-3
    assert stats["K"] <= stats["sup_y"]


def test_grid_distance_zero_on_the_continuum_masses():
    # A row whose cumulative sums are the continuum CDF at j/l has K_l = 0 (to round-off).
    from scipy.special import gammaincc

    rho, n = 0.4, 64
    cdf = torch.tensor([gammaincc(1 - rho, math.log(n / j)) for j in range(1, n + 1)],
                       dtype=torch.float64)
    row = torch.diff(cdf, prepend=torch.zeros(1, dtype=torch.float64))
    assert measurements.grid_distances(row, rho)["K"] < 1e-15


def test_grid_distance_reproduces_theory():
    # docs/theory.md §4 (computed independently): K_l = 0.00668, 0.00425, 0.00269 at l = 256, 512,
    # 1024 for rho = 1/3; tolerance half a unit of the last printed digit.
    r = scale_invariant_convergence.check_grid_distance(1 / 3, (8, 9, 10))
    assert r.holds
    for l, theory in [(256, 0.00668), (512, 0.00425), (1024, 0.00269)]:  # noqa: E741
        assert abs(r.details["K_l"][str(l)] - theory) <= 5e-6, (l, r.details["K_l"])
    # The sup over real y is about three times K_l, set by the diagonal atom.
    for l in ("256", "512", "1024"):  # noqa: E741
        ratio = r.details["sup_over_y"][l] / r.details["K_l"][l]
        assert 2.5 < ratio < 3.5, ratio
        assert r.details["sup_over_y"][l] >= r.details["diagonal_atom"][l] - 1e-15
    # Fixed q: the window-mass ratio discrete/continuum climbs towards 1 (docs/theory.md §4:
    # 0.945 to 0.994); fixed W = 1: it levels off near 0.76.
    q = [r.details["window_ratio_fixed_q"][k] for k in ("256", "512", "1024")]
    assert q == sorted(q) and 0.94 < q[0] and q[-1] < 1
    w1 = [r.details["window_ratio_W1"][k] for k in ("256", "512", "1024")]
    assert all(abs(v - 0.76) < 0.01 for v in w1), w1


def test_grid_distance_rho_09_reproduces_theory():
    # docs/theory.md §4: K_512 = 0.115 at rho = 0.9 (3 printed digits: tolerance 5e-4).
    from proofs_check.operators import stream_causal_ot

    rows = dict(stream_causal_ot(512, 0.9))
    k = measurements.grid_distances(rows[512], 0.9)["K"]
    assert abs(k - 0.115) <= 5e-4, k


# --------------------------------------------------------------------------- §5 helpers


def test_numeric_class_sees_the_near_one_ambiguity():
    # alpha = 1.03 is summable, but over 1e4..1e12 its increments barely shrink: the numeric
    # criterion must say "inconclusive" rather than guess (docs/theory.md §6: summability only shows
    # beyond n ~ e^{1/delta}), while classify() knows the closed form.
    from priors.encodings import LogDistance

    label, p_hat = classification.numeric_class(LogDistance(alpha=1.03))
    assert label == "inconclusive" and 1.01 < p_hat < 1.05, (label, p_hat)
    assert LogDistance(alpha=1.03).classify().label == "summable"


def test_numeric_class_recovers_power_tails():
    # p_hat estimates the tail exponent of e^{b(d)} ~ d^-p: within 1e-4 for alpha = 0.5, 1.5
    # (the pre-asymptotic correction is O(l_0^{-|1-p|}) = O(1e-2) relative to 1 - p).
    from priors.encodings import LogDistance

    for alpha in (0.5, 1.5):
        _, p_hat = classification.numeric_class(LogDistance(alpha=alpha))
        assert abs(p_hat - alpha) < 1e-4, (alpha, p_hat)


# --------------------------------------------------------------------------- §6


def test_near_one_theory_example():
    # docs/theory.md §6: at W = 512, n = 1e12, delta -> 0 the limit is 0.24165 against 0.22577 for
    # the ratio of logarithms (5 printed digits: tolerance 5e-6).
    r = near_one.check_near_one_limit((1e-8,), (512,), (10**12,))
    assert r.holds
    ex = r.details["theory_example"]
    assert abs(ex["H_W/H_n (W=512, n=1e12)"] - 0.24165) <= 5e-6
    assert abs(ex["ln W/ln n (W=512, n=1e12)"] - 0.22577) <= 5e-6
    # The measured window mass at delta = 1e-8 is within delta ln n of the limit.
    w = r.details["worst_case"]
    assert 0 <= w["r"] <= 1


def test_brackets_check_catches_an_exponent_off_by_a_few_ulps():
    # The Euler–Maclaurin brackets are ~1e-30 tight; brackets computed for an exponent off
    # by 4e-16 relative (two float64 ulps of alpha) already exclude the exact value, which
    # moves by about alpha * 4e-16 * E[ln k] ~ 3e-15 relative.
    from proofs_check.theorems.mutants import exponent_scaled
    from proofs_check.theorems.system import System

    r = near_one.check_brackets((1e-6,), (10**6,), (8,),
                                system=System(prior=exponent_scaled(1 + 4.5e-16)))
    assert not r.holds
    assert r.details["max_relative_em_width"] < 1e-25


# --------------------------------------------------------------------------- §7


def test_margin_control_with_sup_away_from_the_margin():
    # B > 0 and L0 > W: G_B is not monotone in alpha (docs/theory.md §7: W = 1, L0 = 16, L1 = 128,
    # B = 0.5 gives 0.4565, 0.5042, 0.4570 at alpha = 1, 1.5, 2); the check still holds.
    r = margin_control.check_margin_control(1, 128, 0.48, lmin=16, score_bound=0.5)
    assert r.holds, r.details
    assert r.details["growth_just_below"] > 0.48


# --------------------------------------------------------------------------- §8


def test_bias_extension_changes_are_material():
    # "Weakly" must not mean "nothing moved": most (row, head) distant masses beyond L_train
    # move strictly (beyond the round-off allowance) in the direction of the change.
    r = bias_extension.check_direction(n=96, train_length=32, window=8, samples=1)
    assert r.holds
    assert r.details["strictly_moved"] > 0.5 * r.details["row_head_cases"], r.details


def test_direction_check_fails_when_the_bias_is_dropped():
    # A biased softmax that drops the bias moves no distant mass: the weak inequality of §8
    # (b) is met without being tested, and the check held. It must fail instead.
    from proofs_check.operators.biases import softmax_with_bias
    from proofs_check.theorems.system import System

    def bias_dropped(scores, bias):
        return softmax_with_bias(scores, torch.where(torch.isfinite(bias), 0.0, bias))

    r = bias_extension.check_direction(n=96, train_length=32, window=8, samples=1,
                                       system=System(biased_softmax=bias_dropped))
    assert not r.holds, (r.measured, dict(r.details))
    assert r.details["strictly_moved"] == 0
    assert r.details["worst_against_change"] <= r.allowance  # never against the change


# --------------------------------------------------------------------------- dtypes, devices


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "run, kwargs",
    [
        (bias_extension.check_rows_unchanged, {"n": 96, "train_length": 32, "window": 8}),
        (bias_extension.check_direction, {"n": 96, "train_length": 32, "window": 8}),
        (classification.check_content_bounds, {"n": 64, "window": 8}),
        (margin_control.check_margin_constant_scores, {"window": 8, "lmax": 256, "tau": 0.1}),
    ],
    ids=["s8_rows", "s8_direction", "thm3_bounds", "thm5_margin"],
)
def test_torch_checks_across_dtypes_and_devices(run, kwargs, dtype, device):
    r = run(**kwargs, dtype=dtype, device=device)
    assert r.holds, (r.measured, r.allowance, dict(r.details))
    assert r.dtype == str(dtype).removeprefix("torch.") and r.device == device


@pytest.mark.parametrize("device", DEVICES)
def test_grid_distance_float32(device):
    r = scale_invariant_convergence.check_grid_distance(
        1 / 3, (7, 8, 9), dtype=torch.float32, device=device)
    assert r.holds, r.details
    assert r.dtype == "float32"


@pytest.mark.slow
@pytest.mark.parametrize("module", [scale_invariant_convergence, classification, near_one,
                                    margin_control, bias_extension])
def test_default_sizes_hold(module):
    for spec in module.CHECKS:
        r = spec.run(**spec.default)
        assert r.holds, (spec.name, r.measured, r.reference, dict(r.details))


# --------------------------------------------------------------------------- NaN values


def test_prior_identities_fail_on_a_nan_density():
    # mpmath's NaN compares false: `dev > worst` dropped it, and closed forms whose density
    # is NaN near y = 0 held with measured 1e-40.
    from types import SimpleNamespace

    import mpmath

    import priors.scale_invariant as si
    from proofs_check.theorems.system import System

    def density(rho, y, **kwargs):
        return mpmath.nan if y < 1e-6 else si.density(rho, y, **kwargs)

    forms = SimpleNamespace(density=density, normaliser=si.normaliser,
                            cumulative_mass=si.cumulative_mass, __name__="NaN density")
    r = scale_invariant_convergence.check_prior_identities(
        rhos=(1 / 3,), points=6, symbolic=False, system=System(closed_forms=forms))
    assert not r.holds, (r.measured, dict(r.details))


class _NanAtLongLengths:
    """A log-distance prior whose window mass is NaN at ``n >= 1e12`` (an overflow)."""

    def __init__(self, enc):
        self.enc, self.alpha = enc, enc.alpha

    def window_mass(self, window, length, **kwargs):
        import mpmath

        if length >= 10**12:
            return mpmath.nan
        return self.enc.window_mass(window, length, **kwargs)


def test_near_one_limit_fails_on_a_nan_window_mass():
    from proofs_check.theorems.system import System

    r = near_one.check_near_one_limit(deltas=(1e-6,), windows=(8,), lengths=(1000, 10**12),
                                      system=System(prior=_NanAtLongLengths))
    assert not r.holds, (r.measured, dict(r.details))


def test_content_bounds_fail_on_nan_attention_for_a_later_encoding():
    # The worst violation is kept across encodings with `value > worst`: a NaN row in any
    # encoding but the first lost that comparison and the check held.
    from proofs_check.operators.biases import softmax_with_bias
    from proofs_check.theorems.system import System

    calls = []

    def nan_after_the_first_encoding(scores, bias):
        calls.append(1)
        attn = softmax_with_bias(scores, bias)
        if len(calls) > 4:  # 2 extreme patterns + 2 random draws per encoding
            attn = attn.clone()
            attn[..., -1, :] = float("nan")
        return attn

    r = classification.check_content_bounds(
        n=64, window=8, samples=2, system=System(biased_softmax=nan_after_the_first_encoding))
    assert len(calls) > 4
    assert not r.holds, (r.measured, dict(r.details))


def test_direction_check_fails_on_nan_attention_in_a_later_sample():
    # As above for §8: a NaN distant mass in the second score sample lost `value > worst`
    # to the first sample's finite worst case.
    from proofs_check.operators.biases import softmax_with_bias
    from proofs_check.theorems.system import System

    calls = []

    def nan_after_the_first_sample(scores, bias):
        calls.append(1)
        attn = softmax_with_bias(scores, bias)
        if len(calls) > 3:  # base and both signs of the first sample
            attn = attn.clone()
            attn[..., -1, :] = float("nan")
        return attn

    r = bias_extension.check_direction(n=96, train_length=32, window=8, samples=2,
                                       system=System(biased_softmax=nan_after_the_first_sample))
    assert len(calls) > 3
    assert not r.holds, (r.measured, dict(r.details))


def test_margin_check_fails_on_a_nan_growth_just_below():
    # The growth just below alpha* is the second argument of max(), which keeps its first
    # argument when the second is NaN: a NaN there left the check holding.
    from proofs_check.operators.biases import softmax_with_bias
    from proofs_check.theorems.system import System

    calls = []

    def nan_on_the_last_call(scores, bias):
        calls.append(1)
        attn = softmax_with_bias(scores, bias)
        if len(calls) > 1:  # constant scores at alpha*, then the growth just below
            attn = attn.clone()
            attn[..., -1, :] = float("nan")
        return attn

    r = margin_control.check_margin_constant_scores(
        window=8, lmax=256, tau=0.1, system=System(biased_softmax=nan_on_the_last_call))
    assert len(calls) == 2
    assert not r.holds, (r.measured, dict(r.details))

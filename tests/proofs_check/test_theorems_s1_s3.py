"""Checks of docs/theory.md §1-§3 beyond the registry run (test_theorem_checks.py)."""

import math

import numpy as np
import pytest
import torch

from priors.feasibility import tail_condition
from proofs_check.operators.causal_ot import causal_ot_attention
from proofs_check.theorems import all_checks
from proofs_check.theorems.dilution import score_families
from proofs_check.theorems.fixed_point import fixed_point_defect
from proofs_check.theorems.obstruction import lp_feasible
from proofs_check.theorems.sinkhorn_form import contraction_factor

MINE = {"§1", "§2.1", "§2.2", "§2.3", "§2.4", "§3"}


def test_sections_registered():
    names = {s.name for s in all_checks() if s.section in MINE}
    assert names == {
        "prop1_identity_collapse", "prop1_diagonal_mass", "prop1_feasibility_lp",
        "lemma21_fixed_point",
        "lemma21_exact_vs_mp", "lemma22_sweeps_converge", "lemma22_contraction",
        "prop23_prefix_consistency", "prop23_batch_leak", "prop24_softmax",
        "prop24_row_shift", "thm1_weight_bound", "thm1_column_bound", "thm1_decay_exponent",
    }


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_uniform_targets_are_tight_and_feasible_only_as_identity(n):
    # Prop. 1 pinned on its boundary: b = 1 makes every inequality an equality; moving
    # mass eps towards an earlier column stays feasible, towards a later column does not.
    b = np.ones(n)
    assert tail_condition(b, atol=0.0) and lp_feasible(b)
    if n >= 2:
        later = b.copy()
        later[0] -= 0.1
        later[-1] += 0.1  # sum_{j >= n} b_j = 1.1 > 1
        assert not tail_condition(later) and not lp_feasible(later)
        earlier = b.copy()
        earlier[0] += 0.1
        earlier[-1] -= 0.1
        assert tail_condition(earlier) and lp_feasible(earlier)


def test_tail_condition_matches_lp_on_vertex_cases():
    # Column sums of 0/1 lower-triangular row-stochastic matrices (every key choice for
    # n = 4: 1*2*3*4 = 24 matrices) are feasible by construction, and the LP must agree;
    # their images moved by one unit to a later column are infeasible for both.
    import itertools

    n = 4
    for choice in itertools.product(*[range(r + 1) for r in range(n)]):
        b = np.bincount(np.array(choice), minlength=n).astype(float)
        assert tail_condition(b) and lp_feasible(b), b
        k = int(np.flatnonzero(b)[0])
        if k < n - 1:
            moved = b.copy()
            moved[k] -= 1
            moved[-1] += 1
            assert tail_condition(moved) == lp_feasible(moved), moved


def test_fixed_point_defect_detects_a_wrong_rho():
    # The defect is an independent measurement: weights solved at rho = 0.6 fail Lemma 2.1
    # at rho = 0.5 by far more than the check's 1e-9 tolerance, and pass at 0.6.
    gen = torch.Generator().manual_seed(1)
    s = torch.randn(24, 24, generator=gen, dtype=torch.float64)
    w = causal_ot_attention(s, 0.6, method="newton").weights
    assert fixed_point_defect(w, s, 0.6) <= 1e-9
    assert fixed_point_defect(w, s, 0.5) > 1e-3


def test_fixed_point_defect_flags_nonpositive_weights():
    s = torch.zeros(3, 3, dtype=torch.float64)
    w = causal_ot_attention(s, 0.5).weights.clone()
    w[2, 0] = 0.0
    assert math.isinf(fixed_point_defect(w, s, 0.5))


@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_contraction_factor_on_random_scores(rho):
    # docs/theory.md §2: about rho per sweep; 0.01 as in the registered check (transient bias only).
    gen = torch.Generator().manual_seed(2)
    s = 2 * torch.rand(12, 12, generator=gen, dtype=torch.float64) - 1
    assert abs(contraction_factor(s, rho) - rho) <= 0.01


def test_score_families_are_bounded():
    n, b = 20, 1.5
    for name, (s, bound) in score_families(n, b, torch.Generator().manual_seed(3)).items():
        assert s.abs().max() <= bound + 1e-15, name


def test_rho_zero_weight_bound_is_the_softmax_bound():
    # At rho = 0 Theorem 1 reads a <= e^{2B}/l; the extreme case of the docstring (+B on
    # one key, -B on the others) attains e^{2B}/(e^{2B} + l - 1), checked in closed form.
    n, b = 16, 1.0
    s = torch.full((n, n), -b, dtype=torch.float64)
    s[:, 0] = b
    a = causal_ot_attention(s, 0.0).weights
    ell = torch.arange(1, n + 1, dtype=torch.float64)
    e2b = math.exp(2 * b)
    assert torch.allclose(a[:, 0], e2b / (e2b + ell - 1), rtol=1e-14, atol=0)
    assert (a[:, 0] <= e2b / ell).all()


@pytest.mark.parametrize(
    "name",
    ["lemma21_fixed_point", "prop23_prefix_consistency", "thm1_weight_bound"],
)
def test_float32_runs_hold(name):
    spec = next(s for s in all_checks() if s.name == name)
    result = spec.run(**spec.ci, dtype=torch.float32)
    assert result.dtype == "float32" and result.holds, result


def test_batch_leak_refuses_rhos_with_no_reference_value():
    # At rho = 0.5 docs/theory.md §1 gives no leak statistics: the check compared nothing and
    # held with measured 0. It must refuse rather than report a vacuous "holds".
    from proofs_check.theorems.prefix_consistency import THEORY_LEAK, check_batch_leak

    assert 0.5 not in THEORY_LEAK
    with pytest.raises(ValueError, match="nothing would be compared"):
        check_batch_leak(rhos=(0.5,))


def test_identity_collapse_fails_on_a_plan_that_ignores_rho():
    # Bound (d) holds for every causal plan with unit row sums, whatever rho: a batch plan
    # computed at rho = 0.5 for every rho satisfied it, and the check held although its
    # diagonal mass did not grow with rho (docs/theory.md §1: the collapse to the identity).
    from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn
    from proofs_check.theorems.obstruction import check_identity_collapse
    from proofs_check.theorems.system import System

    def plan_at_half(scores, rho, **kwargs):
        return batch_unbalanced_sinkhorn(scores, 0.5, **kwargs)

    wrong = check_identity_collapse(n=16, rhos=(0.5, 0.9), samples=1,
                                    system=System(batch_plan=plan_at_half))
    assert wrong.details["worst_ratio"] <= 1.0  # bound (d) alone cannot see the error
    assert not wrong.details["increasing_in_rho"]
    assert not wrong.holds
    right = check_identity_collapse(n=16, rhos=(0.5, 0.9), samples=1)
    assert right.holds and right.measured == right.details["worst_ratio"]


@pytest.mark.parametrize("factor", [0.95, 0.97])
def test_decay_exponent_catches_a_few_percent_error_in_rho_at_ci_size(factor):
    # The stream at 0.95 rho shifts the exponent at rho = 0.8 by 0.04 (1 - 0.76 vs 1 - 0.8),
    # inside the former tolerance 0.05 at n = 256; the true fits deviate by <= 0.0025 there.
    from proofs_check.theorems import mutants
    from proofs_check.theorems.dilution import check_decay_exponent
    from proofs_check.theorems.system import System

    spec = next(s for s in all_checks() if s.name == "thm1_decay_exponent")
    right = spec.run(**spec.ci)
    assert right.holds and right.measured <= 0.0025 + 1e-4, right.measured
    wrong = check_decay_exponent(**spec.ci,
                                 system=System(stream=mutants.stream_at_scaled_rho(factor)))
    # the exponent error it must see: |(1 - factor rho) - (1 - rho)| at the largest rho
    assert wrong.measured >= (1 - factor) * max(spec.ci["rhos"]) - 0.0025
    assert not wrong.holds, (wrong.measured, wrong.allowance)


@pytest.mark.parametrize("slack", [1e-2, 1e-3])
def test_feasibility_check_catches_a_slightly_loose_condition(slack):
    # A tail condition with n - k + 1 + slack agreed with the LP on every random target
    # (none lies within 0.01 of the boundary) and the check held.
    from proofs_check.theorems import mutants
    from proofs_check.theorems.system import System

    spec = next(s for s in all_checks() if s.name == "prop1_feasibility_lp")
    assert spec.run(**spec.ci).holds
    wrong = spec.run(**spec.ci, system=System(feasibility=mutants.wrong_feasibility(slack)))
    assert not wrong.holds, wrong.measured

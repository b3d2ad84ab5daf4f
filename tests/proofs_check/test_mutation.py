"""Mutation test: every wrong operator substituted for ``causal_ot_attention`` is caught.

Each mutant of ``proofs_check.theorems.mutants.MUTANT_OPERATORS`` is fed, through
``System(operator=mutant)``, to every registered check that uses the operator (directly or
through the stream derived from it), at CI size, unchanged. At least one check must fail.
Mutants that are wrong only in float32 are also run in float32 (the registry runs float64).
The table of which checks caught which mutant is printed (``pytest -s`` or ``-rP`` shows it)
and reproduced in docs/theory.md ("How the checks can fail").
"""

import pytest
import torch

from proofs_check.operators.causal_ot import causal_ot_attention
from proofs_check.theorems import all_checks, mutants
from proofs_check.theorems.mutants import MUTANT_OPERATORS
from proofs_check.theorems.system import System

OPERATOR_CHECKS = [s for s in all_checks()
                   if {"operator", "stream"} & set(s.run.uses)]


@pytest.fixture(autouse=True)
def _one_thread():
    # Dense solves of at most 1024 x 1024: on a shared 2-core machine torch's intra-op
    # threads only contend (measured 30x slower under load); restored afterwards.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _caught_by(mutant, dtype):
    caught = []
    for spec in OPERATOR_CHECKS:
        kwargs = {**spec.ci, "system": System(operator=mutant)}
        if dtype is not None:
            kwargs["dtype"] = dtype
        result = spec.run(**kwargs)
        if not result.holds:
            caught.append(spec.name)
    return caught


def test_operator_checks_are_registered():
    names = {s.name for s in OPERATOR_CHECKS}
    assert {"lemma21_fixed_point", "lemma21_exact_vs_mp", "lemma22_sweeps_converge",
            "lemma22_contraction", "prop23_prefix_consistency", "prop24_softmax",
            "prop24_row_shift", "thm1_weight_bound", "thm1_column_bound",
            "thm1_decay_exponent", "thm2_grid_distance"} <= names, sorted(names)


@pytest.mark.parametrize("label", list(MUTANT_OPERATORS))
def test_every_mutant_is_caught(label):
    mutant = MUTANT_OPERATORS[label]
    dtypes = [None] + ([torch.float32] if "float32" in label else [])
    report = {}
    for dtype in dtypes:
        report[str(dtype or "float64")] = _caught_by(mutant, dtype)
    print(f"\nmutant {label!r}: caught by {report}")
    assert any(report.values()), f"no check caught the mutant {label!r}"


def test_reference_operator_passes_the_operator_checks_in_float32():
    # Otherwise the float32 row of the mutation table would prove nothing: the float32-only
    # mutant must be caught by checks the real operator passes in float32.
    failing = []
    for spec in OPERATOR_CHECKS:
        result = spec.run(**spec.ci, dtype=torch.float32)
        if not result.holds:
            failing.append((spec.name, result.measured, result.allowance))
    assert not failing, failing


def _nan_last_row_plan(scores, rho, **kwargs):
    """The batch plan of §1 with its last row NaN (an overflow)."""
    from types import SimpleNamespace

    from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn

    w = batch_unbalanced_sinkhorn(scores, rho, **kwargs).weights.clone()
    w[..., -1, :] = float("nan")
    return SimpleNamespace(weights=w)


def _nan_end_rows_softmax(scores, bias):
    """``softmax(s + b)`` with the first and last query rows NaN (an overflow); the first
    is what ``s8_rows_unchanged`` reads (rows ``l <= L_train``), the last what the others
    read."""
    from proofs_check.operators.biases import softmax_with_bias

    attn = softmax_with_bias(scores, bias).clone()
    attn[..., [0, -1], :] = float("nan")
    return attn


#: For every torch part a check can read: that part with its last row NaN.
_NAN_PARTS = {"operator": mutants.nan_last_row, "batch_plan": _nan_last_row_plan,
              "biased_softmax": _nan_end_rows_softmax}
NAN_CHECKS = [s for s in all_checks() if set(_NAN_PARTS) & set(s.run.uses)
              or "stream" in s.run.uses]


@pytest.mark.parametrize("spec", NAN_CHECKS, ids=lambda s: s.name)
def test_nan_in_the_system_makes_the_check_fail(spec):
    # A NaN compared with a bound establishes nothing. Python's max(worst, nan) keeps worst
    # and `nan > worst` is false, so a running maximum dropped the NaN rows and checks held
    # on NaN weights; every check reading a part that returns a NaN row must now fail.
    uses = set(spec.run.uses) | ({"operator"} if "stream" in spec.run.uses else set())
    part = next(p for p in _NAN_PARTS if p in uses)
    result = spec.run(**spec.ci, system=System(**{part: _NAN_PARTS[part]}))
    assert not result.holds, (spec.name, part, result.measured, result.slack)


def test_nan_weights_of_the_anderson_path_alone_are_caught():
    # Only lemma22_sweeps_converge runs method="anderson"; NaN weights there were dropped by
    # its running maximum and no check caught them.
    spec = next(s for s in all_checks() if s.name == "lemma22_sweeps_converge")
    wrong = mutants.only_for_method("anderson", mutants.nan_last_row)
    result = spec.run(**spec.ci, system=System(operator=wrong))
    assert not result.holds, (result.measured, result.slack)


def _nan_at_large_rho(scores, rho, **kwargs):
    """The reference operator, with the last row NaN at ``rho >= 0.9`` only."""
    if rho >= 0.9:
        return mutants.nan_last_row(scores, rho, **kwargs)
    return causal_ot_attention(scores, rho, **kwargs)


@pytest.mark.parametrize("name", ["thm1_weight_bound", "thm1_column_bound"])
def test_nan_at_one_rho_is_not_outvoted_by_the_others(name):
    # The worst ratio is taken over every rho; a NaN ratio at rho = 0.9 lost the comparison
    # `value > worst` to the finite ratios of the other rho and the check held.
    spec = next(s for s in all_checks() if s.name == name)
    result = spec.run(**spec.ci, system=System(operator=_nan_at_large_rho))
    assert not result.holds, (result.measured, result.slack)

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

from proofs_check.theorems import all_checks
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

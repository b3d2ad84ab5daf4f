"""The substitution mechanism of the checks (``System``), the wrong parts, and the decorator."""

import math

import pytest
import torch

from proofs_check.operators.biases import softmax_with_bias
from proofs_check.operators.causal_ot import causal_ot_attention, stream_causal_ot
from proofs_check.result import Measurement, theorem_check
from proofs_check.theorems import mutants
from proofs_check.theorems.dilution import check_weight_bound
from proofs_check.theorems.system import System, resolve, rows_of


def test_substituting_a_part_the_check_does_not_use_is_an_error():
    with pytest.raises(ValueError, match="does not use"):
        check_weight_bound(8, system=System(batch_plan=mutants.batch_plan_at_scaled_rho(0.5)))
    with pytest.raises(ValueError, match="system must be a System"):
        check_weight_bound(8, system="softmax")


def test_resolve_fills_defaults_and_derives_the_stream_from_the_operator():
    full = resolve(None, ("operator", "stream"))
    assert full.operator is causal_ot_attention and full.stream is stream_causal_ot
    derived = resolve(System(operator=mutants.softmax_operator), ("stream",))
    rows = dict(derived.stream(6, 0.5))
    # the derived stream yields the substituted operator's rows: softmax of constant scores
    for ell, row in rows.items():
        assert torch.allclose(row, torch.full((ell,), 1.0 / ell, dtype=torch.float64))


def test_rows_of_the_real_operator_match_the_real_stream():
    # Two independent code paths (dense exact solver vs O(n) stream): same rows to 1e-12
    # (both solve each row by Newton to a step < 1e-10, quadratically convergent).
    dense = dict(rows_of(causal_ot_attention)(40, 0.6))
    for ell, row in stream_causal_ot(40, 0.6):
        assert (row - dense[ell]).abs().max() <= 1e-12


def test_bias_off_by_one_reads_distance_plus_one():
    n = 6
    d = (torch.arange(n).view(-1, 1) - torch.arange(n).view(1, -1)).to(torch.float64)
    bias = torch.where(d >= 0, -0.3 * d, -math.inf)  # b(d) = -0.3 d
    zeros = torch.zeros(n, n, dtype=torch.float64)
    wrong = mutants.bias_off_by_one(zeros, bias)
    right = softmax_with_bias(zeros, torch.where(d >= 0, -0.3 * (d + 1), -math.inf))
    # b(d+1) = b(d) - 0.3 is a row constant: softmax is unchanged except through the last
    # row's padded key 1 -- so compare the rows that have a row below them.
    assert torch.allclose(wrong[:-1], right[:-1], atol=1e-15)
    linear = torch.where(d >= 0, -0.3 * d * d, -math.inf)  # b(d) = -0.3 d^2: not a shift
    off = mutants.bias_off_by_one(zeros, linear)
    exact = softmax_with_bias(zeros, torch.where(d >= 0, -0.3 * (d + 1) ** 2, -math.inf))
    assert torch.allclose(off[:-1], exact[:-1], atol=1e-15)


def test_noncausal_batch_plan_is_row_stochastic_and_not_causal():
    s = torch.randn(10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    plan = mutants.noncausal_batch_plan(s, 0.9).weights
    assert torch.allclose(plan.sum(-1), torch.ones(10, dtype=torch.float64), atol=1e-12)
    assert plan.triu(1).abs().max() > 1e-3


def test_theorem_check_records_arguments_dtype_and_restores_tf32():
    @theorem_check("demo_check", "§0")
    def body(x: float = 2.0, *, system=None, dtype=torch.float32, device="cpu"):
        return Measurement("x", x, 1.0, "<=", details={"tf32_inside": torch.backends.cuda
                                                      .matmul.allow_tf32})

    b = torch.backends
    before = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    try:
        b.cuda.matmul.allow_tf32 = b.cudnn.allow_tf32 = True
        r = body(0.5)
        assert b.cuda.matmul.allow_tf32 is True and b.cudnn.allow_tf32 is True  # restored
    finally:
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = before[:2]
        torch.set_float32_matmul_precision(before[2])
    assert r.holds and r.tf32 is False and r.details["tf32_inside"] is False
    assert r.dtype == "float32" and r.device == "cpu"
    assert r.params == {"x": 0.5, "system": "reference"} and r.seconds >= 0

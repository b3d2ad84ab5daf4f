"""One vocabulary for the operators' results: ``weights``, ``info``, ``log_potentials``.

Both results claim that in every row the weights are proportional to
``exp(scores + log_potentials)`` over the live causal keys (Lemma 2.2 for the causal
operator, ``P = exp(S + f + g)`` for the batch plan). The test recomputes that row softmax
from the returned potentials, independently of each solver's own normalisation, and
compares it with the returned weights.
"""

from __future__ import annotations

import math

import pytest
import torch

from proofs_check.operators import (
    BatchUOTInfo,
    BatchUOTResult,
    CausalOTResult,
    ConvergenceInfo,
    batch_unbalanced_sinkhorn,
    causal_ot_attention,
)

F64 = torch.float64


def _scores(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(2, n, n, generator=gen, dtype=F64)
    s[0, 5, 2] = -math.inf  # one masked key
    return s


def _softmax_of_potentials(scores: torch.Tensor, log_potentials: torch.Tensor) -> torch.Tensor:
    n = scores.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    logits = (scores + log_potentials).masked_fill(~causal, -math.inf)
    return torch.softmax(logits, dim=-1)


def _solve(kind: str, scores: torch.Tensor, rho: float):
    if kind == "causal":
        return causal_ot_attention(scores, rho, tol=1e-12)
    return batch_unbalanced_sinkhorn(scores, rho, tol=1e-12)


@pytest.mark.parametrize("kind", ["causal", "batch"])
@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_weights_are_the_row_softmax_of_scores_plus_log_potentials(kind, rho):
    scores = _scores(24, seed=3)
    res = _solve(kind, scores, rho)
    assert isinstance(res.info, ConvergenceInfo) and res.info.converged
    assert res.info.iterations == res.info.sweeps
    lp = res.log_potentials
    assert lp is not None and lp.shape == scores.shape
    assert torch.equal(torch.triu(lp, diagonal=1), torch.zeros_like(lp))  # zero above
    # Tolerance: both solvers stop at a residual of 1e-12 in the log domain, so the
    # weights rebuilt from the potentials agree to a few 1e-12 (relative, entries <= 1).
    err = (_softmax_of_potentials(scores, lp) - res.weights).abs().max()
    assert float(err) <= 1e-10


def test_types_share_the_vocabulary():
    scores = _scores(8, seed=0)
    a = causal_ot_attention(scores, 0.5)
    b = batch_unbalanced_sinkhorn(scores, 0.5)
    assert isinstance(a, CausalOTResult) and isinstance(b, BatchUOTResult)
    assert isinstance(b.info, BatchUOTInfo) and isinstance(b.info, ConvergenceInfo)
    assert b.plan is b.weights  # the transport name of the same tensor
    for res in (a, b):
        assert res.weights.shape == scores.shape
        assert {"method", "sweeps", "residual", "converged", "tol"} <= set(vars(res.info))


def test_a_wrong_potential_is_caught():
    """Negative control: the batch plan's potentials with ``log_v`` perturbed at one key."""
    scores = _scores(16, seed=1)
    res = batch_unbalanced_sinkhorn(scores, 0.9, tol=1e-12)
    g = res.log_v.clone()
    g[..., 3] += 1e-3
    wrong = BatchUOTResult(weights=res.weights, info=res.info, log_u=res.log_u, log_v=g)
    err = (_softmax_of_potentials(scores, wrong.log_potentials) - res.weights).abs().max()
    assert float(err) > 1e-6

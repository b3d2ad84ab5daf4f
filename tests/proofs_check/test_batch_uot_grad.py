"""Gradients of the batch unbalanced Sinkhorn plan (implicit differentiation, docs/theory.md §1).

Reference: central finite differences of the forward solve (``torch.autograd.gradcheck``,
float64), a different method from the adjoint linear system the backward solves. The
forward is run to ``tol = 1e-13``: ``log v`` is then within ``1e-13 / (1 - rho) <= 1e-12`` of
the fixed point, so with gradcheck's step ``1e-6`` the finite differences carry an error of
about ``1e-12 / 1e-6 = 1e-6`` relative at worst; ``atol = 1e-6``, ``rtol = 1e-4`` leave that
margin and are still far below the size of a wrong gradient (the final-sweep-only gradient
differs from the true one by O(1) at these sizes: tested below).
"""

import math

import pytest
import torch
from torch.autograd import gradcheck

from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn

F64 = torch.float64
TOL = 1e-13


def _outputs(rho, **kw):
    def fn(scores, *rest):
        if rest:
            kw["col_target"] = rest[0]
        res = batch_unbalanced_sinkhorn(scores, rho, tol=TOL, **kw)
        return res.weights, res.log_u, res.log_v

    return fn


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_gradcheck_scores_and_col_target(rho):
    gen = torch.Generator().manual_seed(0)
    n = 4
    scores = torch.randn(2, n, n, generator=gen, dtype=F64).requires_grad_()
    b = (0.5 + torch.rand(n, generator=gen, dtype=F64)).requires_grad_()  # broadcast
    assert gradcheck(_outputs(rho), (scores, b), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradcheck_masked_keys_and_unreachable_column():
    gen = torch.Generator().manual_seed(1)
    n = 5
    scores = torch.randn(n, n, generator=gen, dtype=F64)
    scores[:, 2] = -math.inf  # column 3 unreachable: its g is frozen at 0
    scores[4, 0] = -math.inf  # one masked key
    scores.requires_grad_()
    assert gradcheck(_outputs(0.7), (scores,), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradcheck_large_shifted_scores():
    # Row shifts of size 1e3 (exact in float64 at this grid) do not change the plan, so its
    # gradient must not blow up or vanish because of them.
    gen = torch.Generator().manual_seed(2)
    n = 4
    base = torch.round(torch.randn(n, n, generator=gen, dtype=F64) * 2**20) / 2**20
    scores = (base + 1e3 * torch.arange(n, dtype=F64)[:, None]).requires_grad_()
    assert gradcheck(lambda s: _outputs(0.8)(s)[0], (scores,), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradient_is_not_the_final_sweep_gradient():
    # Negative control for the reference: the wrong recipe the module docstring warns
    # against (converge without a graph, then differentiate one more sweep from the
    # detached log v) gives a gradient far from the implicit one, which gradcheck confirms.
    gen = torch.Generator().manual_seed(3)
    n, rho = 6, 0.9
    scores = torch.randn(n, n, generator=gen, dtype=F64).requires_grad_()
    weight = torch.randn(n, n, generator=gen, dtype=F64).tril()
    res = batch_unbalanced_sinkhorn(scores, rho, tol=TOL)
    (grad,) = torch.autograd.grad((res.weights * weight).sum(), scores)
    g = res.log_v.detach()
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    one_sweep = torch.softmax((scores + g).masked_fill(~causal, -math.inf), dim=-1)
    (wrong,) = torch.autograd.grad((one_sweep * weight).sum(), scores)
    assert torch.allclose(one_sweep, res.weights, atol=1e-10)  # same forward value
    gap = float((grad - wrong).abs().max())
    assert gap > 1e-2, gap  # measured 0.16-0.60 (seeds 3..7), gradient entries <= 0.44


def test_requires_grad_records_no_sweeps_and_warns_nothing():
    # Before: every sweep was recorded (2.2 GB and 94 s at n = 256, rho = 0.99) and torch
    # warned about converting a tensor that requires grad. Now the graph is one node.
    gen = torch.Generator().manual_seed(4)
    scores = torch.randn(32, 32, generator=gen, dtype=F64).requires_grad_()
    res = batch_unbalanced_sinkhorn(scores, 0.99)  # warnings are errors in the test run
    assert res.info.sweeps > 100
    node = res.weights.grad_fn
    assert "ImplicitBatchUOT" in type(node).__name__
    plain = batch_unbalanced_sinkhorn(scores.detach(), 0.99)
    assert torch.equal(res.weights.detach(), plain.weights)  # same forward, with or without grad
    assert not plain.weights.requires_grad


def test_float32_and_half_gradients_match_float64():
    gen = torch.Generator().manual_seed(5)
    n, rho = 12, 0.8
    s64 = torch.randn(n, n, generator=gen, dtype=F64)
    weight = torch.randn(n, n, generator=gen, dtype=F64).tril()
    grads = {}
    for dtype in (F64, torch.float32, torch.bfloat16):
        s = s64.to(dtype).requires_grad_()
        res = batch_unbalanced_sinkhorn(s, rho)
        (grads[dtype],) = torch.autograd.grad((res.weights.double() * weight).sum(), s)
        assert grads[dtype].dtype == dtype
    # float32: forward to tol 1e-5 (log v within 5e-5), backward solve with condition number
    # <= 1/(1 - rho) = 5 in float32: gradient entries of size ~1 agree to ~1e-4; 1e-3 margin.
    assert (grads[torch.float32].double() - grads[F64]).abs().max() <= 1e-3
    # bfloat16 inputs: the scores themselves are rounded to 2^-8 relative; 0.1 absolute.
    assert (grads[torch.bfloat16].double() - grads[F64]).abs().max() <= 0.1

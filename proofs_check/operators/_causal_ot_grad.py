"""Implicit differentiation of the causal OT operator through the Lemma 2.2 fixed point.

Write ``Y = S + logV`` and ``Psi(Y) = -rho * log cumsum_rows(rowsoftmax(Y))`` (live entries).
The forward solution satisfies ``logV = rho * logV + Psi(S + logV)`` and the output is
``A = rowsoftmax(S + logV)``. For an upstream gradient ``g = dL/dA`` the adjoint ``u = dL/dlogV``
solves the linear fixed point

    u = J_A^T g + rho * u + J_Psi^T u,

and then ``dL/dS = (1 - rho) * u`` (because ``dL/dS = J_A^T g + J_Psi^T u``). The adjoint is
iterated with the same contraction (about ``rho`` per step) as the forward sweeps, Anderson
mixed, each step one vector-Jacobian product of ``Psi``. So whatever forward method ran, the
gradient is that of the exact operator, to the adjoint tolerance (non-convergence warns).
"""

from __future__ import annotations

import warnings

import torch

from ._causal_ot_common import ConvergenceWarning

__all__ = ["attach_implicit_grad"]


def _psi_and_a(y: torch.Tensor, live: torch.Tensor, rho: float):
    a = torch.softmax(y, dim=-1)
    cp = torch.cumsum(a, dim=-2)
    tiny = torch.finfo(a.dtype).tiny
    one = torch.ones((), dtype=a.dtype, device=a.device)
    psi = -rho * torch.log(torch.where(live, cp.clamp_min(tiny), one))
    return psi, a


def _adjoint(g, s_masked, log_v, live, rho, tol, max_iter, memory=6):
    with torch.enable_grad():
        y = (s_masked + log_v).detach().requires_grad_(True)
        psi, a = _psi_and_a(y, live, rho)
        (ga,) = torch.autograd.grad(a, y, g, retain_graph=True)
        bsz = g.shape[0]
        u = ga.clone()
        dx_hist: list[torch.Tensor] = []
        df_hist: list[torch.Tensor] = []
        prev_u = prev_f = None
        res = float("inf")
        scale = max(ga.abs().max().item(), 1e-300)
        for _ in range(max_iter):
            (gp,) = torch.autograd.grad(psi, y, u, retain_graph=True)
            gu = ga + rho * u + gp
            f = gu - u
            res = f.abs().max().item() / scale
            if res <= tol:
                u = gu
                break
            if prev_u is not None:
                dx_hist.append((u - prev_u).reshape(bsz, -1))
                df_hist.append((f - prev_f).reshape(bsz, -1))
                if len(dx_hist) > memory:
                    dx_hist.pop(0)
                    df_hist.pop(0)
            prev_u, prev_f = u, f
            if not df_hist:
                u = gu
                continue
            df = torch.stack(df_hist, dim=-1)
            dxm = torch.stack(dx_hist, dim=-1)
            gram = df.transpose(1, 2) @ df
            sc = gram.diagonal(dim1=1, dim2=2).amax(dim=-1).clamp_min(1e-300)
            eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
            gram = gram + (1e-12 * sc)[:, None, None] * eye
            gamma = torch.linalg.solve(gram, df.transpose(1, 2) @ f.reshape(bsz, -1, 1))
            u = gu - ((dxm + df) @ gamma).reshape_as(u)
        else:
            warnings.warn(
                f"causal_ot_attention backward: adjoint fixed point did not reach tol={tol:g} "
                f"in {max_iter} iterations (relative residual {res:.3e})",
                ConvergenceWarning,
                stacklevel=4,
            )
    return ((1.0 - rho) * u).masked_fill(~live, 0.0)


class _ImplicitCausalOT(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, weights, s_masked, log_v, live, rho, tol, max_iter):
        ctx.save_for_backward(s_masked, log_v, live)
        ctx.rho, ctx.tol, ctx.max_iter = rho, tol, max_iter
        return weights.clone()

    @staticmethod
    def backward(ctx, g):
        s_masked, log_v, live = ctx.saved_tensors
        gs = _adjoint(g, s_masked, log_v, live, ctx.rho, ctx.tol, ctx.max_iter)
        return gs, None, None, None, None, None, None, None


def attach_implicit_grad(scores, weights, s_masked, log_v, live, rho, tol, max_iter):
    """Return ``weights`` (values unchanged) carrying the implicit gradient w.r.t. ``scores``.

    All tensors are ``(B, n, n)`` in the compute dtype; ``scores`` is the differentiable input.
    """
    return _ImplicitCausalOT.apply(scores, weights, s_masked, log_v, live, rho, tol, max_iter)

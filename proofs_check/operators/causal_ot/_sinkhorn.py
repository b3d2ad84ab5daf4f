"""All-rows-at-once iterations for the causal OT operator (docs/theory.md §2, Lemma 2.2).

One plain sweep, on the live causal entries (``j <= l``, finite score), is

    A = rowsoftmax(S + logV);  C' = cumsum(A, over rows);  logV <- rho * (logV - log C'),

started from ``logV = 0``; its fixed point is ``logV = -kappa log C'``, the operator of
Lemma 2.1. The increment ``Phi(logV) - logV = -(1 - rho) (logV + kappa log C')`` is the
residual; plain sweeps shrink it by about ``rho`` each. ``anderson`` applies type-II Anderson
mixing (per batch element, memory ``m``) to the same map, with a restart when the mixed step
makes the residual grow.
"""

from __future__ import annotations

import torch

__all__ = ["anderson", "sinkhorn", "sweep"]


def sweep(
    s_masked: torch.Tensor, live: torch.Tensor, log_v: torch.Tensor, rho: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """One plain sweep ``Phi``: returns (``Phi(logV)``, ``A = rowsoftmax(S + logV)``).

    ``s_masked`` is ``-inf`` on dead entries, ``log_v`` is zero there (and stays zero).
    """
    a = torch.softmax(s_masked + log_v, dim=-1)  # (B, n, n), dead entries exactly 0
    cp = torch.cumsum(a, dim=-2)  # C'[l, j] = sum_{k <= l} A[k, j]
    tiny = torch.finfo(a.dtype).tiny  # an underflowed live entry: treat C' as tiny, not 0
    new = torch.log(cp.clamp_min_(tiny)).sub_(log_v).mul_(-rho)  # rho (logV - log C')
    new = torch.where(live, new, torch.zeros((), dtype=new.dtype, device=new.device))
    return new, a


def sinkhorn(
    s_masked: torch.Tensor, live: torch.Tensor, rho: float, tol: float, max_iter: int
) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """Plain Lemma 2.2 sweeps until the sup-norm increment is ``<= tol``.

    Returns (A, logV, sweeps, residual): ``A = rowsoftmax(S + logV)`` and ``residual`` the
    increment at that ``logV``, however the sweeps stop (tolerance met, stalled at rounding
    level, or ``max_iter``), so that the weights and the log-potentials returned belong
    together.
    """
    log_v = torch.zeros_like(s_masked)
    res = float("inf")
    stall = _Stall(s_masked.dtype)
    k = 0
    a = None
    for k in range(1, max_iter + 1):
        new, a = sweep(s_masked, live, log_v, rho)
        res = (new - log_v).abs().max().item()
        if res <= tol or stall.update(res, new) or k == max_iter:
            break
        log_v = new
    return a, log_v, k, res


class _Stall:
    """Detects increments stuck at the dtype's rounding level (a ``tol`` below resolution).

    Stalled: the increment has been below ``16 eps (1 + max |logV|)`` (rounding level) for
    ``patience`` sweeps. The caller then stops, unconverged, instead of sweeping to
    ``max_iter`` (``tol = 1e-300`` with ``max_iter = 10**12`` would never end).
    """

    def __init__(self, dtype: torch.dtype, patience: int = 20) -> None:
        self.floor = 16 * torch.finfo(dtype).eps
        self.patience = patience
        self.count = 0

    def update(self, res: float, log_v: torch.Tensor) -> bool:
        if res <= self.floor * (1.0 + log_v.abs().max().item()):
            self.count += 1
        return self.count >= self.patience


def anderson(
    s_masked: torch.Tensor,
    live: torch.Tensor,
    rho: float,
    tol: float,
    max_iter: int,
    memory: int = 6,
    reg: float = 1e-12,
) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """Anderson-accelerated Lemma 2.2 (type II, per batch element).

    With ``f_k = Phi(x_k) - x_k`` and the last ``m`` differences ``dX, dF``, the next iterate
    is ``Phi(x_k) - (dX + dF) gamma`` with ``gamma`` minimising ``|f_k - dF gamma|_2``
    (Tikhonov-regularised normal equations). Each iteration costs one sweep.
    Returns (A, logV, sweeps, residual) like :func:`sinkhorn` (``A`` and ``residual`` of the
    returned ``logV``, also at ``max_iter``).
    """
    bsz = s_masked.shape[0]
    x = torch.zeros_like(s_masked)
    dx_hist: list[torch.Tensor] = []
    df_hist: list[torch.Tensor] = []
    prev_x = prev_f = None
    best = float("inf")
    res = float("inf")
    stall = _Stall(s_masked.dtype)
    k = 0
    a = None
    for k in range(1, max_iter + 1):
        gx, a = sweep(s_masked, live, x, rho)
        f = gx - x
        res = f.abs().max().item()
        if res <= tol or stall.update(res, x) or k == max_iter:
            break
        if prev_x is not None:
            dx_hist.append((x - prev_x).reshape(bsz, -1))
            df_hist.append((f - prev_f).reshape(bsz, -1))
            if len(dx_hist) > memory:
                dx_hist.pop(0)
                df_hist.pop(0)
        if res > 1e3 * best:  # mixing went astray: restart from the plain step
            dx_hist.clear()
            df_hist.clear()
        best = min(best, res)
        prev_x, prev_f = x, f
        if not df_hist:
            x = gx
            continue
        df = torch.stack(df_hist, dim=-1)  # (B, N, m)
        dxm = torch.stack(dx_hist, dim=-1)
        gram = df.transpose(1, 2) @ df  # (B, m, m)
        scale = gram.diagonal(dim1=1, dim2=2).amax(dim=-1).clamp_min(1e-300)
        eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
        gram = gram + (reg * scale)[:, None, None] * eye
        rhs = df.transpose(1, 2) @ f.reshape(bsz, -1, 1)  # (B, m, 1)
        gamma = torch.linalg.solve(gram, rhs)
        x = gx - ((dxm + df) @ gamma).reshape_as(x)
    return a, x, k, res

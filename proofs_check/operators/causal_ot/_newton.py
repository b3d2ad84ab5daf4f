"""Pure-torch row-by-row Newton solver and exact backward (docs/theory.md §2, Lemma 2.1).

The readable reference of the compiled kernel (``_compiled``: same equations, other code and
arithmetic), and the solver wherever the kernel does not run (other devices, no compiler).

Row ``l`` solves, with ``kappa = rho/(1-rho)`` and the column masses ``C[l-1, j]`` of the
earlier rows,

    a_j * (C_j + a_j)^kappa = w_j / Z,   sum_j a_j = 1.

In the log variables ``x_j = log a_j``, ``zeta = log Z``, ``t_j = s_j - zeta`` each key solves
the scalar equation ``h_j(x) = x + kappa * log(C_j + e^x) = t_j``; ``h_j`` is convex and
increasing with ``h_j' = 1 + kappa * a/(C_j + a)`` in ``[1, 1 + kappa]``, so Newton converges
from any start (monotonically after its first step). The row normaliser is the root of
``u(zeta) = log sum_j exp(x_j(zeta))``, decreasing with slope in ``[-1, -(1 - rho)]``: from any
``zeta`` the root lies between ``zeta + u`` and ``zeta + u/(1 - rho)``, which brackets a
safeguarded Newton iteration. Everything is vectorised over the batch; rows run in order
(row ``l`` needs only rows ``< l``), which is what makes the operator prefix-consistent.

Backward (:func:`reverse_sweep_backward`). Differentiating row ``l``'s conditions with
``D_j = C'[l, j] = C[l-1, j] + a_j``, ``g_j = 1 + kappa a_j / D_j``, ``p_j = a_j / g_j`` and
``W = sum p``::

    da_j = p_j (e_j - sum_k p_k e_k / W),   e_j = ds_j - kappa dC[l-1, j] / D_j.

The map ``e -> da`` is symmetric, so for the total gradient ``abar`` on row ``l`` (upstream
``dL/da[l, j]`` plus ``G_j``, the gradient on ``C[l-1, j]`` carried back from rows ``> l``,
because ``C[l'-1, j]`` sums ``a[k, j]`` over ``k < l'``)::

    sbar_j = v_j - p_j sum(v) / W,   v_j = p_j abar_j,     G_j <- G_j - kappa sbar_j / D_j.
"""

from __future__ import annotations

import math

import torch

__all__ = ["reverse_sweep_backward", "solve_dense", "solve_row"]


def solve_row(
    s: torch.Tensor,
    log_c: torch.Tensor,
    live: torch.Tensor | None,
    rho: float,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """Solve one row of Lemma 2.1 for a batch.

    Parameters
    ----------
    s : (B, m) scores of row ``l = m`` over keys ``1..m`` (dead entries: any finite value).
    log_c : (B, m) ``log C[l-1, j]`` (``-inf`` where the column has no mass yet, e.g. ``j = l``).
    live : (B, m) bool or None (all live); dead keys get exactly zero weight.
    rho : float in (0, 1).
    tol : stop when the largest Newton step in ``zeta`` and in ``x`` is ``<= tol``.
    max_iter : cap on the Newton steps of the row, the joint ones and the safeguarded
        iteration's together (one more only where the joint steps broke down at the cap).

    Returns
    -------
    a : (B, m) row weights (sum to one up to rounding), zeta : (B,) ``log Z``,
    iterations used, last step size.

    Notes
    -----
    First a plain joint Newton iteration on ``(x, zeta)`` (the KKT system of the strictly
    convex ``F_l``; one Schur complement per step, O(m) work)::

        g_j = 1 + kappa a_j/(C_j + a_j),  r_j = x_j + kappa log(C_j + a_j) + zeta - s_j,
        dzeta = (sum a - 1 - sum a_j r_j/g_j) / sum(a_j/g_j),  dx_j = -(r_j + dzeta)/g_j.

    If that has not converged after a few steps, the safeguarded nested iteration
    (:func:`_solve_row_safe`) takes over from where it stopped.
    """
    kappa = rho / (1.0 - rho)
    if live is not None:
        s = torch.where(live, s, torch.zeros((), dtype=s.dtype, device=s.device))
    # Warm start from the previous row's potentials: a key that already has mass keeps
    # logV = -kappa log C_j (its C' barely moves), x_j = s_j - kappa log C_j - zeta; a fresh key
    # (C_j = 0, e.g. the diagonal) solves x = (1 - rho)(s_j - zeta) exactly. zeta is then set by
    # a few scalar Newton steps on log sum_j a_j(zeta) = 0 for this explicit approximation.
    old_part = s - kappa * log_c  # -inf... only where C_j = 0 -> +inf; handled by `fresh`
    fresh = torch.isinf(log_c)
    if live is not None:
        fresh_l, old_l = fresh & live, (~fresh) & live
    else:
        fresh_l, old_l = fresh, ~fresh
    neg = torch.full_like(s, float("-inf"))
    p_old = torch.logsumexp(torch.where(old_l, old_part, neg), dim=-1, keepdim=True)
    s_fresh = torch.where(fresh_l, s, neg)
    zeta = torch.logaddexp(p_old, torch.logsumexp(s_fresh, dim=-1, keepdim=True))
    for _ in range(3):
        e_old = torch.exp(p_old - zeta)  # mass of the old keys
        e_new = torch.exp((1.0 - rho) * (s_fresh - zeta)).sum(-1, keepdim=True)
        tot = e_old + e_new
        zeta = zeta + torch.log(tot) * tot / (e_old + (1.0 - rho) * e_new)
    t = s - zeta
    x = torch.where(fresh, t * (1.0 - rho), t - kappa * log_c)
    step = float("inf")
    fast = min(max_iter, 12)
    it = 0
    for it in range(1, fast + 1):  # noqa: B007 - the count is returned
        log_d = torch.logaddexp(log_c, x)  # log(C_j + a_j)
        a = torch.exp(x)
        ginv = 1.0 / (1.0 + kappa * torch.exp(x - log_d))  # 1/g_j
        r = x + kappa * log_d - t
        if live is not None:
            a = a.masked_fill(~live, 0.0)
        ag = a * ginv
        dz = (a.sum(-1, keepdim=True) - 1.0 - (ag * r).sum(-1, keepdim=True)) / ag.sum(
            -1, keepdim=True
        )
        dx = (r + dz) * ginv
        x = x - dx
        zeta = zeta + dz
        t = s - zeta
        if live is not None:
            dx = dx.masked_fill(~live, 0.0)
        step = torch.maximum(dx.abs().amax(), dz.abs().amax()).item()
        if step <= tol:
            break
        if not math.isfinite(step):
            break
    # the safeguarded iteration gets what is left of max_iter (Newton steps per row in all,
    # as the compiled kernel counts them); a fast loop that broke down (non-finite step)
    # always gets at least one safeguarded step, which restarts from a finite zeta
    left = max_iter - it
    if not step <= tol and (left > 0 or not math.isfinite(step)):
        x, zeta, it2, step = _solve_row_safe(s, log_c, live, rho, tol, max(left, 1),
                                             zeta.squeeze(-1))
        it = it + it2
        zeta = zeta.unsqueeze(-1)
        t = s - zeta
    # final inner polish at the final zeta, then normalise (removes the O(step) sum error)
    log_d = torch.logaddexp(log_c, x)
    x = x - (x + kappa * log_d - t) / (1.0 + kappa * torch.exp(x - log_d))
    xl = x if live is None else x.masked_fill(~live, float("-inf"))
    return torch.softmax(xl, dim=-1), zeta.squeeze(-1), it, step


def _solve_row_safe(
    s: torch.Tensor,
    log_c: torch.Tensor,
    live: torch.Tensor | None,
    rho: float,
    tol: float,
    max_iter: int,
    zeta: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """Nested safeguarded iteration: exact inner Newton per key, bracketed Newton on zeta."""
    kappa = rho / (1.0 - rho)
    one_m_rho = 1.0 - rho
    neg_inf = float("-inf")
    zeta = torch.where(torch.isfinite(zeta), zeta, torch.zeros_like(zeta))
    lo = torch.full_like(zeta, neg_inf)
    hi = torch.full_like(zeta, float("inf"))
    t = s - zeta.unsqueeze(-1)
    x = torch.minimum(t * one_m_rho, t - kappa * log_c)
    step = float("inf")
    best = float("inf")
    stall = 0
    floor = 1e3 * torch.finfo(s.dtype).eps
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        # inner Newton on every key for the current zeta (warm-started, so 1-3 steps)
        inner = float("inf")
        for _ in range(50):
            log_d = torch.logaddexp(log_c, x)  # log(C_j + a_j)
            r = x + kappa * log_d - t
            g = 1.0 + kappa * torch.exp(x - log_d)  # h_j'(x) in [1, 1 + kappa]
            dx = r / g
            x = x - dx
            if live is not None:
                dx = dx.masked_fill(~live, 0.0)
            inner = dx.abs().max().item()
            if inner <= tol:
                break
        log_d = torch.logaddexp(log_c, x)
        g = 1.0 + kappa * torch.exp(x - log_d)
        xl = x if live is None else x.masked_fill(~live, neg_inf)
        u = torch.logsumexp(xl, dim=-1)  # log sum_j a_j, want 0
        a = torch.exp(xl - u.unsqueeze(-1))  # normalised weights
        slope = (a / g).sum(dim=-1)  # -u'(zeta), in [1 - rho, 1]
        # bracket from the slope bounds, then a Newton step kept inside it
        b1 = zeta + u
        b2 = zeta + u / one_m_rho
        lo = torch.maximum(lo, torch.minimum(b1, b2))
        hi = torch.minimum(hi, torch.maximum(b1, b2))
        new = zeta + u / slope
        bad = (new < lo) | (new > hi)
        if bool(bad.any()):
            new = torch.where(bad, 0.5 * (lo + hi), new)
        dz = new - zeta
        zeta = new
        t = s - zeta.unsqueeze(-1)
        x = x - dz.unsqueeze(-1) / g  # first-order prediction of x_j(zeta)
        step = max(dz.abs().max().item(), inner)
        if step <= tol:
            break
        # a tol below the dtype's resolution: the step stalls at rounding level; stop there
        # (unconverged) instead of iterating to max_iter
        scale = 1.0 + zeta.abs().max().item()
        stall = stall + 1 if (step >= best and step <= floor * scale) else 0
        if stall >= 3:
            break
        best = min(best, step)
    return x, zeta, it, step


def solve_dense(
    s: torch.Tensor,
    live: torch.Tensor,
    rho: float,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, int, float]:
    """All rows of a ``(B, n, n)`` score tensor, in order. Returns weights, max iters, max step."""
    bsz, n, _ = s.shape
    out = torch.zeros_like(s)
    col = torch.zeros(bsz, n, dtype=s.dtype, device=s.device)  # C[l-1, :]
    all_live = int(live.sum()) == bsz * n * (n + 1) // 2
    iters = 0
    step = 0.0
    for i in range(n):
        m = i + 1
        row_live = None if all_live else live[:, i, :m]
        with torch.no_grad():
            log_c = torch.log(col[:, :m])
        a, _, it, st = solve_row(s[:, i, :m], log_c, row_live, rho, tol, max_iter)
        out[:, i, :m] = a
        col[:, :m] += a
        iters = max(iters, it)
        step = max(step, st)
    return out, iters, step


def reverse_sweep_backward(a: torch.Tensor, g: torch.Tensor, rho: float) -> torch.Tensor:
    """``dL/ds`` from weights ``a`` and ``g = dL/da`` (both ``(B, n, n)``): the reverse row
    sweep of the module docstring, on any device."""
    kappa = rho / (1.0 - rho)
    n = a.shape[-1]
    cp = torch.cumsum(a, dim=-2)  # (B, n, n): C'[l, j]
    pos = a > 0
    dsafe = torch.where(pos, cp, torch.ones((), dtype=a.dtype, device=a.device))
    p = torch.where(pos, a / (1.0 + kappa * a / dsafe), torch.zeros((), dtype=a.dtype,
                                                                     device=a.device))
    ginc = torch.zeros_like(a[..., 0, :])  # (B, n): G, the gradient on C[l-1, :]
    out = torch.zeros_like(a)
    for i in range(n - 1, -1, -1):
        pr = p[..., i, : i + 1]
        v = pr * (g[..., i, : i + 1] + ginc[..., : i + 1])
        w_sum = pr.sum(-1, keepdim=True)
        sbar = v - pr * (v.sum(-1, keepdim=True) / w_sum)
        out[..., i, : i + 1] = sbar
        ginc[..., : i + 1] -= kappa * sbar / dsafe[..., i, : i + 1]
    return out

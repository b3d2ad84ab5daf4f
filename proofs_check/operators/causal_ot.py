r"""The prefix-consistent causal optimal-transport attention operator (docs/theory.md §1-§2).

Row ``l`` of the operator (queries ``l = 1..n``, keys ``j <= l``) minimises over the simplex

.. math::

    F_l(a) = \sum_j a_j (\log a_j - s_{lj}) + \kappa \sum_j \phi(C_{l-1,j} + a_j),
    \qquad \phi(x) = x \log x - x,\quad \kappa = \rho / (1 - \rho),

with ``C[l-1, j] = sum_{k=j}^{l-1} a[k, j]`` the mass key ``j`` received from earlier rows.
Its minimiser is the fixed point of Lemma 2.1, ``a_j (C_j + a_j)^kappa = e^{s_j} / Z_l``,
``sum_j a_j = 1``. Because row ``l`` depends only on rows ``< l``, the operator is
prefix-consistent (Proposition 2.3); ``rho = 0`` is softmax (Proposition 2.4).

Methods
-------
``"newton"`` (default; ``"exact"`` is a deprecated alias kept for existing callers)
    Lemma 2.1 row by row: each row's optimality conditions solved by a joint Newton iteration
    on ``(log a, log Z_l)`` from a closed-form start, rows in order. On CPU (float32/float64)
    a compiled kernel runs it, one (batch, head) slice per thread; elsewhere, or if the kernel
    cannot be built, a pure-torch version of the same solver. ``info.sweeps`` is the largest
    number of Newton steps a row needed.
``"sinkhorn"``
    Lemma 2.2 in the log domain: all rows at once, ``A = rowsoftmax(S + logV)``,
    ``C' = cumsum_rows(A)``, ``logV <- rho (logV - log C')``; about ``rho`` contraction a sweep.
``"anderson"``
    The same sweeps with type-II Anderson mixing (memory 6): fewer sweeps than ``"sinkhorn"``
    for ``rho >= 0.9``, far more work than ``"newton"``; kept as a second, independent
    all-rows solver for cross-checks.
``"auto"``
    ``"newton"``.

Whatever the method, scores are first shifted by their row maximum over the live keys
(Proposition 2.4), so large finite scores neither overflow nor slow the iterations.
The ground truth is :func:`causal_ot_exact_mp` (Lemma 2.1 in mpmath); the O(n)-memory
streaming solver is :func:`stream_causal_ot`.

Autograd: the gradient is exact and independent of the forward method: each row's optimality
conditions are differentiated and the rows swept in reverse (``_causal_ot_compiled``).
"""

from __future__ import annotations

import warnings

import torch

from ._causal_ot_common import (
    SCORE_VALUE_ERRORS,
    CausalOTResult,
    ConvergenceInfo,
    ConvergenceWarning,
    causal_softmax,
    check_score_values,
    compute_dtype,
    default_tol,
    live_mask,
    shift_rows,
    validate_rho,
    validate_score_layout,
    validate_tol,
)
from ._causal_ot_compiled import (
    CompiledFallbackWarning,
    compiled_backward,
    compiled_forward,
    load_extension,
    reverse_sweep_backward,
)
from ._causal_ot_exact import exact_dense
from ._causal_ot_mp import causal_ot_exact_mp
from ._causal_ot_sinkhorn import anderson, sinkhorn
from ._causal_ot_stream import stream_causal_ot

__all__ = [
    "METHODS",
    "CausalOTResult",
    "CompiledFallbackWarning",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "causal_ot_attention",
    "causal_ot_exact_mp",
    "stream_causal_ot",
]

METHODS = ("auto", "newton", "sinkhorn", "anderson", "exact")
_ALIASES = {"auto": "newton", "exact": "newton"}  # "exact": deprecated name of "newton"

_DEFAULT_MAX_ITER = {"sinkhorn": 100_000, "anderson": 2_000, "newton": 100}


def _use_compiled(s: torch.Tensor) -> bool:
    return s.device.type == "cpu" and s.dtype in (torch.float32, torch.float64) and (
        load_extension() is not None
    )


def _solve(s, rho, chosen, tol_v, iters):
    """Forward solve of ``(B, n, n)`` scores (no grad). Returns weights, log_v or None, stats."""
    if chosen == "newton" and _use_compiled(s):
        w, sweeps, res, ok, bad = compiled_forward(s, rho, tol_v, iters)
        if bad:
            raise ValueError(SCORE_VALUE_ERRORS[bad])
        return w, None, sweeps, res, ok and res <= tol_v
    check_score_values(s)
    live = live_mask(s)
    s_shift, live = shift_rows(s, live)
    if chosen == "sinkhorn":
        w, log_v, sweeps, res = sinkhorn(s_shift, live, rho, tol_v, iters)
    elif chosen == "anderson":
        w, log_v, sweeps, res = anderson(s_shift, live, rho, tol_v, iters)
    else:
        w, sweeps, res = exact_dense(s_shift, live, rho, tol_v, iters)
        log_v = None
    return w, log_v, sweeps, res, res <= tol_v


class _CausalOTFunction(torch.autograd.Function):
    """Forward: the solve; backward: the exact reverse row sweep (depends on the weights only)."""

    @staticmethod
    def forward(ctx, s, rho, chosen, tol_v, iters, holder):
        w, log_v, sweeps, res, ok = _solve(s, rho, chosen, tol_v, iters)
        holder.extend([log_v, sweeps, res, ok])
        ctx.rho = rho
        ctx.save_for_backward(w)
        return w

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        gs = None
        if _use_compiled(w):
            gs = compiled_backward(w, g, ctx.rho)
        if gs is None:
            gs = reverse_sweep_backward(w, g.to(w.dtype), ctx.rho)
        return gs, None, None, None, None, None


def causal_ot_attention(
    scores: torch.Tensor,
    rho: float,
    *,
    method: str = "auto",
    tol: float | None = None,
    max_iter: int | None = None,
) -> CausalOTResult:
    r"""Prefix-consistent causal OT attention weights (docs/theory.md §2, Lemmas 2.1-2.2).

    Parameters
    ----------
    scores : torch.Tensor, shape ``(..., n, n)``
        Attention scores ``s[l, j]`` (row ``l`` is index ``l-1``). Entries above the diagonal
        are ignored (they may hold anything); ``-inf`` entries on or below it are masked keys:
        they get weight exactly 0 and never count as mass, i.e. they behave like removed keys.
        float16/bfloat16 are computed in float32 and cast back.
    rho : float in ``[0, 1)``
        Balancing strength; ``kappa = rho/(1-rho)``. ``rho = 0`` short-circuits to the masked
        softmax code path (bit-identical to ``torch.softmax`` on the masked scores).
    method : ``"auto"``, ``"newton"``, ``"sinkhorn"``, ``"anderson"`` (or ``"exact"``)
        See the module docstring. ``"auto"`` means ``"newton"``; ``"exact"`` is the deprecated
        name of ``"newton"`` (same solver; ``info.method`` says ``"newton"``).
    tol : float, optional
        A positive finite number; default ``1e-10`` for float64, ``1e-5`` for float32
        (float32 stalls near ``5e-7`` in the log-potentials). Meaning per method: see
        :class:`ConvergenceInfo`. A ``tol`` below the dtype's resolution is not met: the
        solvers stop when their steps stall at rounding level and report non-convergence.
    max_iter : int, optional
        Sweeps (``sinkhorn``: 100000, ``anderson``: 2000) or Newton iterations per row
        (``newton``: 100). Hitting it issues a :class:`ConvergenceWarning` and sets
        ``info.converged = False``.

    Returns
    -------
    CausalOTResult
        ``weights`` (same shape, dtype, device as ``scores``; rows sum to 1, upper triangle
        and masked keys exactly 0), ``info``, ``log_potentials`` (``logV = -kappa log C'``,
        zero at ``rho = 0``).

    Notes
    -----
    Autograd: when ``scores`` requires grad, the weights carry the exact gradient of the
    fixed point (whatever the forward method): each row's optimality conditions are
    differentiated and the rows swept in reverse, O(n^2) work without iterations (compiled
    on CPU). It is the gradient at the computed weights, so its error follows the forward's
    ``tol``. No gradient w.r.t. ``rho``; no double backward.

    Raises
    ------
    ValueError
        Fewer than 2 dims, non-square, ``n = 0``, non-float dtype, NaN or ``+inf`` scores on or
        below the diagonal, a row with every key masked, scores on the ``meta`` device,
        ``rho`` outside ``[0, 1)`` or not finite, unknown ``method``, ``tol`` not a positive
        finite number (bools refused), or ``max_iter < 1``.

    Examples
    --------
    Rows sum to one and ``rho = 0`` is softmax:

    >>> import torch
    >>> s = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> res = causal_ot_attention(s, 0.5)
    >>> bool(torch.allclose(res.weights.sum(-1), torch.ones(5, dtype=torch.float64)))
    True
    >>> sm = torch.softmax(s.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf")), -1)
    >>> torch.equal(causal_ot_attention(s, 0.0).weights, sm)
    True
    """
    validate_score_layout(scores)
    rho = validate_rho(rho)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    tol = validate_tol(tol)
    if max_iter is not None and (
        not isinstance(max_iter, int) or isinstance(max_iter, bool) or max_iter < 1
    ):
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")

    out_dtype = scores.dtype
    cdtype = compute_dtype(out_dtype)
    shape = scores.shape
    n = shape[-1]
    s = scores.to(cdtype).reshape(-1, n, n)  # (B, n, n)
    tol_v = tol if tol is not None else default_tol(cdtype)

    if rho == 0.0:
        check_score_values(s)
        w = causal_softmax(s, live_mask(s.detach()))
        info = ConvergenceInfo("softmax", 0, 0.0, True, tol_v)
        # kappa = 0: logV = -kappa log C' is exactly zero (made on first access)
        return CausalOTResult(w.reshape(shape).to(out_dtype), info,
                              make_log_potentials=lambda: torch.zeros(shape, dtype=cdtype,
                                                                      device=w.device))

    chosen = _ALIASES.get(method, method)
    iters = max_iter if max_iter is not None else _DEFAULT_MAX_ITER[chosen]
    if s.requires_grad and torch.is_grad_enabled():
        holder: list = []
        w = _CausalOTFunction.apply(s, rho, chosen, tol_v, iters, holder)
        log_v, sweeps, res, converged = holder
    else:
        with torch.no_grad():
            w, log_v, sweeps, res, converged = _solve(s.detach(), rho, chosen, tol_v, iters)
    if not converged:
        warnings.warn(
            f"causal_ot_attention(method={chosen!r}, rho={rho}) stopped after {sweeps} "
            f"iterations with residual {res:.3e} > tol={tol_v:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    info = ConvergenceInfo(chosen, int(sweeps), float(res), bool(converged), tol_v)
    kappa = rho / (1.0 - rho)
    weights = w.reshape(shape).to(out_dtype)
    if log_v is not None:
        return CausalOTResult(weights, info, log_v.reshape(shape))
    wd, sd = w.detach(), s.detach()

    def make_log_potentials() -> torch.Tensor:
        live = live_mask(sd)
        cp = torch.cumsum(wd, dim=-2).clamp_min(torch.finfo(cdtype).tiny)
        zero = torch.zeros((), dtype=cdtype, device=wd.device)
        return torch.where(live, -kappa * torch.log(cp), zero).reshape(shape)

    return CausalOTResult(weights, info, make_log_potentials=make_log_potentials)

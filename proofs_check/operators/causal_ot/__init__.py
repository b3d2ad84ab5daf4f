r"""The prefix-consistent causal optimal-transport attention operator (docs/theory.md §1-§2).

Row ``l`` (queries ``l = 1..n``, keys ``j <= l``) minimises over the simplex

.. math::

    F_l(a) = \sum_j a_j (\log a_j - s_{lj}) + \kappa \sum_j \phi(C_{l-1,j} + a_j),
    \qquad \phi(x) = x \log x - x,\quad \kappa = \rho / (1 - \rho),

with ``C[l-1, j] = sum_{k=j}^{l-1} a[k, j]`` the mass key ``j`` received from earlier rows.
Its minimiser is the fixed point of Lemma 2.1, ``a_j (C_j + a_j)^kappa = e^{s_j} / Z_l``,
``sum_j a_j = 1``; row ``l`` depends only on rows ``< l`` (prefix-consistent, Proposition
2.3), and ``rho = 0`` is softmax (Proposition 2.4).

Methods (``method=``):

``"newton"`` (and ``"auto"``)
    Lemma 2.1 row by row, a joint Newton iteration on ``(log a, log Z_l)`` per row. On CPU
    (float32/float64) the compiled kernel (``_compiled``, sources in ``csrc/``); on CUDA the
    Triton kernels (``_triton``, ``_triton_kernels``); elsewhere, or where these cannot run
    (one warning says why), the pure-torch solver (``_newton``).
``"sinkhorn"``
    Lemma 2.2 sweeps over all rows at once, in the log domain (``_sinkhorn``).
``"anderson"``
    The same sweeps with Anderson mixing: a second, independent all-rows solver.

The gradient is exact whatever the method (the rows' optimality conditions differentiated and
swept in reverse). :func:`causal_ot_exact_mp` is the ground truth in mpmath;
:func:`stream_causal_ot` yields the rows with O(n) memory.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from . import _compiled, _triton
from ._common import (
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
    validate_max_iter,
    validate_rho,
    validate_score_layout,
    validate_tol,
)
from ._compiled import CompiledFallbackWarning
from ._mp import causal_ot_exact_mp
from ._newton import reverse_sweep_backward, solve_dense
from ._sinkhorn import anderson, sinkhorn
from ._stream import stream_causal_ot
from ._triton import TritonFallbackWarning

__all__ = [
    "METHODS",
    "CausalOTResult",
    "CompiledFallbackWarning",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "TritonFallbackWarning",
    "causal_ot_attention",
    "causal_ot_exact_mp",
    "stream_causal_ot",
]

METHODS = ("auto", "newton", "sinkhorn", "anderson")

# Sweeps (sinkhorn: 100000, anderson: 2000) or Newton steps per row (newton: 100).
_DEFAULT_MAX_ITER = {"sinkhorn": 100_000, "anderson": 2_000, "newton": 100}


@dataclass(frozen=True)
class _Solved:
    """A forward solve of ``(B, n, n)`` scores: weights and how it ended."""

    weights: torch.Tensor
    log_v: torch.Tensor | None  # the sweeps' own log-potentials; None: from the weights
    sweeps: int
    residual: float
    converged: bool


def _solve_forward(s: torch.Tensor, rho: float, method: str, tol: float,
                   max_iter: int) -> _Solved:
    """The forward solver for ``method`` on ``s``'s device and dtype (no autograd)."""
    kernel = _kernel_for(s) if method == "newton" else None
    if kernel is not None:
        w, stats = kernel.forward(s, rho, tol, max_iter)
        if stats.first_invalid_row:
            raise ValueError(SCORE_VALUE_ERRORS[stats.first_invalid_row])
        res = stats.max_error_estimate
        return _Solved(w, None, stats.max_newton_steps, res, stats.all_converged and res <= tol)
    check_score_values(s)
    s_shift, live = shift_rows(s, live_mask(s))
    if method == "newton":
        w, sweeps, res = solve_dense(s_shift, live, rho, tol, max_iter)
        return _Solved(w, None, sweeps, res, res <= tol)
    solver = sinkhorn if method == "sinkhorn" else anderson
    w, log_v, sweeps, res = solver(s_shift, live, rho, tol, max_iter)
    return _Solved(w, log_v, sweeps, res, res <= tol)


def _kernel_for(s: torch.Tensor):
    """The compiled module (CPU) or the Triton one (CUDA) that takes ``s``; None: pure torch."""
    if _compiled.usable(s):
        return _compiled
    if _triton.usable(s):
        return _triton
    return None


def _solve_backward(w: torch.Tensor, g: torch.Tensor, rho: float) -> torch.Tensor:
    """``dL/ds`` from the weights and ``dL/dw``: the exact reverse row sweep."""
    kernel = _kernel_for(w)
    if kernel is not None:
        return kernel.backward(w, g, rho)
    return reverse_sweep_backward(w, g.to(w.dtype), rho)


class _CausalOTFunction(torch.autograd.Function):
    """Forward: the solve; backward: the exact reverse row sweep (depends on the weights only)."""

    @staticmethod
    def forward(ctx, s, rho, method, tol, max_iter, holder):
        solved = _solve_forward(s, rho, method, tol, max_iter)
        holder.append(solved)
        ctx.rho = rho
        ctx.save_for_backward(solved.weights)
        return solved.weights

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return _solve_backward(w, g, ctx.rho), None, None, None, None, None


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
        float16/bfloat16 are computed in float32 and cast back. Whatever the method, each row
        is first shifted by its maximum over the live keys (Proposition 2.4).
    rho : float in ``[0, 1)``
        Balancing strength; ``kappa = rho/(1-rho)``. ``rho = 0`` short-circuits to the masked
        softmax code path (bit-identical to ``torch.softmax`` on the masked scores).
    method : ``"auto"``, ``"newton"``, ``"sinkhorn"`` or ``"anderson"``
        See the module docstring; ``"auto"`` means ``"newton"``.
    tol : float, optional
        A positive finite number; default ``1e-10`` for float64, ``1e-5`` for float32
        (float32 stalls near ``5e-7`` in the log-potentials). What it bounds, per method: see
        :class:`ConvergenceInfo` (``residual``). A ``tol`` below the dtype's resolution is not
        met: the solvers stop when their steps stall at rounding level and report it.
    max_iter : int, optional
        Sweeps (``sinkhorn``: 100000, ``anderson``: 2000) or Newton steps per row
        (``newton``: 100); a Python or numpy integer in ``[1, 2**31 - 1]``. Hitting it issues
        a :class:`ConvergenceWarning` and sets ``info.converged = False``.

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
        Fewer than 2 dims, non-square, ``n = 0``, a dtype other than float16, bfloat16,
        float32 or float64, NaN or ``+inf`` scores on or below the diagonal, a row with every
        key masked, scores on the ``meta`` device, ``rho`` outside ``[0, 1)``, not finite
        or a tensor that requires grad (no gradient w.r.t. ``rho``),
        unknown ``method``, ``tol`` not a positive finite number (bools refused), or
        ``max_iter`` not an integer in ``[1, 2**31 - 1]``.

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
    rho, method, tol, max_iter = _validate_arguments(scores, rho, method, tol, max_iter)
    shape = scores.shape
    cdtype = compute_dtype(scores.dtype)
    s = scores.to(cdtype).reshape(-1, shape[-1], shape[-1])  # (B, n, n)
    tol = tol if tol is not None else default_tol(cdtype)
    if rho == 0.0:
        return _softmax_result(s, shape, scores.dtype, tol)
    if max_iter is None:
        max_iter = _DEFAULT_MAX_ITER[method]
    if s.requires_grad and torch.is_grad_enabled():
        holder: list[_Solved] = []
        w = _CausalOTFunction.apply(s, rho, method, tol, max_iter, holder)
        solved = holder[0]
    else:
        with torch.no_grad():
            solved = _solve_forward(s.detach(), rho, method, tol, max_iter)
        w = solved.weights
    if not solved.converged:
        warnings.warn(
            f"causal_ot_attention(method={method!r}, rho={rho}) stopped after {solved.sweeps} "
            f"iterations with residual {solved.residual:.3e} > tol={tol:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    info = ConvergenceInfo(method, int(solved.sweeps), float(solved.residual),
                           bool(solved.converged), tol)
    return _result(w, s, solved.log_v, rho, info, shape, scores.dtype)


def _validate_arguments(scores: object, rho: object, method: object, tol: object,
                        max_iter: object) -> tuple[float, str, float | None, int | None]:
    """The arguments of :func:`causal_ot_attention`, checked: (rho, method, tol, max_iter).

    ``method`` comes back resolved (``"auto"`` is ``"newton"``); ``tol`` and ``max_iter``
    as None where not given.
    """
    validate_score_layout(scores)
    if isinstance(rho, torch.Tensor) and rho.requires_grad:  # as batch_unbalanced_sinkhorn
        raise ValueError("rho: gradients with respect to rho are not provided; pass a float")
    rho = validate_rho(rho)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    tol = validate_tol(tol)
    max_iter = None if max_iter is None else validate_max_iter(max_iter)
    return rho, "newton" if method == "auto" else method, tol, max_iter


def _softmax_result(s: torch.Tensor, shape: torch.Size, out_dtype: torch.dtype,
                    tol: float) -> CausalOTResult:
    """``rho = 0``: the masked softmax, and log-potentials exactly zero (``kappa = 0``)."""
    check_score_values(s)
    w = causal_softmax(s, live_mask(s.detach()))
    info = ConvergenceInfo("softmax", 0, 0.0, True, tol)
    return CausalOTResult(w.reshape(shape).to(out_dtype), info,
                          make_log_potentials=lambda: torch.zeros(shape, dtype=s.dtype,
                                                                  device=w.device))


def _result(w: torch.Tensor, s: torch.Tensor, log_v: torch.Tensor | None, rho: float,
            info: ConvergenceInfo, shape: torch.Size, out_dtype: torch.dtype) -> CausalOTResult:
    """The weights in the caller's shape and dtype, with the log-potentials: the sweeps' own,
    or ``logV = -kappa log C'`` from the weights, made on first access."""
    weights = w.reshape(shape).to(out_dtype)
    if log_v is not None:
        return CausalOTResult(weights, info, log_v.reshape(shape))
    kappa = rho / (1.0 - rho)
    wd, sd = w.detach(), s.detach()

    def make_log_potentials() -> torch.Tensor:
        cp = torch.cumsum(wd, dim=-2).clamp_min(torch.finfo(wd.dtype).tiny)  # (B, n, n): C'
        zero = torch.zeros((), dtype=wd.dtype, device=wd.device)
        return torch.where(live_mask(sd), -kappa * torch.log(cp), zero).reshape(shape)

    return CausalOTResult(weights, info, make_log_potentials=make_log_potentials)

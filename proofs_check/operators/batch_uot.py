"""Batch unbalanced Sinkhorn on the causal kernel: the plan that collapses (docs/theory.md §1).

This is the *non*-prefix-consistent construction of docs/theory.md §1, kept as a reference and
as the negative control of the prefix-consistency check (Proposition 2.3): every column sum is
relaxed against the whole sequence at once, so later queries change earlier rows ("leak"),
and as ``rho -> 1`` the plan tends to the identity (Proposition 1).

Problem (entropic weight ``eps = 1``, column weight ``lam``, all on the causal part ``j <= l``)::

    min_{P >= 0, P 1 = 1}  sum_{l,j} P[l,j] (log P[l,j] - 1 - S[l,j]) + lam * KL(P^T 1 | b)

with ``KL(x | b) = sum_j x_j log(x_j / b_j) - x_j + b_j``. Rows are hard (each query
distributes mass 1), columns are KL-relaxed towards the targets ``b`` (default ``b = 1``).
With the kernel ``K = exp(S)`` on ``j <= l`` and ``0`` above the diagonal, and
``rho = lam / (lam + eps)``, the scaling iteration is::

    u = 1 / (K v),    v = (b / (K^T u))^rho,    P = diag(u) K diag(v).

Log domain, row-shifted scores. A constant added to row ``l`` of ``S`` is absorbed by
``u_l`` and leaves ``P`` unchanged, so the solver works with ``S'[l,j] = S[l,j] - m_l``,
``m_l = max_{j <= l} S[l,j]`` (exact in floating point near the maximum), and the
log-potentials ``f' = f + m = log u + m`` and ``g = log v``::

    f'_l = -logsumexp_{j <= l} (S'[l,j] + g_j)
    g_j  = rho * (log b_j - logsumexp_{l >= j} (S'[l,j] + f'_l))
    P[l,j] = softmax_{j <= l} (S'[l,j] + g_j)          (rows normalised by construction)

The potentials then stay of the size of the score *differences* within a row, not of the
scores themselves: ``S + 1e7`` gives bit-for-bit the plan of ``S`` whenever the shift is exact
in the dtype, and no ``exp(S + f + g)`` with three terms of size ``|S|`` cancelling is ever
formed (the earlier version returned rows summing to 0.5 for float32 ``randn + 1e7`` while
reporting ``residual = 0``). ``log_u`` is reported as ``f = f' - m`` (original coordinates).

Convergence is measured on the returned plan. The map ``T: g -> g_new`` is a composition
of two 1-Lipschitz (sup-norm) log-sum-exps and a multiplication by ``rho``, so it contracts
with factor ``rho``. The returned plan is the one built from ``g`` itself (rows normalised for
that ``g``), and its residual is ``r = max |T(g) - g|``, which equals
``(1 - rho) max_j |g_j + kappa (log colsum_j(P) - log b_j)|``, ``kappa = rho / (1 - rho)``:
the column optimality condition of the returned plan. Hence ``|g - g*| <= (r + delta) /
(1 - rho)`` (``BatchUOTInfo.error_bound``), where ``delta`` is the rounding error of one
evaluation of ``T``, estimated as ``8 eps (1 + log2 n + max|f'| + max|g|)`` (a log-sum-exp
over ``n`` terms of that size, with a safety factor: an estimate, not a proved bound;
measured against mpmath, the distance at the round-off floor is up to 1.6 times
``r / (1 - rho)`` alone and at most 0.84 times the estimate). ``BatchUOTInfo.residual`` is
the larger of ``r`` and the row-sum error ``max_l |sum_j P[l,j] - 1|`` of the returned plan,
so the solver can never report convergence of a plan whose rows do not sum to 1.

Round-off. In exact arithmetic consecutive increments shrink by the factor ``rho``
every sweep, so a sweep that does not set a new smallest increment proves that round-off
is at work: with a per-sweep rounding error ``delta``, ``r_{k+1} <= rho r_k + 2 delta``, so
this happens only once ``r_k <= 2 delta / (1 - rho)``. Below that level the iteration still
progresses on average (measured: float32, ``rho = 0.999``, ``n = 16..128``, a patience of
8 sweeps stops at residuals of 2e-4 to 9e-4 where ``tol = 1e-5`` is reached with the
patience below, in the same number of sweeps as before the rule existed), so the
solver stops only after ``STALL_SWEEPS * (1 + 1/(1 - rho))`` sweeps without a new minimum
(``1/(1 - rho)`` is the contraction's time scale). It then reports ``converged = False`` if
the residual is still above ``tol`` and warns, instead of sweeping until ``max_iter``. A
``tol`` below the dtype's machine epsilon is refused (ValueError): no increment of ``O(1)``
log-potentials, and no row sum of the plan, can be resolved below it.

Gradients (implicit differentiation). When ``scores`` or ``col_target`` require grad, the
solve runs under ``no_grad`` (no sweep is recorded) and the plan and potentials get the
gradient of the *exact* fixed point, by the implicit function theorem applied to its
optimality conditions (rows ``sum_j P[l,j] = 1``; columns
``g_j / kappa + log c_j - log b_j = 0``, ``c = P^T 1``), evaluated at the returned plan. The
adjoint system reduces to one symmetric positive definite ``n x n`` solve per batch element::

    ((1 + 1/kappa) D_c - P^T P) z = wbar_c - P^T wbar_r,    y = wbar_r - P z,
    Sbar = W - P o (y 1^T + 1 z^T),    (log b)bar = c o z,

with ``W = Pbar o P``, ``wbar_r = W 1 + fbar``, ``wbar_c = W^T 1 + gbar`` (``P^T P <= D_c`` by
Jensen, so the matrix is ``>= D_c / kappa``; it is solved in the scaled form
``(1 + 1/kappa) I - D_c^{-1/2} P^T P D_c^{-1/2}``, condition number ``<= 1/(1 - rho)``). The
cost is ``O(n^3)`` per batch element; gradients are as accurate as the forward fixed point
(``error_bound``). Differentiating only the final sweep, or unrolling all sweeps through
autograd, are both avoided: the first is wrong, the second costs memory linear in the
number of sweeps. Not provided: double backward; gradients with respect to ``rho``; the
``log_v`` gradient of a column whose total mass underflows to 0 in the compute dtype (set to
0; such a column carries no representable mass, so the plan's gradient is unaffected).

The same plan is what POT computes with
``ot.unbalanced.sinkhorn_unbalanced(a=1, b, M=-S (+inf above the diagonal), reg=1,
reg_m=(inf, lam), reg_type='kl', method='sinkhorn')``; the tests compare the two.

>>> import torch
>>> res = batch_unbalanced_sinkhorn(torch.zeros(4, 4, dtype=torch.float64), 0.0)
>>> torch.allclose(res.plan, torch.tril(torch.ones(4, 4, dtype=torch.float64))
...                / torch.arange(1, 5, dtype=torch.float64)[:, None])   # rho = 0: softmax
True
>>> res = batch_unbalanced_sinkhorn(torch.zeros(32, 32, dtype=torch.float64), 0.5)
>>> bool(torch.allclose(res.plan.sum(-1), torch.ones(32, dtype=torch.float64)))  # rows hard
True
>>> s = torch.tensor([[0.0, 0.0], [1.0, -2.0]])  # integers: s + 1e7 is exact in float32
>>> torch.equal(batch_unbalanced_sinkhorn(s + 1e7, 0.9).plan,
...             batch_unbalanced_sinkhorn(s, 0.9).plan)  # a constant shift changes nothing
True
>>> d = [float(torch.diagonal(batch_unbalanced_sinkhorn(torch.zeros(32, 32), r).plan).mean())
...      for r in (0.5, 0.9, 0.99)]          # identity collapse (Proposition 1) as rho -> 1
>>> d == sorted(d) and d[0] < 0.2 < 0.6 < d[2]
True
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import torch

from .causal_ot._common import (
    ConvergenceInfo,
    ConvergenceWarning,
    validate_rho,
    validate_scores,
    validate_tol,
)

__all__ = [
    "MAX_DEFAULT_SWEEPS",
    "STALL_SWEEPS",
    "BatchUOTConvergenceWarning",
    "BatchUOTInfo",
    "BatchUOTResult",
    "batch_unbalanced_sinkhorn",
    "default_batch_tol",
]

#: Patience of the round-off stop: after ``STALL_SWEEPS * (1 + 1/(1 - rho))`` sweeps without
#: a new smallest increment the solver stops (module docstring). In exact arithmetic every
#: sweep gives a new smallest increment (they shrink by the factor ``rho``).
STALL_SWEEPS = 8


class BatchUOTConvergenceWarning(ConvergenceWarning):
    """The batch unbalanced Sinkhorn iteration stopped above ``tol``.

    Either at ``max_iter``, or because the increments stopped shrinking (round-off floor).
    A subclass of the operators' ``ConvergenceWarning``: one filter catches both.
    """


@dataclass(frozen=True)
class BatchUOTInfo(ConvergenceInfo):
    """Convergence information of ``batch_unbalanced_sinkhorn``: a ``ConvergenceInfo``.

    The fields of ``ConvergenceInfo`` (``method``, ``sweeps`` = ``iterations``, ``residual``,
    ``converged``, ``tol``) mean what they mean for every solver of the operators; two
    fields are added.

    Attributes
    ----------
    method : always ``"batch_uot"`` (log-domain scaling iteration on row-shifted scores).
    sweeps : number of ``(f, g)`` updates performed (also ``iterations``).
    residual : measured on the returned weights (in the compute dtype, before a cast back
        to float16/bfloat16; row sums accumulated in float64), max over the batch of
        ``max(|T(g) - g|_inf, max_l |sum_j P[l,j] - 1|)``: the column fixed-point residual of
        the returned ``log_v`` (equal to ``(1 - rho)`` times the column optimality defect
        ``|g + kappa (log colsum - log b)|``) and the row-sum error.
    converged : ``residual <= tol``.
    tol : the tolerance used.
    rho : the scaling exponent.
    error_bound : ``(|T(g) - g|_inf + delta) / (1 - rho)``, a bound on the sup-norm distance
        of the returned ``log_v`` to the exact fixed point (contraction by ``rho``), with
        ``delta = 8 eps (1 + log2 n + max|f'| + max|g|)`` the estimated rounding error of one
        evaluation of the update (module docstring).
    """

    rho: float
    error_bound: float


@dataclass(frozen=True)
class BatchUOTResult:
    """Batch weights, convergence information and potentials.

    The same vocabulary as ``CausalOTResult``: ``weights``, ``info`` and ``log_potentials``
    mean the same there; ``log_u`` and ``log_v`` are the two potentials of this plan.

    Attributes
    ----------
    weights : ``(..., n, n)`` tensor, same dtype/device as the scores: the plan ``P``; rows
        sum to 1, entries above the diagonal exactly 0. Differentiable (implicit gradient,
        module docstring). Also available as ``plan``, its optimal-transport name.
    info : ``BatchUOTInfo`` (a ``ConvergenceInfo``).
    log_u, log_v : ``(..., n)`` final log-potentials ``f`` and ``g`` (compute dtype), with
        ``P = exp(S + f + g)`` on the causal part; ``f`` carries the row maxima of ``S``.
    """

    weights: torch.Tensor
    info: BatchUOTInfo
    log_u: torch.Tensor
    log_v: torch.Tensor

    @property
    def plan(self) -> torch.Tensor:
        """The same tensor as ``weights`` (the transport plan ``P``)."""
        return self.weights

    @property
    def log_potentials(self) -> torch.Tensor:
        """``log_v[j]`` at each causal entry ``(l, j)``, 0 above the diagonal ``(..., n, n)``.

        As for ``CausalOTResult.log_potentials``: in every row the weights are proportional
        to ``exp(scores + log_potentials)`` over the live causal keys.
        """
        n = self.log_v.shape[-1]
        causal = torch.ones(n, n, dtype=torch.bool, device=self.log_v.device).tril()
        full = self.log_v.unsqueeze(-2).expand(*self.log_v.shape[:-1], n, n)
        return torch.where(causal, full, torch.zeros((), dtype=full.dtype, device=full.device))


def default_batch_tol(dtype: torch.dtype) -> float:
    """Default tolerance on the residual (module docstring).

    float64: ``1e-10``. float32 (and float16/bfloat16, computed in float32): ``1e-5``; the
    log-potentials are of size ``O(log n)`` and their float32 round-off is about ``1e-6``, so
    a target much below that cannot be met reliably.

    >>> default_batch_tol(torch.float64), default_batch_tol(torch.float32)
    (1e-10, 1e-05)
    """
    return 1e-10 if dtype == torch.float64 else 1e-5


#: The largest default sweep budget (``max_iter=None``): ``rho`` so close to 1 that its
#: contraction needs more sweeps than this is refused by name (ValueError) rather than run for
#: minutes; an explicit ``max_iter`` runs them. It covers ``rho = 0.9999`` at ``tol = 1e-12``
#: (docs/theory.md §1's table: about 2.6e5 sweeps to convergence, 6e5 in the budget).
MAX_DEFAULT_SWEEPS = 1_000_000


def _sweeps_needed(rho: float, tol: float) -> int:
    """The default sweep budget: the increment shrinks by at least rho per sweep from O(1),
    so ``ln(10/tol) / (-ln rho)`` sweeps, with a factor 2 and a floor of 200 for the
    transient before the asymptotic rate sets in (a ``tol`` above 10 needs only the floor)."""
    if rho == 0.0:
        return 10
    return int(200 + 2.0 * max(0.0, math.log(10.0 / tol)) / -math.log(rho))


def _default_max_iter(rho: float, tol: float) -> int:
    needed = _sweeps_needed(rho, tol)
    if needed > MAX_DEFAULT_SWEEPS:
        raise ValueError(
            f"rho = {rho!r} is too close to 1 for the default sweep budget: its contraction "
            f"needs about {needed:.2e} sweeps to reach tol = {tol:.1e} (the default budget is at "
            f"most {MAX_DEFAULT_SWEEPS:.0e}); pass max_iter to run them"
        )
    return needed


def _check_not_meta(value: object, name: str) -> None:
    if isinstance(value, torch.Tensor) and value.device.type == "meta":
        raise ValueError(f"{name} is a meta tensor (no data); pass a tensor with values")


def _validate_tol(tol: object, dtype: torch.dtype) -> float:
    if tol is None:
        return default_batch_tol(dtype)
    value = validate_tol(tol)  # the operators' shared rule: a positive finite real, not bool
    eps = torch.finfo(dtype).eps
    if value < eps:
        raise ValueError(
            f"tol = {value:.3e} is below the resolution of {dtype} (eps = {eps:.3e}): "
            f"increments of O(1) log-potentials cannot be resolved below it; use tol >= eps"
        )
    return value


def _validate_max_iter(max_iter: object, rho: float, tol: float) -> int:
    if max_iter is None:
        return _default_max_iter(rho, tol)
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral):
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be a positive integer, got {int(max_iter)}")
    return int(max_iter)


def _log_col_target(
    col_target: object, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor | None:
    """``log b`` broadcast to ``shape`` (differentiable in ``col_target``), or None."""
    if col_target is None:
        return None
    _check_not_meta(col_target, "col_target")
    try:
        b = torch.as_tensor(col_target)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError("col_target must be a tensor of positive reals, got "
                         f"{type(col_target).__name__} that torch cannot convert") from exc
    if b.dtype == torch.bool or b.is_complex():
        raise ValueError(f"col_target must have a real (integer or floating) dtype, "
                         f"got {b.dtype}")
    b = b.to(dtype=dtype, device=device)
    try:
        b = torch.broadcast_to(b, shape)
    except RuntimeError as exc:
        raise ValueError(
            f"col_target of shape {tuple(b.shape)} does not broadcast to {shape}"
        ) from exc
    low = b.detach()
    if not (torch.isfinite(low).all() and (low > 0).all()):
        raise ValueError("col_target must be finite and > 0")
    return torch.log(b)


@dataclass(frozen=True)
class _Solution:
    log_p: torch.Tensor  # (..., n, n) log plan (-inf off the causal / live part)
    f: torch.Tensor  # (..., n) log u in original coordinates
    g: torch.Tensor  # (..., n) log v
    sweeps: int
    increment: float  # max |T(g) - g| at the returned g
    rounding: float  # estimated rounding error of one evaluation of T (delta)
    stalled: bool


def _solve(S: torch.Tensor, log_b: torch.Tensor | None, rho: float, tol: float,
           max_iter: int) -> _Solution:
    """Scaling iteration on row-shifted scores (module docstring); no autograd."""
    m = S.amax(dim=-1, keepdim=True)  # (..., n, 1): finite, every row has a live key
    Sh = S - m  # (..., n, n): row max 0; -inf stays -inf (an overflow to -inf has mass 0)
    reach = torch.isfinite(Sh).any(dim=-2)  # (..., n): columns some row can reach
    g = torch.zeros(S.shape[:-1], dtype=S.dtype, device=S.device)  # (..., n): log v
    patience = STALL_SWEEPS + math.ceil(STALL_SWEEPS / (1.0 - rho))
    best, since_best, stalled = math.inf, 0, False
    for sweeps in range(1, max_iter + 1):
        x = Sh + g.unsqueeze(-2)  # (..., n, n): S' + g
        lse = torch.logsumexp(x, dim=-1)  # (..., n): -f'
        col = torch.logsumexp(Sh - lse.unsqueeze(-1), dim=-2)  # (..., n): log K'^T u'
        target = col.new_zeros(()) if log_b is None else log_b
        g_new = torch.where(reach, rho * (target - col), torch.zeros_like(col))  # T(g)
        increment = float((g_new - g).abs().max())
        if increment <= tol or sweeps == max_iter:
            break
        if increment < best:
            best, since_best = increment, 0
        else:
            since_best += 1
            if since_best >= patience:
                stalled = True
                break
        g = g_new
    # The plan of the g whose residual was measured: rows normalised for that g.
    log_p = torch.log_softmax(x, dim=-1)  # (..., n, n); -inf where S' is -inf
    f = -lse - m.squeeze(-1)  # (..., n): log u for the original scores
    size = 1.0 + math.log2(S.shape[-1]) + float(lse.abs().max()) + float(g.abs().max())
    rounding = 8.0 * torch.finfo(S.dtype).eps * size
    return _Solution(log_p, f, g, sweeps, increment, rounding, stalled)


class _ImplicitBatchUOT(torch.autograd.Function):
    """Plan and potentials of the fixed point, with the implicit-function gradient."""

    @staticmethod
    def forward(ctx, S, log_b, rho, tol, max_iter, holder):
        sol = _solve(S, log_b, rho, tol, max_iter)
        plan = torch.exp(sol.log_p)
        ctx.rho = rho
        ctx.has_b = log_b is not None
        ctx.save_for_backward(plan)
        holder.append(sol)
        return plan, sol.f, sol.g

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, plan_bar, f_bar, g_bar):
        (P,) = ctx.saved_tensors  # (..., n, n)
        rho = ctx.rho
        W = plan_bar * P  # (..., n, n); 0 where P = 0
        w_r = W.sum(-1) + f_bar  # (..., n)
        w_c = W.sum(-2) + g_bar  # (..., n)
        if rho == 0.0:  # g = 0 fixed: softmax backward
            z = torch.zeros_like(w_c)
        else:
            c = P.sum(-2)  # (..., n): column masses
            active = c > 0  # columns with representable mass (others: g frozen)
            d = torch.where(active, c.sqrt(), torch.ones_like(c))  # (..., n)
            Q = P / d.unsqueeze(-2)  # (..., n, n): P D^{-1/2}
            n = P.shape[-1]
            eye = torch.eye(n, dtype=P.dtype, device=P.device)
            M = (1.0 + (1.0 - rho) / rho) * eye - Q.transpose(-1, -2) @ Q  # SPD, >= I/kappa
            rhs = (w_c - (P.transpose(-1, -2) @ w_r.unsqueeze(-1)).squeeze(-1)) / d
            rhs = torch.where(active, rhs, torch.zeros_like(rhs))
            z = torch.linalg.solve(M, rhs.unsqueeze(-1)).squeeze(-1) / d  # (..., n)
            z = torch.where(active, z, torch.zeros_like(z))
        y = w_r - (P @ z.unsqueeze(-1)).squeeze(-1)  # (..., n)
        S_bar = W - P * (y.unsqueeze(-1) + z.unsqueeze(-2))
        lb_bar = P.sum(-2) * z if ctx.has_b else None
        return S_bar, lb_bar, None, None, None, None


def batch_unbalanced_sinkhorn(
    scores: torch.Tensor,
    rho: float,
    *,
    col_target: torch.Tensor | None = None,
    tol: float | None = None,
    max_iter: int | None = None,
) -> BatchUOTResult:
    """Batch unbalanced Sinkhorn plan on the causal kernel (docs/theory.md §1).

    Rows hard, columns KL-relaxed with weight ``lam = rho / (1 - rho)`` (``eps = 1``)::

        u = 1 / (K v),   v = (b / (K^T u))^rho,   P = diag(u) K diag(v),   K = exp(S) on j <= l

    computed in the log domain on row-shifted scores from ``log v = 0`` (module docstring).

    Parameters
    ----------
    scores : tensor ``(..., n, n)``
        Scores ``S[l, j]``; batch dimensions in front; entries above the diagonal are ignored;
        ``-inf`` entries are masked keys (kernel 0). float16/bfloat16 are computed in float32
        and the plan is cast back. With ``requires_grad`` the plan, ``log_u`` and ``log_v``
        carry the implicit gradient of the exact fixed point (module docstring).
    rho : float in ``[0, 1)``
        Scaling exponent ``lam / (lam + eps)``. ``rho = 0`` is the row softmax.
    col_target : tensor broadcastable to ``(..., n)``, optional
        Column targets ``b > 0`` (default all ones); differentiable like ``scores``.
    tol : float, optional
        Stop when the residual (``BatchUOTInfo.residual``) is ``<= tol`` (default
        ``default_batch_tol(dtype)``); at least the compute dtype's epsilon.
    max_iter : int, optional
        Sweep limit (default ``200 + 2 ln(10/tol) / (-ln rho)``, enough for the ``rho``
        contraction, at most ``MAX_DEFAULT_SWEEPS``: a ``rho`` closer to 1 than that allows
        is refused unless ``max_iter`` is given). Stopping at it, or at the round-off floor,
        above ``tol`` warns ``BatchUOTConvergenceWarning``.

    Returns
    -------
    BatchUOTResult
        ``weights`` (the plan: rows sum to 1, upper triangle exactly 0; also ``plan``),
        ``info``, ``log_u``, ``log_v`` and ``log_potentials``.

    Raises
    ------
    ValueError
        Non-tensor, meta or non-floating scores, fewer than 2 dimensions, non-square,
        ``n = 0``, an empty batch, NaN or ``+inf`` scores, a row with every key masked,
        ``rho`` outside ``[0, 1)``, a ``col_target`` that is not a tensor of finite positive
        reals broadcastable to ``(..., n)``, ``tol`` not a finite real in ``[eps, inf)``,
        ``max_iter`` not a positive integer, or, without ``max_iter``, ``rho`` so close to 1
        that the default budget would exceed ``MAX_DEFAULT_SWEEPS``.
    """
    S, log_b, rho, tol, max_iter = _validate_arguments(scores, rho, col_target, tol, max_iter)
    holder: list[_Solution] = []
    plan, f, g = _ImplicitBatchUOT.apply(S, log_b, rho, tol, max_iter, holder)
    return _result(plan, f, g, holder[0], rho, tol, scores.dtype)


def _validate_arguments(scores: object, rho: object, col_target: object, tol: object,
                        max_iter: object) -> tuple[torch.Tensor, torch.Tensor | None, float,
                                                   float, int]:
    """The arguments of :func:`batch_unbalanced_sinkhorn`, checked: the causal scores ``S``
    (``-inf`` above the diagonal, compute dtype, differentiable), ``log b`` or None, ``rho``,
    ``tol`` and ``max_iter`` (defaults applied)."""
    _check_not_meta(scores, "scores")
    validate_scores(scores)
    _check_not_meta(rho, "rho")
    if isinstance(rho, torch.Tensor) and rho.requires_grad:
        raise ValueError("rho: gradients with respect to rho are not provided; pass a float")
    rho = validate_rho(rho)
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    tol = _validate_tol(tol, dtype)
    max_iter = _validate_max_iter(max_iter, rho, tol)
    n = scores.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril()
    S = scores.to(dtype).masked_fill(~causal, -math.inf)  # (..., n, n), differentiable
    log_b = _log_col_target(col_target, (*S.shape[:-2], n), dtype, scores.device)
    return S, log_b, rho, tol, max_iter


def _result(plan: torch.Tensor, f: torch.Tensor, g: torch.Tensor, sol: _Solution, rho: float,
            tol: float, out_dtype: torch.dtype) -> BatchUOTResult:
    """The plan in the caller's dtype with its info: the residual measured on the returned
    plan, and a warning saying why it stopped above ``tol``."""
    with torch.no_grad():
        # in float64 whatever the dtype: the error of the entries, not of this sum
        row_error = float((plan.sum(-1, dtype=torch.float64) - 1).abs().max())
    residual = max(sol.increment, row_error)
    converged = residual <= tol
    if not converged:
        if sol.stalled:
            why = (f"the increments stopped shrinking (round-off floor of {plan.dtype} for "
                   f"these scores); tol is not reachable")
        elif row_error > tol:
            why = f"the rows of the plan sum to 1 only within {row_error:.3e}"
        else:
            why = "max_iter reached; increase max_iter"
        warnings.warn(
            f"batch_unbalanced_sinkhorn did not converge: residual {residual:.3e} > tol "
            f"{tol:.3e} after {sol.sweeps} sweeps (rho = {rho}): {why}",
            BatchUOTConvergenceWarning,
            stacklevel=3,
        )
    info = BatchUOTInfo(
        method="batch_uot", sweeps=sol.sweeps, residual=residual, converged=converged, tol=tol,
        rho=rho, error_bound=(sol.increment + sol.rounding) / (1.0 - rho),
    )
    return BatchUOTResult(weights=plan.to(out_dtype), info=info, log_u=f, log_v=g)

"""Batch unbalanced Sinkhorn on the causal kernel: the plan that collapses (THEORY.md §1).

This is the *non*-prefix-consistent construction of THEORY §1, kept as a reference and as the
negative control of the prefix-consistency check (Proposition 2.3): every column sum is
relaxed against the whole sequence at once, so later queries change earlier rows ("leak"),
and as ``rho -> 1`` the plan tends to the identity (Proposition 1).

Problem (entropic weight ``eps = 1``, column weight ``lam``, all on the causal part ``j <= l``)::

    min_{P >= 0, P 1 = 1}  sum_{l,j} P[l,j] (log P[l,j] - 1 - S[l,j]) + lam * KL(P^T 1 | b)

with ``KL(x | b) = sum_j x_j log(x_j / b_j) - x_j + b_j``. Rows are hard (each query
distributes mass 1), columns are KL-relaxed towards the targets ``b`` (default ``b = 1``).
With the kernel ``K = exp(S)`` on ``j <= l`` and ``0`` above the diagonal, and
``rho = lam / (lam + eps)``, the scaling iteration is::

    u = 1 / (K v),    v = (b / (K^T u))^rho,    P = diag(u) K diag(v),

run here in the log domain (``f = log u``, ``g = log v``, log-sum-exp over the causal
part)::

    f_l = -logsumexp_{j <= l} (S[l,j] + g_j)
    g_j = rho * (log b_j - logsumexp_{l >= j} (S[l,j] + f_l))

The map ``g -> g_new`` is a composition of two 1-Lipschitz (sup-norm) log-sum-exps and a
multiplication by ``rho``, so it contracts with factor at most ``rho``: after a sweep whose
increment is ``r = max |g_new - g|``, the distance to the fixed point is at most
``rho r / (1 - rho)`` (``BatchUOTInfo.error_bound``). Hence the slow convergence as
``rho -> 1`` (THEORY §1: about 1.9e5 sweeps at ``rho = 0.9999``, ``n = 32``).

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

from ._causal_ot_common import ConvergenceWarning, validate_rho

__all__ = [
    "BatchUOTConvergenceWarning",
    "BatchUOTInfo",
    "BatchUOTResult",
    "batch_unbalanced_sinkhorn",
    "default_batch_tol",
]


class BatchUOTConvergenceWarning(ConvergenceWarning):
    """The batch unbalanced Sinkhorn iteration stopped at ``max_iter`` above ``tol``.

    A subclass of the operators' ``ConvergenceWarning``: one filter catches both.
    """


@dataclass(frozen=True)
class BatchUOTInfo:
    """Convergence information of ``batch_unbalanced_sinkhorn``.

    Attributes
    ----------
    method : always ``"batch_uot"`` (log-domain scaling iteration).
    sweeps : number of ``(f, g)`` updates performed.
    residual : sup-norm of the last increment of ``g = log v`` (max over the batch).
    converged : ``residual <= tol``.
    tol : the tolerance used.
    rho : the scaling exponent.
    error_bound : ``rho * residual / (1 - rho)``, a bound on the sup-norm distance of ``g``
        to the fixed point (the update contracts by ``rho``; see the module docstring).
    """

    method: str
    sweeps: int
    residual: float
    converged: bool
    tol: float
    rho: float
    error_bound: float


@dataclass(frozen=True)
class BatchUOTResult:
    """Batch plan and convergence information.

    Attributes
    ----------
    plan : ``(..., n, n)`` tensor, same dtype/device as the scores; rows sum to 1, entries
        above the diagonal exactly 0.
    info : ``BatchUOTInfo``.
    log_u, log_v : ``(..., n)`` final log-potentials ``f`` and ``g`` (compute dtype).
    """

    plan: torch.Tensor
    info: BatchUOTInfo
    log_u: torch.Tensor
    log_v: torch.Tensor


def default_batch_tol(dtype: torch.dtype) -> float:
    """Default tolerance on the sup-norm increment of ``log v``.

    float64: ``1e-10``. float32 (and float16/bfloat16, computed in float32): ``1e-5``; the
    log-potentials are of size ``O(log n)`` and their float32 round-off is about ``1e-6``, so
    an increment target much below that cannot be met reliably.
    """
    return 1e-10 if dtype == torch.float64 else 1e-5


def _default_max_iter(rho: float, tol: float) -> int:
    # The increment shrinks by at least rho per sweep from O(1): ln(1/tol)/(-ln rho) sweeps,
    # with a factor 2 and a floor for the transient before the asymptotic rate sets in.
    if rho == 0.0:
        return 10
    return int(min(2e6, 200 + 2.0 * math.log(10.0 / tol) / -math.log(rho)))


def batch_unbalanced_sinkhorn(
    scores: torch.Tensor,
    rho: float,
    *,
    col_target: torch.Tensor | None = None,
    tol: float | None = None,
    max_iter: int | None = None,
) -> BatchUOTResult:
    """Batch unbalanced Sinkhorn plan on the causal kernel (THEORY.md §1).

    Rows hard, columns KL-relaxed with weight ``lam = rho / (1 - rho)`` (``eps = 1``)::

        u = 1 / (K v),   v = (b / (K^T u))^rho,   P = diag(u) K diag(v),   K = exp(S) on j <= l

    computed in the log domain from ``log v = 0``.

    Parameters
    ----------
    scores : tensor ``(..., n, n)``
        Scores ``S[l, j]``; batch dimensions in front; entries above the diagonal are ignored;
        ``-inf`` entries are masked keys (kernel 0). float16/bfloat16 are computed in float32
        and the plan is cast back.
    rho : float in ``[0, 1)``
        Scaling exponent ``lam / (lam + eps)``. ``rho = 0`` is the row softmax.
    col_target : tensor broadcastable to ``(..., n)``, optional
        Column targets ``b > 0`` (default all ones).
    tol : float, optional
        Stop when the sup-norm increment of ``log v`` is ``<= tol`` (default
        ``default_batch_tol(dtype)``).
    max_iter : int, optional
        Sweep limit (default about ``2 ln(10/tol) / (-ln rho)``, enough for the ``rho``
        contraction). Reaching it above ``tol`` warns ``BatchUOTConvergenceWarning``.

    Returns
    -------
    BatchUOTResult
        ``plan`` (rows sum to 1, upper triangle exactly 0) and ``info``.

    Raises
    ------
    ValueError
        Non-tensor or non-floating scores, fewer than 2 dimensions, non-square, ``n = 0``,
        NaN or ``+inf`` scores, a row with every key masked, ``rho`` outside ``[0, 1)``,
        non-positive or non-finite ``col_target``, bad ``tol``/``max_iter``.
    """
    if not isinstance(scores, torch.Tensor):
        raise ValueError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    if not scores.is_floating_point():
        raise ValueError(f"scores must have a floating dtype, got {scores.dtype}")
    if scores.dim() < 2:
        raise ValueError(f"scores must have at least 2 dimensions, got shape {tuple(scores.shape)}")
    n = scores.shape[-1]
    if scores.shape[-2] != n:
        raise ValueError(f"scores must be square in its last two dims, got {tuple(scores.shape)}")
    if n == 0:
        raise ValueError("scores must have n >= 1 (got n = 0)")
    rho = validate_rho(rho)
    out_dtype = scores.dtype
    dtype = torch.float64 if out_dtype == torch.float64 else torch.float32
    device = scores.device
    causal = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    S = scores.to(dtype).masked_fill(~causal, -math.inf)  # (..., n, n)
    if torch.isnan(S).any():
        raise ValueError("scores contain NaN")
    if (S == math.inf).any():
        raise ValueError("scores contain +inf on the causal part")
    if (S == -math.inf).all(dim=-1).any():
        raise ValueError("scores have a row with every key masked (-inf)")

    if tol is None:
        tol = default_batch_tol(dtype)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not float(tol) > 0:
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    tol = float(tol)
    if max_iter is None:
        max_iter = _default_max_iter(rho, tol)
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")

    batch_shape = S.shape[:-2]
    if col_target is None:
        log_b = torch.zeros((*batch_shape, n), dtype=dtype, device=device)
    else:
        b = torch.as_tensor(col_target, dtype=dtype, device=device)
        try:
            b = torch.broadcast_to(b, (*batch_shape, n))
        except RuntimeError as exc:
            raise ValueError(
                f"col_target of shape {tuple(b.shape)} does not broadcast to "
                f"{(*batch_shape, n)}"
            ) from exc
        if not (torch.isfinite(b).all() and (b > 0).all()):
            raise ValueError("col_target must be finite and > 0")
        log_b = torch.log(b)

    g = torch.zeros((*batch_shape, n), dtype=dtype, device=device)  # log v
    residual = math.inf
    sweeps = 0
    for sweeps in range(1, int(max_iter) + 1):  # noqa: B007 (sweeps read after the loop)
        f = -torch.logsumexp(S + g.unsqueeze(-2), dim=-1)  # (..., n): rows hard
        col = torch.logsumexp(S + f.unsqueeze(-1), dim=-2)  # (..., n): log K^T u
        # A column no row can reach (all its entries masked) carries no mass: keep g = 0 there.
        g_new = torch.where(torch.isfinite(col), rho * (log_b - col), torch.zeros_like(col))
        residual = float((g_new - g).abs().max())
        g = g_new
        if residual <= tol:
            break
    converged = residual <= tol
    f = -torch.logsumexp(S + g.unsqueeze(-2), dim=-1)  # final row update: rows sum to 1
    plan = torch.exp(S + f.unsqueeze(-1) + g.unsqueeze(-2))  # exactly 0 where S = -inf
    error_bound = rho * residual / (1.0 - rho)
    if not converged:
        warnings.warn(
            f"batch_unbalanced_sinkhorn did not converge: residual {residual:.3e} > tol "
            f"{tol:.1e} after {sweeps} sweeps (rho = {rho}); increase max_iter",
            BatchUOTConvergenceWarning,
            stacklevel=2,
        )
    info = BatchUOTInfo(
        method="batch_uot",
        sweeps=sweeps,
        residual=residual,
        converged=converged,
        tol=tol,
        rho=rho,
        error_bound=error_bound,
    )
    return BatchUOTResult(plan=plan.to(out_dtype), info=info, log_u=f, log_v=g)

"""Shared pieces of the causal OT solvers: result types, warning class, validation, masking.

Private module; the public names are re-exported by :mod:`proofs_check.operators.causal_ot`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

__all__ = [
    "CausalOTResult",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "causal_softmax",
    "compute_dtype",
    "default_tol",
    "live_mask",
    "validate_rho",
    "validate_scores",
]


class ConvergenceWarning(UserWarning):
    """A causal OT solver stopped before reaching its tolerance (THEORY §2)."""


@dataclass(frozen=True)
class ConvergenceInfo:
    """How a causal OT solve ended.

    Attributes
    ----------
    method : str
        The solver that ran (``"softmax"`` when ``rho == 0`` short-circuits).
    sweeps : int
        Full passes over the matrix (``sinkhorn``/``anderson``), or the largest number of
        Newton iterations any row needed (``exact``).
    residual : float
        ``sinkhorn``/``anderson``: sup-norm of the last plain-sweep increment of ``logV``
        (Lemma 2.2), which equals ``(1 - rho)`` times the log-domain fixed-point residual
        ``max |logV + kappa log C'|``. ``exact``: the largest final Newton step in the
        log-normaliser ``log Z_l`` or in ``log a[l, j]`` over all rows (Lemma 2.1).
    converged : bool
        ``residual <= tol``. A ``ConvergenceWarning`` was issued when False.
    tol : float
        The tolerance that was asked for (after the dtype default was applied).
    """

    method: str
    sweeps: int
    residual: float
    converged: bool
    tol: float


@dataclass(frozen=True)
class CausalOTResult:
    """Output of :func:`causal_ot_attention`.

    Attributes
    ----------
    weights : torch.Tensor
        ``(..., n, n)`` attention weights, same dtype and device as the scores; each row sums
        to one, entries above the diagonal and at masked (``-inf``) keys are exactly zero.
    info : ConvergenceInfo
        Solver diagnostics.
    log_potentials : torch.Tensor or None
        ``logV = -kappa * log C'`` (Lemma 2.2) on the live causal entries, zero elsewhere,
        in the compute dtype; None when ``rho == 0``.
    """

    weights: torch.Tensor
    info: ConvergenceInfo
    log_potentials: torch.Tensor | None = None


def default_tol(dtype: torch.dtype) -> float:
    """Default tolerance: ``1e-10`` for float64, ``1e-5`` for float32 (it stalls near 5e-7).

    >>> default_tol(torch.float64), default_tol(torch.float32)
    (1e-10, 1e-05)
    """
    return 1e-10 if dtype == torch.float64 else 1e-5


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float16/bfloat16 are computed in float32 (and cast back); float32/64 as they are."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return dtype


def validate_rho(rho: object) -> float:
    """Return ``rho`` as a float in ``[0, 1)`` or raise ValueError naming ``rho``."""
    if isinstance(rho, torch.Tensor):
        if rho.numel() != 1:
            raise ValueError(f"rho must be a scalar, got a tensor of shape {tuple(rho.shape)}")
        rho = rho.item()
    if isinstance(rho, bool) or not isinstance(rho, numbers.Real):
        raise ValueError(f"rho must be a real number in [0, 1), got {rho!r}")
    value = float(rho)
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"rho must be finite and in [0, 1), got {value!r}")
    return value


def validate_scores(scores: object) -> torch.Tensor:
    """Check shape, dtype and values of ``scores``; raise ValueError naming the problem.

    Entries above the diagonal are ignored (they may hold anything, NaN included).
    """
    if not isinstance(scores, torch.Tensor):
        raise ValueError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    if scores.dim() < 2:
        raise ValueError(f"scores must have at least 2 dimensions (..., n, n), got {scores.dim()}")
    n, m = scores.shape[-2], scores.shape[-1]
    if n != m:
        raise ValueError(f"scores must be square in its last two dimensions, got ({n}, {m})")
    if n == 0:
        raise ValueError("scores must have n >= 1 (got n = 0)")
    if not scores.dtype.is_floating_point:
        raise ValueError(f"scores must have a floating dtype, got {scores.dtype}")
    if scores.numel() == 0:
        raise ValueError("scores has an empty batch dimension")
    causal = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril()
    low = scores.detach()
    if torch.isnan(low).logical_and(causal).any():
        raise ValueError("scores contain NaN on or below the diagonal")
    if (low == float("inf")).logical_and(causal).any():
        raise ValueError("scores contain +inf on or below the diagonal")
    live = torch.isfinite(low).logical_and(causal)
    if not live.any(dim=-1).all():
        raise ValueError("scores have a row with every key masked (-inf on the whole row)")
    return scores


def live_mask(scores: torch.Tensor) -> torch.Tensor:
    """Boolean ``(..., n, n)``: causal (``j <= l``) and finite score."""
    n = scores.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril()
    return torch.isfinite(scores).logical_and(causal)


def causal_softmax(scores: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    """Masked softmax over keys ``j <= l`` with finite score (THEORY §1; ``rho = 0``)."""
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    return torch.softmax(torch.where(live, scores, neg_inf), dim=-1)

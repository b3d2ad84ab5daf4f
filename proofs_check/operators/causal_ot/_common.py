"""Shared pieces of the causal OT solvers: result types, warning class, validation, masking.

Private module; the public names are re-exported by :mod:`proofs_check.operators.causal_ot`
(and :mod:`proofs_check.operators.batch_uot` shares the validation).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = [
    "MAX_ITER",
    "SCORE_DTYPES",
    "SCORE_VALUE_ERRORS",
    "CausalOTResult",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "SliceStats",
    "causal_softmax",
    "check_score_values",
    "compute_dtype",
    "default_tol",
    "live_mask",
    "shift_rows",
    "validate_max_iter",
    "validate_rho",
    "validate_score_layout",
    "validate_scores",
    "validate_tol",
]


class ConvergenceWarning(UserWarning):
    """A causal OT solver stopped before reaching its tolerance (docs/theory.md §2)."""


@dataclass(frozen=True)
class ConvergenceInfo:
    """How a causal OT solve ended.

    Attributes
    ----------
    method : str
        The solver that ran: ``"newton"`` (row-by-row Newton, Lemma 2.1), ``"sinkhorn"``,
        ``"anderson"`` (Lemma 2.2 sweeps), or ``"softmax"`` when ``rho == 0`` short-circuits.
    sweeps : int
        Full passes over the matrix (``sinkhorn``/``anderson``), or the largest number of
        Newton iterations any row needed (``newton``). Also available as ``iterations``.
    residual : float
        ``sinkhorn``/``anderson``: sup-norm of the last plain-sweep increment of ``logV``
        (Lemma 2.2), which equals ``(1 - rho)`` times the log-domain fixed-point residual
        ``max |logV + kappa log C'|``; the contraction by ``rho`` puts ``logV`` within
        ``residual / (1 - rho)`` of the fixed point. ``newton``: the largest, over rows, of the
        row's estimate of the error of its own solve in ``log Z_l`` and ``log a[l, j]`` (the
        last Newton step, or Newton's quadratic estimate ``4 step^3 / step_prev^2`` once the
        steps shrink quadratically); each row stops once its estimate is ``<= tol / 10``.
        An estimate, not a proved bound, and a per-row one: it is the error against the
        exact solution of row ``l`` *given the column masses of the rows computed before
        it*. Errors of earlier rows move those masses, so the weights' error against the
        exact operator adds up over rows, and the fixed-point defect of the returned
        weights, ``|log a_j + kappa log C'_j + log Z_l - s_j|``, is up to ``(2 + kappa)``
        times a row's log-weight error (``g_j = 1 + kappa a_j/C'_j`` multiplies it). So
        ``tol`` bounds neither of them directly (``tests/proofs_check/test_causal_ot.py``
        measures both against it).
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

    @property
    def iterations(self) -> int:
        """Same as ``sweeps`` (the name shared by every solver's diagnostics)."""
        return self.sweeps


@dataclass(frozen=True)
class SliceStats:
    """What a compiled or Triton forward did, one entry per ``(batch, head)`` slice.

    Attributes
    ----------
    newton_steps : the largest number of Newton steps a row of the slice took.
    error_estimate : the largest row error estimate (``ConvergenceInfo.residual``).
    converged : every row met ``tol``.
    invalid_row : 0, or the code of the slice's first invalid row (the key of
        ``SCORE_VALUE_ERRORS``: 1 NaN, 2 ``+inf``, 3 every key masked).
    """

    newton_steps: tuple[int, ...]
    error_estimate: tuple[float, ...]
    converged: tuple[bool, ...]
    invalid_row: tuple[int, ...]

    @property
    def max_newton_steps(self) -> int:
        return max(self.newton_steps)

    @property
    def max_error_estimate(self) -> float:
        return max(self.error_estimate)

    @property
    def all_converged(self) -> bool:
        return all(self.converged)

    @property
    def first_invalid_row(self) -> int:
        """The code of the first slice's invalid row (0: every row valid)."""
        return next((code for code in self.invalid_row if code), 0)


class CausalOTResult:
    """Output of :func:`causal_ot_attention`: ``CausalOTResult(weights, info, log_potentials)``.

    The vocabulary every operator result shares (``BatchUOTResult`` too): ``weights``,
    ``info`` (a ``ConvergenceInfo``) and ``log_potentials``.

    Attributes
    ----------
    weights : torch.Tensor
        ``(..., n, n)`` attention weights, same dtype and device as the scores; each row sums
        to one, entries above the diagonal and at masked (``-inf``) keys are exactly zero.
    info : ConvergenceInfo
        Solver diagnostics.
    log_potentials : torch.Tensor
        ``logV = -kappa * log C'`` (Lemma 2.2) on the live causal entries, zero elsewhere,
        in the compute dtype (all zero when ``rho == 0``: ``kappa = 0``): in every row the
        weights are proportional to ``exp(scores + log_potentials)`` over the live keys,
        which is what ``BatchUOTResult.log_potentials`` means too. Computed on first
        access when the solver did not produce it (the row Newton solver, softmax), so that
        it costs nothing unread.
    """

    __slots__ = ("_log_potentials", "_make_log_potentials", "info", "weights")

    def __init__(
        self,
        weights: torch.Tensor,
        info: ConvergenceInfo,
        log_potentials: torch.Tensor | None = None,
        *,
        make_log_potentials: Callable[[], torch.Tensor] | None = None,
    ) -> None:
        self.weights = weights
        self.info = info
        self._log_potentials = log_potentials
        self._make_log_potentials = make_log_potentials

    @property
    def log_potentials(self) -> torch.Tensor | None:
        if self._log_potentials is None and self._make_log_potentials is not None:
            self._log_potentials = self._make_log_potentials()
            self._make_log_potentials = None
        return self._log_potentials

    def __repr__(self) -> str:
        return (f"CausalOTResult(weights=<{tuple(self.weights.shape)} {self.weights.dtype}>, "
                f"info={self.info!r})")


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


def _real_as_float(value: object, name: str, kind: str, bound: str) -> float:
    """``value`` (a real, not a bool) as a float; ValueError naming ``name`` otherwise,
    including for an integer beyond the float range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} must be {bound}, got an integer beyond the float range") from None


def validate_rho(rho: object) -> float:
    """Return ``rho`` as a float in ``[0, 1)`` or raise ValueError naming ``rho``."""
    if isinstance(rho, torch.Tensor):
        if rho.numel() != 1:
            raise ValueError(f"rho must be a scalar, got a tensor of shape {tuple(rho.shape)}")
        rho = rho.item()
    value = _real_as_float(rho, "rho", "a real number in [0, 1)", "finite and in [0, 1)")
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"rho must be finite and in [0, 1), got {value!r}")
    return value


def validate_tol(tol: object) -> float | None:
    """``None`` or a positive finite real (not a bool), as a float; else ValueError naming tol."""
    if tol is None:
        return None
    if isinstance(tol, torch.Tensor) and tol.numel() == 1 and tol.device.type != "meta":
        tol = tol.item()
    value = _real_as_float(tol, "tol", "a positive finite number", "a positive finite number")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"tol must be a positive finite number, got {value!r}")
    return value


#: The score dtypes the operators compute with (float16/bfloat16 in float32, cast back).
SCORE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def validate_score_layout(scores: object) -> torch.Tensor:
    """Type, shape, dtype and device checks of ``scores`` (no pass over its values)."""
    if not isinstance(scores, torch.Tensor):
        raise ValueError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    if scores.device.type == "meta":
        raise ValueError("scores is on the 'meta' device (it holds no values to attend over)")
    if scores.dim() < 2:
        raise ValueError(f"scores must have at least 2 dimensions (..., n, n), got {scores.dim()}")
    n, m = scores.shape[-2], scores.shape[-1]
    if n != m:
        raise ValueError(f"scores must be square in its last two dimensions, got ({n}, {m})")
    if n == 0:
        raise ValueError("scores must have n >= 1 (got n = 0)")
    if scores.dtype not in SCORE_DTYPES:
        raise ValueError("scores must have dtype float16, bfloat16, float32 or float64, got "
                         f"{scores.dtype}")
    if scores.numel() == 0:
        raise ValueError("scores has an empty batch dimension")
    return scores


#: The largest ``max_iter`` accepted: the compiled kernel counts a row's Newton steps in a
#: 32-bit integer. (A solver that cannot reach ``tol`` stops at rounding level long before.)
MAX_ITER = 2**31 - 1


def validate_max_iter(max_iter: object) -> int:
    """A Python or numpy integer in ``[1, MAX_ITER]`` as an int; else ValueError naming it."""
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral):
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    value = int(max_iter)
    if not 1 <= value <= MAX_ITER:
        raise ValueError(f"max_iter must be an integer in [1, {MAX_ITER}], got {value}")
    return value


SCORE_VALUE_ERRORS = {
    1: "scores contain NaN on or below the diagonal",
    2: "scores contain +inf on or below the diagonal",
    3: "scores have a row with every key masked (-inf on the whole row)",
}


def check_score_values(scores: torch.Tensor) -> None:
    """NaN / +inf on or below the diagonal, or a fully masked row: ValueError."""
    n = scores.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril()
    low = scores.detach()
    if torch.isnan(low).logical_and(causal).any():
        raise ValueError(SCORE_VALUE_ERRORS[1])
    if (low == float("inf")).logical_and(causal).any():
        raise ValueError(SCORE_VALUE_ERRORS[2])
    live = torch.isfinite(low).logical_and(causal)
    if not live.any(dim=-1).all():
        raise ValueError(SCORE_VALUE_ERRORS[3])


def validate_scores(scores: object) -> torch.Tensor:
    """Check shape, dtype and values of ``scores``; raise ValueError naming the problem.

    Entries above the diagonal are ignored (they may hold anything, NaN included).
    """
    validate_score_layout(scores)
    check_score_values(scores)  # type: ignore[arg-type]
    return scores  # type: ignore[return-value]


def shift_rows(scores: torch.Tensor, live: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores minus their row max over live keys (Proposition 2.4: nothing changes).

    Returns the shifted scores (``-inf`` on dead entries) and the live mask, from which keys
    whose difference to the row max overflows (``-inf``; their weight is below any float) are
    dropped. Without the shift, ``exp`` overflows for large scores and a constant shift of a
    row changes the iterates (float32 ``randn + 1e7`` never meets its tolerance).
    """
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    masked = torch.where(live, scores, neg_inf)
    shifted = masked - masked.amax(dim=-1, keepdim=True)
    live = live & torch.isfinite(shifted)
    return torch.where(live, shifted, neg_inf), live


def live_mask(scores: torch.Tensor) -> torch.Tensor:
    """Boolean ``(..., n, n)``: causal (``j <= l``) and finite score."""
    n = scores.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril()
    return torch.isfinite(scores).logical_and(causal)


def causal_softmax(scores: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    """Masked softmax over keys ``j <= l`` with finite score (docs/theory.md §1; ``rho = 0``)."""
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    return torch.softmax(torch.where(live, scores, neg_inf), dim=-1)

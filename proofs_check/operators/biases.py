"""Positional biases as torch tensors (docs/theory.md §5).

One source of truth: every tensor here is built from ``priors.encodings`` values
(``enc.bias(d)``, float64) or, for the trainable ``LogDistanceBias``, from the same
formula ``b(d) = -alpha ln(1+d)`` written in torch so that gradients reach ``theta``; the
tests check agreement with ``priors`` in float64.

Layout: entry ``[l-1, j-1]`` of an ``(n, n)`` bias is ``b(l - j)`` for keys ``j <= l``
(query ``l``, distance ``d = l - j``) and ``-inf`` above the diagonal (causal). For the
causal-OT prior, which depends on the length, row ``l`` uses ``length = l``.

FlexAttention: ``LogDistanceBias.score_mod()`` returns a ``score_mod`` for
``torch.nn.attention.flex_attention.flex_attention``. On CPU in torch 2.13 FlexAttention
is forward-only; compiled (``torch.compile``) it supports float32/float16/bfloat16 only,
while the eager (unfused, dense) path also runs float64. Use ``attn_mask(n)`` with
``torch.nn.functional.scaled_dot_product_attention`` everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from priors.encodings import Encoding, alibi_slopes

__all__ = [
    "LogDistanceBias",
    "alibi_bias",
    "bias_matrix",
    "multi_head_bias",
    "softmax_with_bias",
]


def _check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    return int(n)


def _from_distances(b: np.ndarray, n: int, dtype: torch.dtype, device: Any) -> torch.Tensor:
    """``(n, n)`` tensor with ``[l-1, j-1] = b[l-j]`` below the diagonal, ``-inf`` above."""
    idx = np.arange(n)
    dist = idx[:, None] - idx[None, :]
    out = np.where(dist >= 0, b[np.clip(dist, 0, None)], -np.inf)
    return torch.as_tensor(out, dtype=torch.float64).to(dtype=dtype, device=device)


def bias_matrix(
    enc: Encoding, n: int, *, dtype: torch.dtype = torch.float64, device: Any = "cpu"
) -> torch.Tensor:
    """Causal bias matrix of an encoding: ``[l-1, j-1] = b(l-j)`` (``j <= l``), ``-inf`` above.

    Built from ``enc.bias`` in float64, then cast. Length-dependent priors
    (``CausalOTPrior``) use ``length = l`` in row ``l``.
    """
    if not isinstance(enc, Encoding):
        raise ValueError(f"enc must be a priors.encodings Encoding, got {type(enc).__name__}")
    n = _check_n(n)
    if not enc.length_dependent:
        return _from_distances(np.asarray(enc.bias(np.arange(n, dtype=float))), n, dtype, device)
    out = np.full((n, n), -np.inf)
    for l in range(1, n + 1):  # noqa: E741 - l is the query length of docs/theory.md
        b = np.asarray(enc.bias(np.arange(l, dtype=float), length=l))
        out[l - 1, :l] = b[::-1]  # key j = l - d
    return torch.as_tensor(out, dtype=torch.float64).to(dtype=dtype, device=device)


def multi_head_bias(
    encs: Sequence[Encoding], n: int, *, dtype: torch.dtype = torch.float64, device: Any = "cpu"
) -> torch.Tensor:
    """``(H, n, n)`` stack of ``bias_matrix`` for one encoding per head."""
    if len(encs) == 0:
        raise ValueError("encs must name at least one encoding")
    return torch.stack([bias_matrix(e, n, dtype=dtype, device=device) for e in encs])


def alibi_bias(
    num_heads: int,
    n: int,
    *,
    variant: str = "reference",
    dtype: torch.dtype = torch.float64,
    device: Any = "cpu",
) -> torch.Tensor:
    """``(H, n, n)`` ALiBi bias ``-m_h (l - j)`` with the slopes of ``alibi_slopes``."""
    from priors.encodings import ALiBi

    slopes = alibi_slopes(num_heads, variant=variant)
    return multi_head_bias([ALiBi(m) for m in slopes], n, dtype=dtype, device=device)


#: torch's ``softplus`` (``beta = 1``) returns ``x`` itself above this threshold.
_SOFTPLUS_THRESHOLD = 20.0


def _softplus_inverse(y: float) -> float:
    """``theta`` with ``torch.nn.functional.softplus(theta) == y`` (``y > 0``): ``log(e^y - 1)``,
    and ``y`` itself above the threshold, where torch's softplus is the identity (and
    ``e^y`` would overflow from ``y = 710`` on, making ``alpha`` infinite)."""
    if y > _SOFTPLUS_THRESHOLD:
        return y
    return float(np.log(np.expm1(y)))


def _causal_upper(n: int, device: Any) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def softmax_with_bias(scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Causal softmax of ``scores + bias`` over the last dim (docs/theory.md §1, §5).

    ``scores``: ``(..., n, n)``; ``bias``: broadcastable to it (``(n, n)`` or
    ``(H, n, n)``). Entries above the diagonal of either are ignored and come out exactly
    0; rows sum to 1.
    """
    if scores.dim() < 2 or scores.shape[-1] != scores.shape[-2]:
        raise ValueError(f"scores must have shape (..., n, n), got {tuple(scores.shape)}")
    n = scores.shape[-1]
    if bias.dim() < 2 or bias.shape[-2:] != (n, n):
        raise ValueError(f"bias must end in ({n}, {n}), got {tuple(bias.shape)}")
    upper = _causal_upper(n, scores.device)
    logits = (scores + bias).masked_fill(upper, float("-inf"))
    return torch.softmax(logits, dim=-1).masked_fill(upper, 0.0)


class LogDistanceBias(nn.Module):
    """Trainable log-distance bias ``b_h(d) = -alpha_h ln(1+d)`` (docs/theory.md §5, §7).

    ``alpha_h = 1 + margin + softplus(theta_h) >= 1 + margin`` per head: with
    ``margin = delta*`` of ``priors.margin`` the prior stays summable with the selected
    distant-mass growth whatever ``theta`` learns.

    Parameters
    ----------
    num_heads : int
        ``H >= 1``.
    margin : float
        ``delta >= 0``.
    init_alpha : float, optional
        Initial ``alpha`` for every head (``> 1 + margin``); default ``1 + margin +
        softplus(0)``.
    """

    def __init__(self, num_heads: int, margin: float, *, init_alpha: float | None = None):
        super().__init__()
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be an integer >= 1, got {num_heads!r}")
        margin = float(margin)
        if not np.isfinite(margin) or margin < 0:
            raise ValueError(f"margin must be finite and >= 0, got {margin!r}")
        self.num_heads = num_heads
        self.margin = margin
        theta0 = 0.0
        if init_alpha is not None:
            excess = float(init_alpha) - 1.0 - margin
            if not np.isfinite(excess) or excess <= 0:
                raise ValueError(
                    f"init_alpha must be > 1 + margin = {1 + margin}, got {init_alpha!r}"
                )
            theta0 = _softplus_inverse(excess)
        self.theta = nn.Parameter(torch.full((num_heads,), theta0, dtype=torch.float64))

    @property
    def alpha(self) -> torch.Tensor:
        """``(H,)`` exponents ``1 + margin + softplus(theta)``."""
        return 1.0 + self.margin + nn.functional.softplus(self.theta)

    def forward(self, n: int) -> torch.Tensor:
        """``(H, n, n)`` bias, ``-alpha_h ln(1 + l - j)`` for ``j <= l``, ``-inf`` above."""
        n = _check_n(n)
        idx = torch.arange(n, device=self.theta.device)
        dist = (idx[:, None] - idx[None, :]).to(self.theta.dtype)
        logd = torch.log1p(dist.clamp(min=0))
        out = -self.alpha[:, None, None] * logd
        return out.masked_fill(_causal_upper(n, self.theta.device), float("-inf"))

    def attn_mask(self, n: int, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Dense additive float mask ``(H, n, n)`` for ``scaled_dot_product_attention``
        (``-inf`` above the diagonal, so no ``is_causal`` is needed)."""
        out = self.forward(n)
        return out if dtype is None else out.to(dtype)

    def score_mod(self) -> Callable[..., torch.Tensor]:
        """A FlexAttention ``score_mod``: ``score - alpha_h ln(1 + q - k)`` for ``k <= q``,
        ``-inf`` otherwise (forward-only on CPU; see the module docstring).

        The returned function is ``log_distance_score_mod(score, batch, head, q_idx,
        kv_idx)`` (FlexAttention passes the five arguments by position); it holds the
        exponents ``alpha`` computed when it was made, so after ``theta`` changes call
        ``score_mod()`` again.
        """
        alpha = self.alpha  # (H,)

        def log_distance_score_mod(score: torch.Tensor, batch: Any, head: Any, q_idx: Any,
                                   kv_idx: Any) -> torch.Tensor:
            """``score - alpha[head] ln(1 + q_idx - kv_idx)``, ``-inf`` for ``kv_idx > q_idx``."""
            del batch  # the bias is the same for every batch element
            dist = (q_idx - kv_idx).clamp(min=0).to(score.dtype)
            biased = score - alpha[head].to(score.dtype) * torch.log1p(dist)
            return torch.where(q_idx >= kv_idx, biased, torch.full_like(score, float("-inf")))

        return log_distance_score_mod

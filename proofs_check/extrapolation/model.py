"""A small byte-level causal transformer with the positional variants of ``variants``.

Pre-LayerNorm blocks (attention, then a GELU MLP of width ``4 d_model``), byte embedding,
no positional embedding: the only positional information is the variant's, added to the
attention logits (docs/theory.md §5)::

    logits[h, l, j] = s[h, l, j] + b_h(l - j)    (j <= l),   s = q_l . k_j / sqrt(d_head)

and ``A = softmax_causal(logits)``; for ``ot-R`` variants ``A`` is the causal OT operator
of docs/theory.md §2 applied to the scores ``s`` (``proofs_check.operators.causal_ot_attention``).
Fixed biases are built by ``proofs_check.operators.biases.multi_head_bias`` from
``priors.encodings`` (one source of truth); learned ones (T5 buckets, KERPLE-log) are
written in torch and compared with ``priors`` in the tests.

``forward(x, record_rows=R)`` also returns, per layer, the attention of the last ``R``
query rows and their content scores ``s`` (without the bias): what ``evaluate`` needs for
the measured window mass and for the content-score bracket of Theorem 3.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from priors.encodings import Encoding, KerpleLog, T5Buckets, t5_bucket
from proofs_check.extrapolation.variants import T5_BUCKETS, T5_MAX_DISTANCE, Variant
from proofs_check.operators.biases import multi_head_bias

__all__ = ["ByteTransformer", "ModelConfig"]


@dataclass(frozen=True)
class ModelConfig:
    """Architecture and positional variant (``exponent``: the resolved log-distance alpha
    of ``logd``/``margin``, :meth:`Variant.exponent`)."""

    variant: Variant
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    vocab: int = 256
    exponent: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.variant, Variant):
            raise ValueError(f"variant must be a Variant (parse_variant), got {self.variant!r}")
        for name in ("d_model", "n_layers", "n_heads"):
            val = getattr(self, name)
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {val!r}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"d_model must be a multiple of 2 * n_heads, got {self.d_model}, {self.n_heads}"
            )
        if self.variant.kind in ("logd", "margin") and self.exponent is None:
            raise ValueError(f"exponent is required for variant {self.variant.name!r}")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (what the run key hashes)."""
        return asdict(self)

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``."""
        return json.dumps(self.to_dict(), **json_kwargs)


class PositionalBias(nn.Module):
    """The additive bias ``(H, n, n)`` of a variant (``-inf`` above the diagonal)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.variant = cfg.variant
        self.n_heads = cfg.n_heads
        self.exponent = cfg.exponent
        kind = self.variant.kind
        if kind == "t5" and self.variant.learned:
            self.table = nn.Parameter(torch.zeros(cfg.n_heads, T5_BUCKETS))
        elif kind == "kerple" and self.variant.learned:
            # r = softplus(p) > 0; p = ln(e - 1) gives r1 = r2 = 1 at initialisation
            p0 = math.log(math.e - 1.0)
            self.p1 = nn.Parameter(torch.full((cfg.n_heads,), p0))
            self.p2 = nn.Parameter(torch.full((cfg.n_heads,), p0))
        self._cache: dict[tuple[int, str, torch.dtype], torch.Tensor] = {}

    def fixed_encodings(self) -> list[Encoding] | None:
        """The per-head ``priors`` encodings of a fixed bias (None for learned/no bias)."""
        return self.variant.fixed_priors(self.n_heads, self.exponent)

    def priors(self) -> list[Encoding]:
        """The per-head prior predicting the window mass, with the current learned values."""
        kind = self.variant.kind
        if not self.variant.learned:
            return self.variant.constant_score_priors(self.n_heads, self.exponent)
        if kind == "t5":
            table = self.table.detach().double().cpu().numpy()
            return [
                T5Buckets(T5_BUCKETS, T5_MAX_DISTANCE, tuple(map(float, row))) for row in table
            ]
        r1, r2 = self.kerple_params()  # learned kerple-log
        return [
            KerpleLog(float(a), float(b))
            for a, b in zip(r1.detach().double().cpu(), r2.detach().double().cpu(), strict=True)
        ]

    def kerple_params(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(r1, r2)``, each ``(H,)``, positive through softplus."""
        return nn.functional.softplus(self.p1), nn.functional.softplus(self.p2)

    def forward(self, n: int, device: Any, dtype: torch.dtype) -> torch.Tensor | None:
        kind = self.variant.kind
        if kind in ("nope", "rope", "ot"):
            return None
        key = (n, str(device), dtype)
        fixed = self.fixed_encodings()
        if fixed is not None:
            if key not in self._cache:
                self._cache[key] = multi_head_bias(fixed, n, dtype=dtype, device=device)
            return self._cache[key]
        idx = torch.arange(n, device=device)
        dist = idx[:, None] - idx[None, :]  # (n, n), d = l - j
        upper = dist < 0
        if kind == "t5":
            buckets = torch.as_tensor(
                t5_bucket(np.arange(n), T5_BUCKETS, T5_MAX_DISTANCE), device=device
            )  # (n,) bucket of each distance, from priors
            b = self.table.to(dtype)[:, buckets]  # (H, n): b_h(d)
            out = b[:, dist.clamp(min=0)]  # (H, n, n)
        else:  # kerple
            r1, r2 = self.kerple_params()
            d = dist.clamp(min=0).to(dtype)  # (n, n)
            out = -r1.to(dtype)[:, None, None] * torch.log1p(r2.to(dtype)[:, None, None] * d)
        return out.masked_fill(upper, float("-inf"))


def _rope(x: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (base 10000) of ``x``: ``(B, H, n, dh)``, pairs ``(2i, 2i+1)``."""
    n, dh = x.shape[-2], x.shape[-1]
    inv = 1.0 / (10000.0 ** (torch.arange(0, dh, 2, device=x.device, dtype=torch.float64) / dh))
    ang = torch.arange(n, device=x.device, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)  # (n, dh/2)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, pos: PositionalBias):
        super().__init__()
        self.h, self.dh = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.pos = pos  # shared across layers (one positional prior per model)
        self.variant = cfg.variant

    def forward(
        self, x: torch.Tensor, record_rows: int = 0
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor] | None]:
        bsz, n, dm = x.shape
        q, k, v = self.qkv(x).split(dm, dim=-1)  # each (B, n, dm)
        q, k, v = (t.view(bsz, n, self.h, self.dh).transpose(1, 2) for t in (q, k, v))
        if self.variant.kind == "rope":
            q, k = _rope(q), _rope(k)
        scale = 1.0 / math.sqrt(self.dh)
        bias = None if self.variant.uses_operator else self.pos(n, x.device, q.dtype)
        if self.variant.uses_operator:
            from proofs_check.operators import causal_ot_attention

            s = (q @ k.transpose(-1, -2)) * scale  # (B, H, n, n) content scores
            att = causal_ot_attention(s, self.variant.value).weights
            y = att @ v  # (B, H, n, dh)
        elif bias is None:  # softmax(s) on j <= l
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        else:  # softmax(s + b); b is -inf above the diagonal
            # a 4-D mask: CPU SDPA takes a much slower path for a 3-D (H, n, n) one
            y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias[None],
                                                           scale=scale)
        y = y.transpose(1, 2).reshape(bsz, n, dm)  # (B, n, dm)
        rec = None
        if record_rows:
            # the last r query rows, written out in full: content scores and attention
            r = min(record_rows, n)
            s_r = (q[:, :, n - r :, :] @ k.transpose(-1, -2)) * scale  # (B, H, r, n)
            if self.variant.uses_operator:
                a_r = att[:, :, n - r :, :]
            else:
                logits = s_r if bias is None else s_r + bias[:, n - r :, :]
                upper = torch.arange(n, device=x.device)[None, :] > torch.arange(
                    n - r, n, device=x.device
                )[:, None]  # (r, n): key j > query l
                a_r = torch.softmax(logits.masked_fill(upper, float("-inf")), dim=-1)
            rec = {"attn": a_r.detach(), "scores": s_r.detach()}  # (B, H, r, n) each
        return self.proj(y), rec


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, pos: PositionalBias):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg, pos)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
        )

    def forward(self, x: torch.Tensor, record_rows: int = 0) -> tuple[torch.Tensor, Any]:
        a, rec = self.attn(self.ln1(x), record_rows)
        x = x + a
        return x + self.mlp(self.ln2(x)), rec


class ByteTransformer(nn.Module):
    """``forward(x)``: ``x`` int64 ``(B, n)`` bytes -> logits ``(B, n, 256)`` for the next
    byte, and (``record_rows > 0``) a list with one record per layer."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.pos = PositionalBias(cfg)
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, self.pos) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(
        self, x: torch.Tensor, record_rows: int = 0
    ) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
        h = self.embed(x)  # (B, n, d_model)
        recs = []
        for blk in self.blocks:
            h, rec = blk(h, record_rows)
            if rec is not None:
                recs.append(rec)
        return self.head(self.ln_f(h)), recs

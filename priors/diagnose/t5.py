"""T5-family relative buckets as the models compute them: float32 arithmetic, learned tables.

transformers' ``_relative_position_bucket`` (T5, mT5, UMT5, LongT5, Switch: one copied
function) evaluates the large-distance bucket in float32::

    bucket(d) = E + trunc( fl32( fl32( fl32_log( fl32(fl32(d) / E) ) / fl32(ln(D / E)) )
                                 * (N - E) ) ),   capped at N - 1,      d >= E = N // 2,

(``N`` buckets, ``D = max_distance``; the Python float ``ln(D / E)`` enters the float32
division as a float32). Evaluating it in float64, as ``priors.encodings.t5_bucket`` does,
moves some distances to the next bucket (``N = 20, D = 320``: distances 20, 40 and 160).
``ModelT5Buckets`` is ``T5Buckets`` with this float32 bucket function: every division and
product is IEEE float32 (correctly rounded, as torch computes it), and the logarithm is the
correctly rounded float32 log. torch's vectorised float32 log is accurate to one unit in the
last place but not always correctly rounded; where that unit could move a distance across
a bucket boundary (``ambiguous_distances``), torch's own log decides when torch is
importable (the bucket the model computes on this machine), and the output says so.

The decoder's self-attention is causal (``heads``). The encoder's self-attention is
bidirectional, ``N / 2`` buckets per direction; its last query row sees only earlier keys,
through the past half of the table: a causal row with ``ModelT5Buckets(N / 2, D,
table[:N / 2])`` (``encoder_heads``). LongT5's local encoder attention sees only keys at
``|i - j| <= local_radius`` (blocks of ``local_radius + 1``, ``_mask_local_attention_mask``):
its last row is that prior cut to ``local_radius + 1`` keys (``SlidingWindow``); its
transient-global attention adds block-summary keys with their own side bias, which the
diagnosis does not model: those encoder heads are left out, and the output says so.

>>> enc = ModelT5Buckets(num_buckets=20, max_distance=320, table=tuple(range(20)))
>>> [int(enc.bias(d)) for d in (19, 20, 39, 40, 160)]
[11, 12, 13, 14, 18]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from priors.classify import Classification
from priors.diagnose.checkpoint import Checkpoint
from priors.diagnose.config import integer, string
from priors.diagnose.heads import HeadPrior, ModelPriors
from priors.diagnose.windowed import SlidingWindow
from priors.encodings import T5Buckets

__all__ = ["ModelT5Buckets", "ambiguous_distances", "t5_bucket_float32", "t5_priors"]


def _large_bucket(d: np.ndarray, nb: int, md: int, log: Any) -> np.ndarray:
    e = nb // 2
    x = (d.astype(np.float32) / np.float32(e)).astype(np.float32)
    with np.errstate(divide="ignore"):
        lg = log(x)
    y = (lg / np.float32(math.log(md / e))).astype(np.float32)
    z = (y * np.float32(nb - e)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        large = e + np.trunc(np.maximum(z, 0)).astype(np.int64)
    return np.minimum(large, nb - 1)


def _log_cr(x: np.ndarray) -> np.ndarray:
    """The correctly rounded float32 log (float64 log, then rounded)."""
    return np.log(x.astype(np.float64)).astype(np.float32)


def t5_bucket_float32(d: Any, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """Unidirectional T5 bucket of distances ``d >= 0`` in the models' float32 arithmetic
    (module docstring), with the correctly rounded float32 log."""
    d = np.asarray(d, dtype=np.float64)
    di = np.floor(d).astype(np.int64)
    large = _large_bucket(di, num_buckets, max_distance, _log_cr)
    return np.where(di < num_buckets // 2, di, large)


def ambiguous_distances(starts: list[int], nb: int, md: int) -> list[int]:
    """Distances next to a bucket boundary whose bucket changes when the float32 log moves
    by one unit in the last place (where torch's log may differ from the correctly rounded
    one)."""
    out = []
    for s in starts[nb // 2 + 1:]:
        for d in (s - 1, s):
            x = np.float32(np.float32(d) / np.float32(nb // 2))
            lg = _log_cr(np.array([x]))
            up = np.nextafter(lg, np.float32(np.inf))
            down = np.nextafter(lg, np.float32(-np.inf))
            b = {int(_large_bucket(np.array([d]), nb, md, lambda _x, v=v: v)[0])
                 for v in (lg, up, down)}
            if len(b) > 1:
                out.append(d)
    return sorted(set(out))


def _torch_buckets(ds: list[int], nb: int, md: int) -> dict[int, int] | None:
    """torch's own float32 bucket of ``ds`` (a vectorised evaluation, as in the models),
    or ``None`` when torch is not importable."""
    try:
        import torch
    except ImportError:
        return None
    pad = (ds * (64 // max(len(ds), 1) + 1))[:64]
    x = torch.tensor(pad, dtype=torch.long)
    e = nb // 2
    large = e + (torch.log(x.float() / e) / math.log(md / e) * (nb - e)).to(torch.long)
    large = torch.clamp(large, max=nb - 1)
    return {d: int(b) for d, b in zip(pad, large.tolist(), strict=True)}


@dataclass(frozen=True)
class ModelT5Buckets(T5Buckets):
    """``T5Buckets`` with the models' float32 bucket function (module docstring);
    ``overrides`` pins the bucket of distances next to a boundary as torch computes it."""

    overrides: tuple[tuple[int, int], ...] = ()
    name = "t5-float32"

    def _buckets(self, d: np.ndarray) -> np.ndarray:
        b = t5_bucket_float32(d, self.num_buckets, self.max_distance)
        for dist, bucket in self.overrides:
            b = np.where(np.floor(d) == dist, bucket, b)
        return b

    def bucket_starts(self) -> list[int]:
        """``start_k``: the smallest distance with ``bucket(d) >= k`` (bisection on the
        float32 bucket function, which is nondecreasing: every float32 operation and the
        correctly rounded log are monotone)."""
        nb, md = self.num_buckets, self.max_distance
        k = np.arange(nb, dtype=np.int64)
        lo = np.zeros(nb, dtype=np.int64)
        hi = np.full(nb, md, dtype=np.int64)
        while np.any(lo < hi):
            mid = lo + (hi - lo) // 2
            above = self._buckets(mid.astype(np.float64)) >= k
            hi = np.where(above, mid, hi)
            lo = np.where(above, lo, mid + 1)
        return [int(v) for v in lo]

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        return np.asarray(self.table)[self._buckets(d)]

    @property
    def params(self) -> dict:
        out = {"num_buckets": self.num_buckets, "max_distance": self.max_distance,
               "table": list(self.table), "arithmetic": "float32 (as the models)"}
        if self.overrides:
            out["torch_log_buckets"] = [list(o) for o in self.overrides]
        return out


def model_buckets(nb: int, md: int, table: Any) -> tuple[ModelT5Buckets, str | None]:
    """The float32 prior, with boundary distances decided by torch's log when they are
    ambiguous (and a note saying so)."""
    enc = ModelT5Buckets(num_buckets=nb, max_distance=md, table=tuple(table))
    amb = ambiguous_distances(enc.bucket_starts(), nb, md)
    if not amb:
        return enc, None
    theirs = _torch_buckets(amb, nb, md)
    if theirs is None:
        return enc, (f"distances {amb} lie within one float32 unit of a bucket boundary: "
                     "torch's log may put them in the neighbouring bucket (torch is not "
                     "installed to decide; the correctly rounded log is used)")
    ours = {d: int(enc._buckets(np.array([float(d)]))[0]) for d in amb}
    moved = tuple((d, b) for d, b in sorted(theirs.items()) if ours[d] != b)
    if not moved:
        return enc, None
    enc = ModelT5Buckets(num_buckets=nb, max_distance=md, table=tuple(table), overrides=moved)
    return enc, (f"distances {[d for d, _ in moved]} sit on a bucket boundary where torch's "
                 "float32 log differs from the correctly rounded one: their buckets are "
                 "torch's, as the model computes them here")


_DECODER_BIAS = re.compile(
    r"(?:^|\.)decoder\.block\.(\d+)\.layer\.0\.SelfAttention\.relative_attention_bias\.weight$"
)
_ENCODER_BIAS = re.compile(
    r"(?:^|\.)encoder\.block\.(\d+)\.layer\.0\.(?:SelfAttention|LocalSelfAttention|"
    r"TransientGlobalSelfAttention)\.relative_attention_bias\.weight$"
)


def _tables(ckpt: Checkpoint, pattern: re.Pattern[str], nb: int, nh: int) -> dict[int, Any]:
    found: dict[int, Any] = {}
    for key in ckpt.keys():
        m = pattern.search(key)
        if m:
            table = np.asarray(ckpt.tensor(key), dtype=np.float64)
            if table.shape != (nb, nh):
                raise ValueError(
                    f"{key}: expected shape ({nb}, {nh}) (num_buckets, num_heads), "
                    f"got {table.shape}")
            if not np.all(np.isfinite(table)):
                raise ValueError(f"{key}: the table holds non-finite values")
            found[int(m.group(1))] = table
    return found


def _build(tables: dict[int, Any], stack: str, nbk: int, md: int, nh: int,
           local: int | None, notes: list[str]) -> list[HeadPrior]:
    out = []
    shared = len(tables) == 1
    for layer in sorted(tables):
        t = tables[layer][:nbk]
        for h in range(nh):
            enc, note = model_buckets(nbk, md, t[:, h])
            if note and note not in notes:
                notes.append(f"{stack}: {note}")
            params = {**enc.params, "saturation_distance": enc.saturation,
                      "source_layer": layer}
            prior = enc if local is None else SlidingWindow(base=enc, span=local + 1)
            if local is not None:
                params["local_radius"] = local
            out.append(HeadPrior(None if shared else (layer,), h, "relative-buckets", params,
                                 prior, prior.classify(), stack))
    return out


def _notes(nb: int, md: int, encoder_kind: str,
           local: int | None) -> tuple[list[str], str | None]:
    """The notes on the decoder's and the encoder's buckets, and why encoder heads are left
    out (``None`` when they are not)."""
    notes = [
        "decoder self-attention (causal): bias table_h[bucket(d)], unidirectional buckets "
        f"(num_buckets = {nb}, max_distance = {md}) in float32 as the models compute them; "
        "T5 adds it to unscaled q.k",
    ]
    if encoder_kind == "local" and local is not None:
        notes.append(f"LongT5 encoder: local attention, each query sees keys within "
                     f"local_radius = {local}; its last row is the past half of the buckets "
                     f"cut to {local + 1} keys (encoder_heads)")
        return notes, None
    if encoder_kind == "full":
        notes.append(
            "encoder (bidirectional): its last query row sees only earlier keys, through the "
            f"past half of the bidirectional buckets (num_buckets/2 = {nb // 2}): reported in "
            "encoder_heads as that causal row; the other rows also see later keys, and both "
            "directions have a constant tail, so every encoder row dilutes too")
        return notes, None
    why = (f"LongT5 encoder_attention_type {encoder_kind!r}: block-summary (global) keys with "
           "their own side bias are not modelled, so the encoder heads are left out")
    return [*notes, why], why


def t5_priors(ckpt: Checkpoint, cfg: dict[str, Any], mt: str, nl: int,
              nh: int) -> ModelPriors:
    """Decoder heads from the decoder's tables, encoder heads from the encoder's last row
    (module docstring)."""
    nb = integer(cfg, "relative_attention_num_buckets", 32, minimum=2)
    md = integer(cfg, "relative_attention_max_distance", 128, minimum=2)
    if md <= nb // 2:
        raise ValueError(f"config: relative_attention_max_distance must exceed "
                         f"num_buckets // 2 = {nb // 2}, got {md}")
    dec_layers = integer(cfg, "num_decoder_layers", nl, minimum=1)
    encoder_kind, local = "full", None
    if mt == "longt5":
        encoder_kind = string(cfg, "encoder_attention_type", "local")
        local = integer(cfg, "local_radius", 127, minimum=0)
    notes, encoder_note = _notes(nb, md, encoder_kind, local)
    if not ckpt.has_weights:
        notes.append(
            "no weights: the learned tables are unknown, so no masses; the class holds for "
            "every table (constant bias beyond the last bucket)")
        cls = Classification(
            "dilutes", "W/l",
            {"test": "constant bias table[-1] beyond the last bucket boundary (any table)"})
        heads = [HeadPrior(None, h, "relative-buckets", {"num_buckets": nb, "max_distance": md},
                           None, cls) for h in range(nh)]
        return ModelPriors(mt, "relative-buckets", dec_layers, nh, heads, notes=notes,
                           encoder_note=encoder_note or "no weights: encoder tables unknown")
    dec = _tables(ckpt, _DECODER_BIAS, nb, nh)
    enc_tables = _tables(ckpt, _ENCODER_BIAS, nb, nh)
    if not dec and not enc_tables:
        raise ValueError(f"{mt}: no relative_attention_bias weights found in "
                         f"{ckpt.weight_files}")
    if not dec:
        notes.append("no decoder tables in the weights (encoder-only checkpoint)")
    elif len(dec) > 1:
        notes.append(f"each decoder layer has its own table ({len(dec)} layers)")
    else:
        notes.append("decoder block 0's table is shared by every decoder layer (layers = all)")
    heads = _build(dec, "decoder", nb, md, nh, None, notes)
    encoder: list[HeadPrior] = []
    if encoder_note is None:
        if nb // 2 >= 2 and md > nb // 4:
            encoder = _build(enc_tables, "encoder-last-row", nb // 2, md, nh,
                             local if encoder_kind == "local" else None, notes)
        else:
            encoder_note = (f"num_buckets // 2 = {nb // 2} past-side buckets with "
                            f"max_distance = {md}: too few to form the encoder's causal row")
    return ModelPriors(mt, "relative-buckets", dec_layers, nh, heads, encoder, notes,
                       encoder_note=encoder_note)

"""From a checkpoint's ``config.json`` (and weights) to one positional prior per head.

Each model family maps to one mechanism of docs/theory.md §5 (docs/theory.md §5):

* ``alibi`` (BLOOM, MPT, Falcon with ``alibi: true``, any config saying ALiBi): the bias
  ``-m_h d`` with the family's own slopes and scale, the same in every layer;
* ``relative-buckets`` (T5, mT5, UMT5, LongT5, Switch): the decoder's causal self-attention
  adds ``table_h[bucket(d)]`` (``priors.encodings.T5Buckets``, tables read from the
  weights: block 0 for all layers, or each layer's own for UMT5); the bidirectional encoder
  is reported separately through its last query row (see ``encoder_priors``);
* ``rotary`` / ``absolute`` / ``none`` (Llama, Mistral, Qwen, Gemma, GPT-NeoX, GPT-J,
  Phi, GPT-2, OPT, ...): no additive distance bias. A rotary score is ``q^T R(d) k`` with
  ``R(d)`` orthogonal, so ``|s| <= |q| |k| / sqrt(h)`` whatever ``d``: the positional term
  is a bounded change of the scores; learned or sinusoidal absolute embeddings enter the
  scores through bounded inputs. Either way the prior is uniform (``NoPE``) and the
  scores are bounded, so Theorem 3 gives ``M_l(W) <= e^{2B} W / l -> 0``: dilution.
  A sliding-window layer (``layer_types``, Mistral's ``sliding_window``, ...) masks keys at
  ``d >= span`` and is reported as ``SlidingWindow(NoPE, span)``.

``model_priors`` returns a ``ModelPriors`` whose ``heads`` list one ``HeadPrior`` per
(layer, head) group that shares a prior: ``layer=None`` when every layer shares it,
``head=None`` when every head does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from priors.classify import Classification
from priors.diagnose.checkpoint import Checkpoint
from priors.diagnose.windowed import SlidingWindow
from priors.encodings import ALiBi, Encoding, NoPE, T5Buckets, alibi_slopes

__all__ = [
    "ABSOLUTE_FAMILIES",
    "ROTARY_FAMILIES",
    "T5_FAMILIES",
    "HeadPrior",
    "ModelPriors",
    "UnsupportedModel",
    "bfloat16_round",
    "model_priors",
    "mpt_slopes",
]

T5_FAMILIES = ("t5", "mt5", "umt5", "longt5", "switch_transformers")
ROTARY_FAMILIES = (
    "llama", "mistral", "mixtral", "ministral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
    "gemma", "gemma2", "gemma3_text", "phi", "phi3", "phimoe", "gpt_neox", "gpt_neox_japanese",
    "gptj", "starcoder2", "olmo", "olmo2", "olmoe", "stablelm", "cohere", "cohere2",
    "deepseek_v2", "deepseek_v3", "granite", "granitemoe", "persimmon", "codegen", "internlm2",
    "exaone", "glm", "nemotron", "helium", "smollm3", "falcon_h1",
)
ABSOLUTE_FAMILIES = ("gpt2", "gpt_bigcode", "gpt_neo", "opt", "biogpt", "xglm", "ctrl")
_ENCODER_ONLY = ("bert", "roberta", "deberta", "deberta-v2", "distilbert", "electra", "albert")
_FALCON = ("falcon", "RefinedWeb", "RefinedWebModel")
_ROPE_KEYS = (
    "rope_theta", "rope_scaling", "rope_parameters", "rotary_dim", "rotary_pct",
    "rotary_emb_base", "partial_rotary_factor",
)


class UnsupportedModel(ValueError):
    """The configuration names no positional mechanism this module can map."""


@dataclass(frozen=True)
class HeadPrior:
    """The positional prior of one head, or of a group of heads that share it.

    ``encoding`` is ``None`` when the prior cannot be evaluated (a learned table with no
    weights to read); then ``classification`` still holds (the class of every table) and
    no masses are computed. ``measured_encoding`` is the prior transformers' *eager* code
    applies when it differs from the checkpoint's own (Falcon-ALiBi, see ``notes``).
    """

    layer: int | None
    head: int | None
    mechanism: str
    params: dict[str, Any]
    encoding: Encoding | None
    classification: Classification
    stack: str = "decoder"
    notes: tuple[str, ...] = ()
    measured_encoding: Encoding | None = None

    @property
    def eager_encoding(self) -> Encoding | None:
        return self.measured_encoding if self.measured_encoding is not None else self.encoding


@dataclass
class ModelPriors:
    """Everything ``model_priors`` found: the heads, the encoder's heads, and notes."""

    model_type: str
    family: str
    num_layers: int
    num_heads: int
    heads: list[HeadPrior]
    encoder_heads: list[HeadPrior] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    weights: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------- helpers


def _get(cfg: dict[str, Any], *names: str, default: Any = None) -> Any:
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    return default


#: Largest layer/head count read from a config (real models have at most a few hundred).
_MAX_CONFIG_COUNT = 2**16


def _count(cfg: dict[str, Any], names: tuple[str, ...], what: str) -> int:
    value = _get(cfg, *names)
    if (isinstance(value, bool) or not isinstance(value, int)
            or not 1 <= value <= _MAX_CONFIG_COUNT):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:28] + "..."
        raise ValueError(f"config: {what} ({' / '.join(names)}) must be an integer in "
                         f"[1, {_MAX_CONFIG_COUNT}], got {shown}")
    return value


def bfloat16_round(x: Any) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even), returned as float32."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def mpt_slopes(num_heads: int, bias_max: float = 8.0) -> list[float]:
    """MPT's slopes: ``2^(-bias_max k / P)``, ``k = 1..P``, ``P = 2^ceil(log2 H)``; when
    ``P != H`` the even-``k`` slopes first, then the odd ones, cut to ``H`` (MosaicML's
    ``gen_slopes``). With ``bias_max = 8`` they equal ``alibi_slopes(H)``."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be an integer >= 1, got {num_heads!r}")
    p = 1 << (num_heads - 1).bit_length()
    s = [2.0 ** (-bias_max * k / p) for k in range(1, p + 1)]
    if p != num_heads:
        s = (s[1::2] + s[0::2])[:num_heads]
    return s


def _dilutes_bounded(mechanism: str, why: str) -> Classification:
    return Classification(
        "dilutes",
        "W/l",
        {
            "test": "no additive distance bias: uniform prior (NoPE), bounded scores",
            "why": why,
            "theorem": "docs/theory.md §5: M_l(W) <= e^{2B} W / l -> 0 for |s| <= B",
        },
    )


# ------------------------------------------------------------------------------ mechanisms


def _alibi(ckpt: Checkpoint, mt: str, num_layers: int, num_heads: int) -> ModelPriors:
    cfg = ckpt.config
    notes: list[str] = []
    dtype = str(_get(cfg, "torch_dtype", "dtype", default="float32"))
    scale = 1.0
    measured_scale = None
    rounding = None
    if mt == "mpt":
        attn = cfg.get("attn_config") or {}
        bias_max = attn.get("alibi_bias_max", 8)
        if isinstance(bias_max, bool) or not isinstance(bias_max, (int, float)) or bias_max <= 0:
            raise ValueError(f"config: attn_config.alibi_bias_max must be > 0, got {bias_max!r}")
        slopes = mpt_slopes(num_heads, float(bias_max))
        formula = f"2^(-{bias_max:g} k / P), P = 2^ceil(log2 H), even k first (MPT)"
        if bias_max != 8:
            notes.append(
                f"alibi_bias_max = {bias_max:g}: MosaicML's code uses it; transformers' MPT "
                "port always uses 8 (its masses would differ)"
            )
        notes.append(
            "MPT adds the bias unscaled to the scaled scores q.k/sqrt(h); the alibi tensor "
            "is built in float32 and cast to the model dtype"
        )
    elif mt in _FALCON:
        hidden = _count(cfg, ("hidden_size", "n_embd"), "hidden size")
        head_dim = hidden // num_heads
        base = alibi_slopes(num_heads)
        slopes_bf16 = bfloat16_round(np.asarray(base, dtype=np.float32)).astype(np.float64)
        scale = 1.0 / math.sqrt(head_dim)
        slopes = [float(s) * scale for s in slopes_bf16]
        formula = "bf16(2^(-8h/H)) / sqrt(head_dim) (Falcon: slopes cast to bfloat16)"
        rounding = "bfloat16: each entry m * j of the alibi tensor is rounded to bfloat16"
        measured_scale = 2.0
        notes.append(
            "Falcon: slopes are rounded to bfloat16 before use and the bias is divided by "
            f"sqrt(head_dim) = sqrt({head_dim}); each entry m*j (key position j) is itself "
            "rounded to bfloat16, an error up to 2^-9 m j that does not depend on the distance "
            "alone (the measured check absorbs it in the content spread)"
        )
        notes.append(
            "transformers' eager Falcon path (needed for attention weights) adds the ALiBi "
            "term twice (once before the 1/sqrt(h) scaling, once through the mask): it "
            "applies slope 2 m/sqrt(h), unlike its SDPA path and the original code; "
            "--measure compares against the prior the eager path applies"
        )
    else:
        slopes = alibi_slopes(num_heads)
        formula = "2^(-8h/H), Press et al. reference set"
        if mt != "bloom":
            notes.append(
                f"{mt}: the config says ALiBi; the standard slopes 2^(-8h/H) and an unscaled "
                "bias are assumed (check the model's code)"
            )
        else:
            notes.append("BLOOM adds the bias unscaled (baddbmm with beta = 1) to q.k/sqrt(h)")
    if rounding is None and dtype in ("bfloat16", "float16"):
        rounding = f"{dtype}: the alibi tensor m * j is cast to the model dtype"
    heads = []
    for h, m in enumerate(slopes):
        params = {"slope": m, "slope_formula": formula, "heads": num_heads}
        if mt in _FALCON:
            params["slope_bf16"] = m / scale
            params["scale"] = scale
        if rounding:
            params["rounding"] = rounding
        enc = ALiBi(slope=m)
        heads.append(
            HeadPrior(
                layer=None,
                head=h,
                mechanism="alibi",
                params=params,
                encoding=enc,
                classification=enc.classify(),
                measured_encoding=None if measured_scale is None else ALiBi(measured_scale * m),
            )
        )
    notes.insert(0, f"ALiBi slopes shared by all {num_layers} layers (layer = all)")
    return ModelPriors(mt, "alibi", num_layers, num_heads, heads, notes=notes)


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
                    f"got {table.shape}"
                )
            if not np.all(np.isfinite(table)):
                raise ValueError(f"{key}: the table holds non-finite values")
            found[int(m.group(1))] = table
    return found


def _t5(ckpt: Checkpoint, mt: str, num_layers: int, num_heads: int) -> ModelPriors:
    cfg = ckpt.config
    nb = _get(cfg, "relative_attention_num_buckets", default=32)
    md = _get(cfg, "relative_attention_max_distance", default=128)
    for name, v in (("relative_attention_num_buckets", nb),
                    ("relative_attention_max_distance", md)):
        if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= 10**18:
            shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:28] + "..."
            raise ValueError(f"config: {name} must be an integer in [2, 1e18], got {shown}")
    dec_layers = _get(cfg, "num_decoder_layers", default=num_layers)
    notes = [
        "decoder self-attention (causal): bias table_h[bucket(d)], unidirectional buckets "
        f"(num_buckets = {nb}, max_distance = {md}); T5 adds it to unscaled q.k",
        "encoder (bidirectional): its last query row sees only earlier keys, through the "
        f"past half of the bidirectional buckets (num_buckets/2 = {nb // 2}): reported in "
        "encoder_heads as that causal row; the other rows also see later keys, and both "
        "directions have a constant tail, so every encoder row dilutes too",
    ]
    heads: list[HeadPrior] = []
    encoder: list[HeadPrior] = []
    if not ckpt.has_weights:
        notes.append(
            "no weights: the learned tables are unknown, so no masses; the class holds for "
            "every table (constant bias beyond the last bucket)"
        )
        cls = Classification(
            "dilutes",
            "W/l",
            {"test": "constant bias table[-1] beyond the last bucket boundary (any table)"},
        )
        heads = [
            HeadPrior(None, h, "relative-buckets", {"num_buckets": nb, "max_distance": md},
                      None, cls)
            for h in range(num_heads)
        ]
        return ModelPriors(mt, "relative-buckets", dec_layers, num_heads, heads, notes=notes)
    dec = _tables(ckpt, _DECODER_BIAS, nb, num_heads)
    enc_tables = _tables(ckpt, _ENCODER_BIAS, nb, num_heads)
    if not dec and not enc_tables:
        raise ValueError(
            f"{mt}: no relative_attention_bias weights found in {ckpt.weight_files}"
        )
    if not dec:
        notes.append("no decoder tables in the weights (encoder-only checkpoint)")
    per_layer = len(dec) > 1
    if per_layer:
        notes.append(f"each decoder layer has its own table ({len(dec)} layers)")
    else:
        notes.append("decoder block 0's table is shared by every decoder layer (layer = all)")

    def build(tables: dict[int, Any], stack: str, nbk: int) -> list[HeadPrior]:
        out = []
        shared = len(tables) == 1
        for layer in sorted(tables):
            t = tables[layer][:nbk]
            for h in range(num_heads):
                enc = T5Buckets(num_buckets=nbk, max_distance=md, table=tuple(t[:, h]))
                params = {
                    "num_buckets": nbk,
                    "max_distance": md,
                    "table": list(enc.table),
                    "saturation_distance": enc.saturation,
                    "source_layer": layer,
                }
                out.append(HeadPrior(None if shared else layer, h, "relative-buckets", params,
                                     enc, enc.classify(), stack))
        return out

    heads = build(dec, "decoder", nb)
    encoder = build(enc_tables, "encoder-last-row", nb // 2) if nb // 2 >= 2 else []
    return ModelPriors(mt, "relative-buckets", dec_layers, num_heads, heads, encoder, notes)


def _sliding_spans(cfg: dict[str, Any], mt: str, num_layers: int) -> tuple[list[int | None], str]:
    sw = cfg.get("sliding_window", 4096 if mt == "mistral" and "sliding_window" not in cfg
                 else None)
    if isinstance(sw, bool) or (sw is not None and (not isinstance(sw, int) or sw < 1)):
        return [None] * num_layers, f"sliding_window = {sw!r} not understood: ignored"
    if sw is None:
        return [None] * num_layers, ""
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == num_layers:
        return [sw if t == "sliding_attention" else None for t in types], "from layer_types"
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not cfg.get("use_sliding_window", False):
            return [None] * num_layers, ""
        first = cfg.get("max_window_layers", 28)
        return [sw if i >= first else None for i in range(num_layers)], (
            f"layers >= max_window_layers = {first}")
    if mt == "gemma2":
        return [sw if (i + 1) % 2 else None for i in range(num_layers)], "every other layer"
    if mt == "gemma3_text":
        pattern = cfg.get("sliding_window_pattern", 6)
        return [sw if (i + 1) % pattern else None for i in range(num_layers)], (
            f"all but every {pattern}th layer")
    if mt in ("mistral", "mixtral", "starcoder2", "ministral"):
        how = "every layer" + (" (transformers' default 4096)" if "sliding_window" not in cfg
                               else "")
        return [sw] * num_layers, how
    return [None] * num_layers, (
        f"sliding_window = {sw} in the config is not interpreted for {mt}: ignored"
    )


def _bounded(ckpt: Checkpoint, mt: str, mechanism: str, num_layers: int,
             num_heads: int) -> ModelPriors:
    cfg = ckpt.config
    max_pos = _get(cfg, "max_position_embeddings", "n_positions", "max_seq_len", "n_ctx",
                   "seq_length")
    params: dict[str, Any] = {"max_position_embeddings": max_pos}
    if mechanism == "rotary":
        params["rope_theta"] = _get(cfg, "rope_theta", "rotary_emb_base", default=10000.0)
        frac = _get(cfg, "partial_rotary_factor", "rotary_pct")
        if frac is not None:
            params["partial_rotary_factor"] = frac
        if cfg.get("rotary_dim") is not None:
            params["rotary_dim"] = cfg["rotary_dim"]
        scaling = _get(cfg, "rope_scaling", "rope_parameters")
        if scaling is not None:
            params["rope_scaling"] = scaling
        why = ("s = q^T R(d) k / sqrt(h) with R(d) orthogonal, so |s| <= |q||k|/sqrt(h) "
               "for every distance: a bounded change of the scores, no additive bias")
    elif mechanism == "absolute":
        why = ("absolute position embeddings enter the scores through bounded inputs: a "
               "bounded change of the scores, no additive distance bias")
    else:
        why = "no positional term: uniform prior"
    spans, how = _sliding_spans(cfg, mt, num_layers)
    notes = [f"{mechanism}: {why}"]
    if mechanism == "absolute" and max_pos is not None:
        notes.append(
            f"learned/sinusoidal absolute positions end at {max_pos}: the model cannot run "
            "longer sequences; masses beyond are the uniform prior's continuation"
        )
    if how:
        notes.append(f"sliding window: {how}")
    heads: list[HeadPrior] = []
    if all(s is None for s in spans):
        heads.append(HeadPrior(None, None, mechanism, params, NoPE(),
                               _dilutes_bounded(mechanism, why)))
    else:
        for layer, span in enumerate(spans):
            if span is None:
                heads.append(HeadPrior(layer, None, mechanism, params, NoPE(),
                                       _dilutes_bounded(mechanism, why)))
            else:
                enc = SlidingWindow(base=NoPE(), span=span)
                heads.append(HeadPrior(layer, None, mechanism, {**params, "sliding_window": span},
                                       enc, enc.classify()))
    return ModelPriors(mt, mechanism, num_layers, num_heads, heads, notes=notes)


# ------------------------------------------------------------------------------ entry point


def _is_alibi(cfg: dict[str, Any]) -> bool:
    attn = cfg.get("attn_config") if isinstance(cfg.get("attn_config"), dict) else {}
    return (
        cfg.get("alibi") is True
        or cfg.get("position_embedding_type") == "alibi"
        or attn.get("alibi") is True
    )


def model_priors(ckpt: Checkpoint) -> ModelPriors:
    """The positional prior of every head of ``ckpt`` (``UnsupportedModel`` otherwise)."""
    cfg = ckpt.config
    mt = cfg.get("model_type")
    if not isinstance(mt, str):
        raise UnsupportedModel("config has no model_type: cannot tell the family")
    layers = ("n_layer", "num_hidden_layers", "n_layers", "num_layers")
    heads_keys = ("n_head", "num_attention_heads", "n_heads", "num_heads")
    if mt in _ENCODER_ONLY:
        raise UnsupportedModel(f"{mt} is an encoder-only (bidirectional) model: Theorem 3 "
                               "is about causal attention rows")
    if mt in T5_FAMILIES:
        out = _t5(ckpt, mt, _count(cfg, layers, "layers"), _count(cfg, heads_keys, "heads"))
    elif mt == "bloom" or mt in _FALCON or mt == "mpt" or _is_alibi(cfg):
        nl, nh = _count(cfg, layers, "layers"), _count(cfg, heads_keys, "heads")
        if mt in _FALCON and not cfg.get("alibi", False):
            out = _bounded(ckpt, mt, "rotary", nl, nh)
        elif mt == "mpt" and not (cfg.get("attn_config") or {}).get("alibi", True):
            learned = cfg.get("learned_pos_emb", True)
            out = _bounded(ckpt, mt, "absolute" if learned else "none", nl, nh)
        else:
            out = _alibi(ckpt, mt, nl, nh)
    elif mt in ROTARY_FAMILIES or (mt not in ABSOLUTE_FAMILIES
                                   and any(k in cfg for k in _ROPE_KEYS)):
        out = _bounded(ckpt, mt, "rotary", _count(cfg, layers, "layers"),
                       _count(cfg, heads_keys, "heads"))
    elif mt in ABSOLUTE_FAMILIES:
        out = _bounded(ckpt, mt, "absolute", _count(cfg, layers, "layers"),
                       _count(cfg, heads_keys, "heads"))
    else:
        raise UnsupportedModel(
            f"unsupported model_type {mt!r}: no ALiBi, rotary, T5-bucket or absolute "
            "positions recognised in its config"
        )
    out.weights = ckpt.weight_files
    out.config = cfg
    return out

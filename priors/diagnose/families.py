"""From a checkpoint's ``config.json`` (and weights) to one positional prior per head.

Each model family maps to one mechanism of docs/theory.md §5, read as the model's own code
applies it (transformers 5.24, and the original code where transformers differs):

* ``alibi`` (BLOOM, MPT, Falcon with ``alibi: true``, any config saying ALiBi): the bias
  ``-m_h d`` with the family's float32 slopes and scale, the same in every layer
  (``priors.diagnose.alibi``);
* ``relative-buckets`` (T5, mT5, UMT5, LongT5, Switch): the decoder's causal self-attention
  adds ``table_h[bucket(d)]`` with the buckets computed in float32 as the models do, tables
  read from the weights; the encoder is reported through its last query row
  (``priors.diagnose.t5``);
* ``rotary`` / ``absolute`` / ``none`` (Llama, Mistral, Qwen, Gemma, Phi, GPT-NeoX, GPT-2,
  GPT-Neo, OPT, ...): no additive distance bias, a uniform prior (``NoPE``) and bounded
  scores, so Theorem 3 gives ``M_l(W) <= e^{2B} W / l -> 0``; a layer that masks keys
  (sliding window, GPT-Neo's local layers, chunked attention) has that window as its prior,
  and a logit temperature (Qwen's ``use_logn_attn``, Llama 4's temperature tuning, YaRN's
  attention factor) scales ``B`` at each length (``priors.diagnose.bounded``).

A head whose mechanism is not modelled is refused: its entry has no prior and says why
(``HeadPrior.refusal``), and no number is printed for it.

``model_priors`` returns a ``ModelPriors`` whose ``heads`` list one ``HeadPrior`` per group
of (layers, head) that share a prior: ``layers=None`` when every layer shares it,
``head=None`` when every head does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from priors.classify import Classification
from priors.diagnose.checkpoint import Checkpoint
from priors.diagnose.config import MAX_LAYERS, section, shown
from priors.encodings import Encoding

__all__ = [
    "ABSOLUTE_FAMILIES",
    "ROTARY_FAMILIES",
    "T5_FAMILIES",
    "HeadPrior",
    "ModelPriors",
    "UnsupportedModel",
    "head_count",
    "layer_ranges",
    "model_priors",
    "uniform_class",
]

T5_FAMILIES = ("t5", "mt5", "umt5", "longt5", "switch_transformers")
ROTARY_FAMILIES = (
    "llama", "llama4", "llama4_text", "mistral", "mixtral", "ministral", "ministral3",
    "qwen", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "gemma3_text", "phi", "phi3", "phimoe", "gpt_neox", "gpt_neox_japanese", "gptj",
    "starcoder2", "olmo", "olmo2", "olmo3", "stablelm", "cohere", "cohere2", "deepseek_v2",
    "deepseek_v3", "granite", "granitemoe", "persimmon", "codegen", "internlm2", "exaone",
    "exaone4", "glm", "glm4", "nemotron", "helium", "smollm3", "gpt_oss",
)
ABSOLUTE_FAMILIES = ("gpt2", "gpt_bigcode", "gpt_neo", "opt", "biogpt", "xglm", "ctrl")
_ENCODER_ONLY = ("bert", "roberta", "deberta", "deberta-v2", "distilbert", "electra", "albert",
                 "modernbert")
_ROPE_KEYS = (
    "rope_theta", "rope_scaling", "rope_parameters", "rotary_dim", "rotary_pct",
    "rotary_emb_base", "partial_rotary_factor",
)
_LAYER_KEYS = ("n_layer", "num_hidden_layers", "n_layers", "num_layers")
_HEAD_KEYS = ("n_head", "num_attention_heads", "n_heads", "num_heads")


class UnsupportedModel(ValueError):
    """The configuration names no positional mechanism this module can map."""


@dataclass(frozen=True)
class HeadPrior:
    """The positional prior of one head, or of a group of heads that share it.

    ``layers`` lists the layers the entry stands for (``None``: every layer); ``head`` the
    head (``None``: every head). ``encoding`` is ``None`` when the prior cannot be evaluated
    (a learned table with no weights to read: ``classification`` still holds, no masses;
    or a refused head: ``refusal`` says why and ``classification`` is ``None``).
    ``measured_encoding`` is the prior transformers' *eager* code applies when it differs
    from the checkpoint's own (Falcon, MPT; see ``notes``). ``temperature`` multiplies the
    logits (``priors.diagnose.scaling``).
    """

    layers: tuple[int, ...] | None
    head: int | None
    mechanism: str
    params: dict[str, Any]
    encoding: Encoding | None
    classification: Classification | None
    stack: str = "decoder"
    notes: tuple[str, ...] = ()
    measured_encoding: Encoding | None = None
    temperature: Any = None
    refusal: str | None = None

    @property
    def eager_encoding(self) -> Encoding | None:
        return self.measured_encoding if self.measured_encoding is not None else self.encoding

    def covers(self, layer: int, head: int) -> bool:
        """Whether this entry stands for ``(layer, head)``."""
        return ((self.layers is None or layer in self.layers)
                and (self.head is None or self.head == head))

    @property
    def layer_label(self) -> str:
        """``all``, one layer, or ranges (``0-2,4``)."""
        return "all" if self.layers is None else layer_ranges(self.layers)


@dataclass
class ModelPriors:
    """Everything ``model_priors`` found: the heads, the encoder's heads, and notes.

    ``weights`` are the weight files present, ``weights_read`` those whose tensor data was
    read (the T5 tables); ``encoder_note`` says why encoder heads are absent when they are.
    """

    model_type: str
    family: str
    num_layers: int
    num_heads: int
    heads: list[HeadPrior]
    encoder_heads: list[HeadPrior] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    weights: list[str] = field(default_factory=list)
    weights_read: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    encoder_note: str | None = None


def layer_ranges(layers: tuple[int, ...] | list[int]) -> str:
    """``[0, 1, 2, 4]`` as ``"0-2,4"``."""
    out: list[str] = []
    ls = sorted(layers)
    start = prev = ls[0]
    for x in [*ls[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(out)


def head_count(cfg: dict[str, Any], names: tuple[str, ...], what: str) -> int:
    """The first present of ``names`` as an integer in ``[1, MAX_LAYERS]``."""
    value = next((cfg[n] for n in names if cfg.get(n) is not None), None)
    if (isinstance(value, bool) or not isinstance(value, int)
            or not 1 <= value <= MAX_LAYERS):
        raise ValueError(f"config: {what} ({' / '.join(names)}) must be an integer in "
                         f"[1, {MAX_LAYERS}], got {shown(value)}")
    return value


def uniform_class(mechanism: str, temperature: Any = None) -> Classification:
    """The class of a uniform prior with bounded scores (docs/theory.md §5, first row of
    the table): dilutes, ``M_l(W) <= e^{2B} W / l``; with a growing temperature, only for
    content spreads below ``B*`` (``priors.diagnose.scaling``)."""
    why = {
        "rotary": "s = q^T R(d) k / sqrt(h) with R(d) orthogonal, so |s| <= |q||k|/sqrt(h) "
        "for every distance: a bounded change of the scores, no additive bias",
        "absolute": "absolute position embeddings enter the scores through bounded inputs: "
        "a bounded change of the scores, no additive distance bias",
    }.get(mechanism, "no positional term: uniform prior")
    evidence = {
        "test": "no additive distance bias: uniform prior (NoPE), bounded scores",
        "why": why,
        "theorem": "docs/theory.md §5: M_l(W) <= e^{2B} W / l -> 0 for |s| <= B",
    }
    rate = "W/l"
    critical = None if temperature is None else temperature.critical_bound()
    if critical is not None:
        rate = "W l^(2 kappa B - 1)"
        evidence["temperature"] = temperature.formula()
        evidence["theorem"] = (
            f"docs/theory.md §5 with the logits times tau(l) = {temperature.formula()}: "
            "M_l(W) <= e^{2 tau(l) B} W / l, which tends to 0 for content spreads "
            f"B < B* = {critical:.6g} only")
        evidence["critical_score_bound"] = critical
    return Classification("dilutes", rate, evidence)


def _text_config(cfg: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A multimodal config's language model (``text_config``) when the top level names no
    layers or heads."""
    if any(cfg.get(k) is not None for k in _LAYER_KEYS):
        return cfg, None
    text = section(cfg, "text_config")
    if text and isinstance(text.get("model_type"), str):
        return text, f"the language model's config (text_config, model_type " \
                     f"{text['model_type']!r}) of the {cfg.get('model_type')!r} checkpoint"
    return cfg, None


def model_priors(ckpt: Checkpoint) -> ModelPriors:
    """The positional prior of every head of ``ckpt`` (``UnsupportedModel`` otherwise)."""
    from priors.diagnose.alibi import FALCON, alibi_priors, is_alibi
    from priors.diagnose.bounded import bounded_priors
    from priors.diagnose.t5 import t5_priors

    cfg, nested = _text_config(ckpt.config)
    mt = cfg.get("model_type")
    if not isinstance(mt, str):
        raise UnsupportedModel("config has no model_type: cannot tell the family")
    if mt in _ENCODER_ONLY:
        raise UnsupportedModel(f"{mt} is an encoder-only (bidirectional) model: Theorem 3 "
                               "is about causal attention rows")
    known = mt in T5_FAMILIES or mt in ROTARY_FAMILIES or mt in ABSOLUTE_FAMILIES
    alibi = mt in ("bloom", "mpt") or mt in FALCON or is_alibi(cfg)
    if not (known or alibi or any(k in cfg for k in _ROPE_KEYS)):
        raise UnsupportedModel(
            f"unsupported model_type {mt!r}: no ALiBi, rotary, T5-bucket or absolute "
            "positions recognised in its config")
    nl = head_count(cfg, _LAYER_KEYS, "layers")
    nh = head_count(cfg, _HEAD_KEYS, "heads")
    if mt in T5_FAMILIES:
        out = t5_priors(ckpt, cfg, mt, nl, nh)
    elif mt in FALCON and not cfg.get("alibi", False):
        out = bounded_priors(cfg, mt, "rotary", nl, nh)
    elif alibi:
        out = alibi_priors(cfg, mt, nl, nh)
    elif mt in ABSOLUTE_FAMILIES:
        out = bounded_priors(cfg, mt, "absolute", nl, nh)
    else:
        out = bounded_priors(cfg, mt, "rotary", nl, nh)
        if mt not in ROTARY_FAMILIES:
            out.notes.insert(0, f"model_type {mt!r} is not a family the diagnosis knows: "
                             "rotary positions are assumed from its rotary keys "
                             f"({', '.join(k for k in _ROPE_KEYS if k in cfg)}); check the "
                             "model's code")
    if nested:
        out.notes.insert(0, f"diagnosed: {nested}")
    out.weights = ckpt.weight_files
    out.weights_read = sorted(ckpt.files_read)
    out.config = cfg
    return out

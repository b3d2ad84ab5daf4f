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

from typing import Any

from priors.diagnose.checkpoint import Checkpoint
from priors.diagnose.config import boolean, section
from priors.diagnose.heads import ModelPriors, UnsupportedModel, head_count

__all__ = [
    "ABSOLUTE_FAMILIES",
    "ROTARY_FAMILIES",
    "T5_FAMILIES",
    "model_priors",
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
#: Encoder-only (bidirectional) families; those after ``modernbert`` carry rotary keys, so
#: without this list they would be read as an unknown rotary decoder (transformers 5.24
#: builds their attention with ``is_causal = False``; ESM with ``is_decoder``, false).
_ENCODER_ONLY = ("bert", "roberta", "deberta", "deberta-v2", "distilbert", "electra", "albert",
                 "modernbert", "esm", "esmc", "eurobert", "gte", "nomic_bert", "dinov3_vit",
                 "eomt_dinov3", "sapiens2", "glmasr_encoder", "dia_encoder")
_ROPE_KEYS = (
    "rope_theta", "rope_scaling", "rope_parameters", "rotary_dim", "rotary_pct",
    "rotary_emb_base", "partial_rotary_factor",
)
_LAYER_KEYS = ("n_layer", "num_hidden_layers", "n_layers", "num_layers")
_HEAD_KEYS = ("n_head", "num_attention_heads", "n_heads", "num_heads", "attention_heads")


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
    prefix_lm = nested is not None and ckpt.config.get("model_type") == "paligemma"
    if prefix_lm:  # its configuration sets the flag on Gemma; its own mask decides
        cfg = {k: v for k, v in cfg.items() if k != "use_bidirectional_attention"}
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
    elif mt in FALCON and not boolean(cfg, "alibi", False):
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
    if prefix_lm:
        out.notes.insert(1, "PaliGemma: the image and prompt prefix attend bidirectionally "
                         "(its own mask); the rows after the prefix are causal, and those "
                         "are the rows diagnosed")
    out.weights = ckpt.weight_files
    out.weights_read = sorted(ckpt.files_read)
    out.config = cfg
    return out

"""Which keys each layer of a rotary or absolute-position family lets a query see.

A layer is ``full`` (every earlier key), ``sliding`` (keys at distances ``d < span``,
transformers' ``sliding_window_overlay``: ``kv > q - sliding_window``), ``chunked`` (the
keys of the query's own block of ``span`` positions, ``create_chunked_causal_mask``) or
``refused`` (a mechanism the diagnosis does not model; the reason says which).

How a family picks its layers follows transformers 5.24's configuration and modeling code
(the tests build each family with transformers' own classes and compare the masks):

* ``layer_types`` in the config, for the families whose modeling reads it (the configs
  that transformers 5 saves carry it);
* otherwise the family's default, as its configuration class computes it: every layer
  (Mistral, Mixtral, Ministral 3, Starcoder2, Phi-3, PhiMoE, Qwen3-MoE: the mask is a
  sliding window whenever ``sliding_window`` is set), a pattern (Gemma 2 every other layer,
  Gemma 3 all but every ``sliding_window_pattern``-th, Cohere 2 all but every 4th, OLMo 3
  all but every 4th, GPT-OSS every other one, Qwen 2/3 from ``max_window_layers`` on when
  ``use_sliding_window``, Qwen2-MoE every other layer below ``max_window_layers``), Llama 4's
  chunked RoPE layers (``no_rope_layers``, ``attention_chunk_size``), SmolLM3's NoPE layers,
  GPT-Neo's ``attention_types`` (``local`` layers see ``window_size`` keys);
* any other family with a ``sliding_window`` set, or a local window or non-attention
  layers named under another key (``OTHER_WINDOWS``, ``OTHER_LAYERS``): refused, since how
  it applies them is not known here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from priors.diagnose.config import boolean, integer, integer_list, shown

__all__ = ["Layer", "layer_plan"]

#: Families whose modeling masks every layer with ``sliding_window`` when it is set (their
#: modeling ignores ``layer_types``).
EVERY_LAYER = ("mistral", "mixtral", "ministral3", "starcoder2", "phi3", "phimoe",
               "qwen3_moe")
#: Families whose modeling reads ``layer_types``.
LAYER_TYPES = ("ministral", "qwen2", "qwen2_moe", "qwen3", "gemma2", "gemma3", "gemma3_text",
               "cohere2", "olmo3", "gpt_oss", "smollm3", "exaone4", "llama4", "llama4_text")
#: Families with no window of any kind in transformers 5.24.
NO_WINDOW = ("llama", "gemma", "phi", "gpt_neox", "gpt_neox_japanese", "gptj", "olmo",
             "olmo2", "stablelm", "cohere", "deepseek_v2", "deepseek_v3", "granite",
             "granitemoe", "persimmon", "codegen", "glm", "glm4", "nemotron", "helium",
             "falcon", "gpt2", "gpt_bigcode", "opt", "biogpt", "xglm", "ctrl", "qwen",
             "internlm2", "exaone")

#: Config keys that name a local attention window (RecurrentGemma's
#: ``attention_window_size``, ...) or layers that are not all attention (hybrids:
#: ``block_types``, ``layers_block_type``, ``attn_layer_indices``, LFM2's
#: ``full_attn_idxs``, MiniMax's ``attn_type_list``, ...) in families the
#: diagnosis does not know: their layers are refused, like an unknown ``sliding_window``.
OTHER_WINDOWS = ("attention_window_size", "attention_window", "local_window_size",
                 "window_size")
OTHER_LAYERS = ("block_types", "layers_block_type", "attn_layer_indices", "attn_layer_period",
                "attn_layer_offset", "hybrid_override_pattern", "hybrid_layer_ids",
                "full_attn_idxs", "attn_type_list")


@dataclass(frozen=True)
class Layer:
    """One layer's key set: ``kind`` in ``full``, ``sliding``, ``chunked``, ``refused``;
    ``span`` the window or chunk size; ``rope`` whether rotary positions are applied;
    ``reason`` why a layer is refused."""

    kind: str
    span: int | None = None
    rope: bool = True
    reason: str = ""


def _window(cfg: dict[str, Any], default: int | None = None) -> int | None:
    if "sliding_window" not in cfg:
        return default
    return integer(cfg, "sliding_window", None, minimum=1)


def _pattern(n: int, sliding: Any, span: int | None) -> list[Layer]:
    return [Layer("sliding", span) if sliding(i) and span is not None else Layer("full")
            for i in range(n)]


def _from_layer_types(cfg: dict[str, Any], n: int, span: int | None,
                      chunk: int | None) -> list[Layer]:
    types = cfg.get("layer_types")
    if (not isinstance(types, list) or len(types) != n
            or not all(isinstance(t, str) for t in types)):
        raise ValueError(f"config: layer_types must be a list of {n} strings (one per "
                         f"layer), got {shown(types)}")
    out = []
    for t in types:
        if t == "full_attention":
            out.append(Layer("full"))
        elif t == "sliding_attention":
            out.append(Layer("sliding", span) if span is not None else Layer(
                "refused", reason="a sliding_attention layer, but the config has no "
                "sliding_window"))
        elif t == "chunked_attention":
            out.append(Layer("chunked", chunk) if chunk is not None else Layer(
                "refused", reason="a chunked_attention layer, but the config has no "
                "attention_chunk_size"))
        else:
            out.append(Layer("refused", reason=f"layer type {t!r} is not causal softmax "
                             "attention over a window the diagnosis models"))
    return out


def _gpt_neo(cfg: dict[str, Any], n: int) -> tuple[list[Layer], str]:
    window = integer(cfg, "window_size", 256, minimum=1)
    kinds = cfg.get("attention_layers")
    if not (isinstance(kinds, list) and len(kinds) == n):
        spec = cfg.get("attention_types", [[["global", "local"], 12]])
        kinds = []
        try:
            for pattern, repeat in spec:
                if (not isinstance(repeat, int) or isinstance(repeat, bool)
                        or not 0 <= repeat <= n or not isinstance(pattern, list)):
                    raise TypeError
                kinds += list(pattern) * repeat
        except (TypeError, ValueError):
            raise ValueError("config: attention_types must be a list of [[types...], "
                             f"repeat] pairs, got {shown(spec)}") from None
    if len(kinds) != n or not all(k in ("global", "local") for k in kinds):
        raise ValueError(f"config: attention_types must give {n} layers of 'global' or "
                         f"'local', got {shown(kinds)}")
    layers = [Layer("sliding", window) if k == "local" else Layer("full") for k in kinds]
    return layers, f"GPT-Neo attention_types: local layers see window_size = {window} keys"


def _llama4(cfg: dict[str, Any], n: int) -> tuple[list[Layer], str]:
    interval = integer(cfg, "no_rope_layer_interval", 4, minimum=1)
    # an empty list (the published Llama 4 configs) means the default pattern, as
    # Llama4TextConfig reads it
    listed = None if cfg.get("no_rope_layers") == [] else integer_list(cfg, "no_rope_layers", n)
    rope = listed or [int((i + 1) % interval != 0) for i in range(n)]
    chunk = (integer(cfg, "attention_chunk_size", None, minimum=1)
             if "attention_chunk_size" in cfg else 8192)
    if cfg.get("layer_types") is not None:
        layers = _from_layer_types(cfg, n, _window(cfg), chunk)
    else:
        layers = [Layer("chunked", chunk) if r and chunk is not None else Layer("full")
                  for r in rope]
    layers = [Layer(x.kind, x.span, bool(r), x.reason) for x, r in zip(layers, rope,
                                                                        strict=True)]
    return layers, (f"Llama 4: RoPE layers attend within chunks of attention_chunk_size = "
                    f"{chunk}, NoPE layers (no_rope_layers = 0) see every key")


def _smollm3(cfg: dict[str, Any], n: int) -> tuple[list[Layer], str]:
    interval = integer(cfg, "no_rope_layer_interval", 4, minimum=1)
    rope = integer_list(cfg, "no_rope_layers", n) or [int((i + 1) % interval != 0)
                                                     for i in range(n)]
    use = boolean(cfg, "use_sliding_window", False)
    span = _window(cfg)
    if cfg.get("layer_types") is not None:
        layers = _from_layer_types(cfg, n, span, None)
        if not use:  # the modeling applies the window only with use_sliding_window
            layers = [Layer("full") if x.kind == "sliding" else x for x in layers]
    else:
        layers = _pattern(n, lambda i: use and not rope[i], span)
    return ([Layer(x.kind, x.span, bool(r), x.reason) for x, r in zip(layers, rope,
                                                                       strict=True)],
            "SmolLM3: NoPE layers (no_rope_layers = 0) are the sliding ones when "
            "use_sliding_window")


def _defaults(cfg: dict[str, Any], mt: str, n: int) -> tuple[list[Layer], str]:
    """The layer pattern the family's configuration class computes without ``layer_types``."""
    if mt in ("qwen2", "qwen3"):
        use = boolean(cfg, "use_sliding_window", False)
        span = _window(cfg, 4096) if use else None  # dropped by the configuration class
        first = integer(cfg, "max_window_layers", 28)
        return (_pattern(n, lambda i: use and i >= first, span),
                f"use_sliding_window = {use}, layers >= max_window_layers = {first}")
    if mt == "qwen2_moe":
        # without use_sliding_window the configuration class stores sliding_window = 0
        use = boolean(cfg, "use_sliding_window", False)
        span = _window(cfg, 4096) if use else None
        first = integer(cfg, "max_window_layers", 28)
        return (_pattern(n, lambda i: use and (i + 1) % 2 and i < first, span),
                f"use_sliding_window = {use}, every other layer below max_window_layers = "
                f"{first}")
    if mt == "gemma2":
        return _pattern(n, lambda i: (i + 1) % 2, _window(cfg, 4096)), "every other layer"
    if mt in ("gemma3", "gemma3_text"):
        k = integer(cfg, "sliding_window_pattern", 6, minimum=1)
        return (_pattern(n, lambda i: (i + 1) % k, _window(cfg, 4096)),
                f"all but every {k}th layer (sliding_window_pattern)")
    if mt == "cohere2":
        k = integer(cfg, "sliding_window_pattern", 4, minimum=1)
        return _pattern(n, lambda i: (i + 1) % k, _window(cfg, 4096)), f"all but every {k}th"
    if mt == "olmo3":
        return _pattern(n, lambda i: (i + 1) % 4, _window(cfg, 4096)), "all but every 4th"
    if mt == "gpt_oss":
        return _pattern(n, lambda i: (i + 1) % 2, _window(cfg, 128)), "every other layer"
    if mt == "ministral":
        span = _window(cfg, 4096)
        return _pattern(n, lambda i: True, span), "every layer"
    if mt == "exaone4":
        span = _window(cfg, 4096)
        k = integer(cfg, "sliding_window_pattern", 4, minimum=1)
        return _pattern(n, lambda i: (i + 1) % k, span), f"all but every {k}th"
    raise AssertionError(mt)  # pragma: no cover (LAYER_TYPES lists the families above)


def layer_plan(cfg: dict[str, Any], mt: str, n: int) -> tuple[list[Layer], str]:
    """Each of the ``n`` layers' key sets for the family ``mt``, and how they were found
    (empty when every layer is full)."""
    bidirectional = cfg.get("use_bidirectional_attention") is True
    if mt in ("gemma", "gemma2", "gemma3", "gemma3_text"):  # typed bool there
        bidirectional = boolean(cfg, "use_bidirectional_attention", False)
    if bidirectional:
        # Gemma, Gemma 2, Gemma 3: attention modules built with is_causal = False (SDPA,
        # flash) or a bidirectional mask (Gemma 3)
        raise ValueError(f"{mt} with use_bidirectional_attention is bidirectional (an "
                         "embedding model): Theorem 3 is about causal attention rows")
    if mt == "gpt_neo":
        return _gpt_neo(cfg, n)
    if mt in ("llama4", "llama4_text"):
        return _llama4(cfg, n)
    if mt == "smollm3":
        return _smollm3(cfg, n)
    if mt in EVERY_LAYER:
        if mt == "qwen3_moe" and not boolean(cfg, "use_sliding_window", False):
            return [Layer("full")] * n, ""
        span = _window(cfg, 4096 if mt == "mistral" else None)
        if span is None:
            return [Layer("full")] * n, ""
        how = "every layer" + (" (transformers' default 4096)" if "sliding_window" not in cfg
                               else "")
        if cfg.get("layer_types") is not None:
            how += f" ({mt}'s modeling ignores layer_types)"
        return [Layer("sliding", span)] * n, how
    if mt in LAYER_TYPES:
        if cfg.get("layer_types") is not None:
            # Qwen's configuration classes drop the window (Qwen2-MoE stores 0) without
            # use_sliding_window: it is not read then
            qwen_off = mt in ("qwen2", "qwen3", "qwen2_moe") and not boolean(
                cfg, "use_sliding_window", False)
            span = None if qwen_off else _window(cfg)
            return _from_layer_types(cfg, n, span, None), "from layer_types"
        return _defaults(cfg, mt, n)
    window = cfg.get("sliding_window")
    if window is not None and window is not False:
        reason = (f"sliding_window = {shown(window)} in the config, but how model_type "
                  f"{mt!r} applies it is not known to the diagnosis")
        return [Layer("refused", reason=reason)] * n, reason
    if mt not in NO_WINDOW:
        for key in OTHER_WINDOWS + OTHER_LAYERS:
            value = cfg.get(key)
            if value is not None and value is not False:
                what = "a local window" if key in OTHER_WINDOWS else "layers of other kinds"
                reason = (f"{key} = {shown(value)} in the config names {what}, but how "
                          f"model_type {mt!r} applies it is not known to the diagnosis")
                return [Layer("refused", reason=reason)] * n, reason
    if mt not in NO_WINDOW and cfg.get("layer_types") is not None:
        layers = _from_layer_types(cfg, n, None, None)
        if any(x.kind != "full" for x in layers):
            reason = f"layer_types of model_type {mt!r} are not known to the diagnosis"
            return [Layer("refused", reason=reason)] * n, reason
    return [Layer("full")] * n, ""

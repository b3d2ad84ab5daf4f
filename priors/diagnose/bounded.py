"""Rotary, absolute and position-free families: a uniform prior per layer, cut by the
layer's mask, with the logit temperature the family applies.

A rotary score is ``q^T R(d) k / sqrt(h)`` with ``R(d)`` orthogonal, so ``|s| <= |q| |k| /
sqrt(h)`` at every distance: the positional term is a bounded change of the scores, not an
additive bias; learned or sinusoidal absolute embeddings enter the scores through bounded
inputs. Either way the prior is uniform (``NoPE``) and Theorem 3 (docs/theory.md §5) gives
``M_l(W) <= e^{2B} W / l -> 0``. Per layer (``priors.diagnose.layers``):

* ``full``: ``NoPE``;
* ``sliding``: ``SlidingWindow(NoPE, span)``, summable by finite support;
* ``chunked``: ``ChunkedWindow(NoPE, chunk)``, at most ``chunk`` keys, no limit;
* ``refused``: no prior, the reason printed instead of numbers.

The temperature of each layer (``priors.diagnose.scaling``): the rotary attention factor of
YaRN / LongRoPE on layers that apply rotary positions (with DeepSeek's extra
``mscale_all_dim`` scale, PhiMoE's short/long ``mscale``), Qwen's ``use_logn_attn``, Llama 4's
``attn_temperature_tuning`` on its NoPE layers, Mistral's ``llama_4_scaling_beta``. Layers
with the same prior and temperature form one entry (``layers`` lists them).
"""

from __future__ import annotations

from typing import Any

from priors.diagnose.config import boolean, integer, number
from priors.diagnose.heads import HeadPrior, ModelPriors, uniform_class
from priors.diagnose.layers import Layer, layer_plan
from priors.diagnose.scaling import (
    Factor,
    Temperature,
    rope_attention_factor,
    rope_dict,
    yarn_mscale,
)
from priors.diagnose.windowed import ChunkedWindow, SlidingWindow
from priors.encodings import NoPE

__all__ = ["bounded_priors"]

_LAYER_TYPE = {"full": "full_attention", "sliding": "sliding_attention",
               "chunked": "chunked_attention"}


def _rope_theta(cfg: dict[str, Any], rp: dict[str, Any]) -> float | None:
    for source, key in ((cfg, "rope_theta"), (cfg, "rotary_emb_base"), (rp, "rope_theta"),
                        (rp, "base")):
        if source.get(key) is not None:
            return number(source, key, positive=True)
    return None


def _temperature(cfg: dict[str, Any], mt: str, layer: Layer,
                 rp: dict[str, Any]) -> Temperature | None:
    factors: list[Factor] = []
    if layer.rope:
        if mt == "phimoe" and rp.get("short_mscale") is not None:
            short = number(rp, "short_mscale", positive=True)
            long = number(rp, "long_mscale", positive=True)
            orig = integer(rp, "original_max_position_embeddings", minimum=1)
            factors.append(Factor("step", value=long**2, strength=short**2, base_length=orig,
                                  source="PhiMoE: cos and sin times short_mscale up to "
                                  "original_max_position_embeddings tokens, long_mscale "
                                  "beyond"))
        else:
            f = rope_attention_factor(cfg, rp)
            if f is not None and mt in ("deepseek_v2", "deepseek_v3"):
                # the factor reaches only the rotary part of q.k (qk_rope_head_dim)
                f = Factor("constant", max(f.value, 1.0), source=f.source
                           + " (rotary part only: bound max(f^2, 1))")
            if f is not None:
                factors.append(f)
    # transformers standardises a legacy rope_scaling {"type": ...} (DeepSeek V2/V3's own
    # configs) to rope_type before the attention reads it
    rope_type = rp.get("rope_type", rp.get("type", "default"))
    if mt in ("deepseek_v2", "deepseek_v3") and rope_type != "default":
        m_all = number(rp, "mscale_all_dim", None)
        factor = number(rp, "factor", None, positive=True)
        if m_all and factor:
            ms = yarn_mscale(factor, m_all)
            factors.append(Factor("constant", ms * ms, source=f"DeepSeek softmax scale times "
                                  f"mscale^2 = {ms * ms:.10g} (mscale_all_dim)"))
    if mt == "qwen" and boolean(cfg, "use_logn_attn", True):
        length = integer(cfg, "seq_length", 8192, minimum=2)
        factors.append(Factor("logn", base_length=length, source=f"Qwen use_logn_attn: query "
                              f"times log_{length}(l) beyond seq_length = {length}"))
    if (mt in ("llama4", "llama4_text") and not layer.rope
            and boolean(cfg, "attn_temperature_tuning", True)):
        a = number(cfg, "attn_scale", 0.1, positive=True)
        floor = integer(cfg, "floor_scale", 8192, minimum=1)
        factors.append(Factor("floor-log", strength=a, base_length=floor, source="Llama 4 "
                              f"attn_temperature_tuning on a NoPE layer (attn_scale = {a:g}, "
                              f"floor_scale = {floor})"))
    beta = number(rp, "llama_4_scaling_beta", None, name="llama_4_scaling_beta")
    if beta:
        orig = integer(rp, "original_max_position_embeddings", minimum=1,
                       name="rope original_max_position_embeddings")
        factors.append(Factor("floor-log", strength=beta, base_length=orig, offset=1,
                              source=f"llama_4_scaling_beta = {beta:g} (query times "
                              f"1 + beta ln(1 + floor(position / {orig})))"))
    return Temperature(tuple(factors)) if factors else None


def _entry(layer: Layer, mechanism: str, params: dict[str, Any],
           temperature: Temperature | None, layers: tuple[int, ...] | None) -> HeadPrior:
    if temperature is not None:
        params = {**params, "temperature": temperature.formula()}
    if layer.kind == "refused":
        return HeadPrior(layers, None, mechanism, params, None, None, refusal=layer.reason)
    if layer.kind == "full":
        return HeadPrior(layers, None, mechanism, params, NoPE(),
                         uniform_class(mechanism, temperature), temperature=temperature)
    if layer.kind == "sliding":
        enc = SlidingWindow(base=NoPE(), span=layer.span)
        params = {**params, "sliding_window": layer.span}
    else:
        enc = ChunkedWindow(base=NoPE(), chunk=layer.span)
        params = {**params, "attention_chunk_size": layer.span}
    return HeadPrior(layers, None, mechanism, params, enc, enc.classify(),
                     temperature=temperature)


def _params(cfg: dict[str, Any], mechanism: str, layer: Layer, rp: dict[str, Any],
            max_pos: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"max_position_embeddings": max_pos}
    if mechanism == "rotary" and layer.rope:
        theta = _rope_theta(cfg, rp)
        params["rope_theta"] = theta if theta is not None else "not in the config"
        frac = cfg.get("partial_rotary_factor", cfg.get("rotary_pct",
                                                        rp.get("partial_rotary_factor")))
        if frac is not None:
            params["partial_rotary_factor"] = frac
        if cfg.get("rotary_dim") is not None:
            params["rotary_dim"] = cfg["rotary_dim"]
        if rp:
            params["rope_parameters"] = rp
    elif mechanism == "rotary":
        params["rope"] = "none (a NoPE layer)"
    return params


def _temperature_notes(temps: list[Temperature]) -> list[str]:
    notes = []
    for t in {str(t.to_dict()["factors"]): t for t in temps}.values():
        notes += [f"logit temperature: {f.source}; tau(l) = {f.formula()}" for f in t.factors]
        b_star = t.critical_bound()
        if b_star is not None:
            notes.append(
                f"with tau(l) = {t.formula()} (growing like ln l) the head dilutes for "
                f"content spreads B < B* = {b_star:.6g} only; brackets at each length use "
                "tau(l) B (docs/theory.md §5 with a length-dependent temperature)")
        else:
            notes.append("brackets use tau B (a constant temperature leaves the class and "
                         "the B = 0 masses unchanged)")
    return notes


def _notes(cfg: dict[str, Any], mt: str, mechanism: str, max_pos: Any, how: str,
           entries: list[HeadPrior]) -> list[str]:
    """What the output says about the family: why it dilutes, its masks and temperatures,
    the mechanisms that bound or reshape it."""
    notes = [f"{mechanism}: {uniform_class(mechanism).evidence['why']}"]
    if mechanism == "absolute" and max_pos is not None:
        notes.append(f"learned/sinusoidal absolute positions end at {max_pos}: the model "
                     "cannot run longer sequences; masses beyond are the uniform prior's "
                     "continuation")
    if how:
        notes.append(f"masked layers: {how}")
    notes += _temperature_notes([e.temperature for e in entries if e.temperature is not None])
    softcap = number(cfg, "attn_logit_softcapping", None, positive=True)
    if softcap is not None:
        notes.append(f"attn_logit_softcapping = {softcap:g}: every logit lies in "
                     f"(-{softcap:g}, {softcap:g}), so the content spread is below "
                     f"{softcap:g} whatever the weights")
    if mt == "gpt_oss":
        notes.append("GPT-OSS: each head's learned sink logit takes mass from every key in "
                     "proportion; window and distant masses are shares of the real keys' "
                     "mass, which the sink leaves unchanged")
    if mt == "qwen" and boolean(cfg, "use_logn_attn", True):
        notes.append("Qwen (original code, not in transformers): its logn table covers "
                     "l < 32768")
    rp = rope_dict(cfg)
    if rp.get("rope_type", rp.get("type")) == "dynamic":
        notes.append("dynamic rope scaling changes the rotary frequencies with l: still a "
                     "bounded change of the scores")
    refused = sorted({e.refusal for e in entries if e.refusal})
    if refused:
        notes.append("refused layers have no prior: " + "; ".join(refused))
    return notes


def bounded_priors(cfg: dict[str, Any], mt: str, mechanism: str, nl: int,
                   nh: int) -> ModelPriors:
    """The per-layer priors of a rotary / absolute / position-free family: layers with the
    same mask, parameters and temperature form one entry."""
    max_pos = next((cfg[k] for k in ("max_position_embeddings", "n_positions", "max_seq_len",
                                     "n_ctx", "seq_length") if cfg.get(k) is not None), None)
    layers, how = layer_plan(cfg, mt, nl)
    groups: dict[tuple[Any, ...], list[int]] = {}
    spec: dict[tuple[Any, ...], tuple[Layer, dict[str, Any], Temperature | None]] = {}
    for i, layer in enumerate(layers):
        rp = rope_dict(cfg, _LAYER_TYPE.get(layer.kind))
        params = _params(cfg, mechanism, layer, rp, max_pos)
        temp = _temperature(cfg, mt, layer, rp)
        key = (layer, repr(sorted(params.items(), key=str)), temp)
        groups.setdefault(key, []).append(i)
        spec[key] = (layer, params, temp)
    entries = []
    for key, members in groups.items():
        layer, params, temp = spec[key]
        shared = None if len(groups) == 1 else tuple(members)
        entries.append(_entry(layer, mechanism, params, temp, shared))
    notes = _notes(cfg, mt, mechanism, max_pos, how, entries)
    return ModelPriors(mt, mechanism, nl, nh, entries, notes=notes)

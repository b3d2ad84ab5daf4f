"""ALiBi families: BLOOM, MPT, Falcon with ``alibi: true``, and any config saying ALiBi.

The slopes are the numbers the models compute, in their arithmetic (float32 tensors in
transformers 5.24 and in MosaicML's code), each operation evaluated here correctly
rounded in numpy:

* BLOOM and Falcon (``_get_alibi_slopes`` / ``build_alibi_tensor``): ``base =
  fl32(2^(-2^-(log2(P) - 3)))`` with ``P = 2^floor(log2 H)``, ``m_k = fl32(base^k)``,
  ``k = 1..P``; for ``H > P`` also ``fl32(base'^k)``, ``k = 1, 3, 5, ...``, with ``base'`` the
  same for ``2P``. Falcon rounds them to bfloat16 and divides the bias by ``sqrt(head_dim)``.
* MPT (``build_mpt_alibi_tensor``, MosaicML's ``gen_slopes``): ``m_k = fl32(1 /
  fl32(2^(fl32(k) * b / P)))``, ``P = 2^ceil(log2 H)``, ``k = 1..P``, the even ``k`` first
  when ``P != H``; ``b = alibi_bias_max``. MosaicML's code reads ``b`` (and ``alibi``,
  ``learned_pos_emb``) from the config; transformers' ``MptModel`` always adds ALiBi with
  ``b = 8`` and has no learned positions, so its prior is reported beside the checkpoint's
  when they differ (``HeadPrior.measured_encoding``, what ``--measure`` checks).

torch's vectorised float32 ``pow`` is accurate to about one unit in the last place, not
correctly rounded: for some heads (32 heads: one of them) transformers' slope is the
neighbouring float32 of the one here, a relative difference of ``2^-24``, which moves
``D_l(W) ~ e^{-m W}`` by at most ``W m 2^-24`` relative (4e-6 at ``W = 512``). Each entry
``m * j`` of the models' ALiBi tensors is itself rounded to float32 (bfloat16 in Falcon),
an error that depends on the key position, not the distance alone; ``--measure`` absorbs
it in the content spread.

>>> [float(m) for m in bloom_slopes(4)]
[0.25, 0.0625, 0.015625, 0.00390625]
>>> float(bloom_slopes(32)[0]) == float(np.float32(2 ** -0.25))
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from priors.diagnose.config import boolean, number, section, string
from priors.diagnose.heads import HeadPrior, ModelPriors, head_count, uniform_class
from priors.encodings import ALiBi, NoPE, alibi_slopes

__all__ = ["FALCON", "alibi_priors", "bfloat16_round", "bloom_slopes", "is_alibi",
           "mpt_slopes"]

FALCON = ("falcon", "RefinedWeb", "RefinedWebModel")
#: Largest MPT ``alibi_bias_max`` whose slopes ``2^-b`` stay nonzero in float32.
MAX_BIAS_MAX = 149


def _f32_pow(base: np.float32, k: int) -> np.float32:
    """``fl32(base^k)``, correctly rounded (``base`` exact in float64, ``k <= 2^16``)."""
    return np.float32(float(base) ** k)


def bloom_slopes(num_heads: int) -> np.ndarray:
    """BLOOM's (and Falcon's) float32 slopes, correctly rounded (module docstring)."""
    p = 2 ** math.floor(math.log2(num_heads))
    base = np.float32(2 ** (-(2 ** -(math.log2(p) - 3))))
    slopes = [_f32_pow(base, k) for k in range(1, p + 1)]
    if p != num_heads:
        extra = np.float32(2 ** (-(2 ** -(math.log2(2 * p) - 3))))
        rest = min(p, num_heads - p)
        slopes += [_f32_pow(extra, k) for k in range(1, 2 * rest, 2)]
    return np.array(slopes, dtype=np.float32)


def mpt_slopes(num_heads: int, bias_max: float = 8.0) -> np.ndarray:
    """MPT's float32 slopes ``fl32(1 / fl32(2^(k b / P)))`` (module docstring)."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be an integer >= 1, got {num_heads!r}")
    p = 2 ** math.ceil(math.log2(num_heads))
    exps = np.arange(1, p + 1, dtype=np.float32) * np.float32(bias_max / p)
    powers = np.array([np.float32(2.0 ** float(e)) for e in exps], dtype=np.float32)
    slopes = (np.float32(1.0) / powers).astype(np.float32)
    if p != num_heads:
        slopes = np.concatenate([slopes[1::2], slopes[0::2]])[:num_heads]
    return slopes


def bfloat16_round(x: Any) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even), returned as float32."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def is_alibi(cfg: dict[str, Any]) -> bool:
    """Whether the config says ALiBi (``alibi: true``, ``position_embedding_type: alibi``,
    MPT's ``attn_config.alibi``)."""
    attn = cfg.get("attn_config")
    return (cfg.get("alibi") is True or cfg.get("position_embedding_type") == "alibi"
            or (isinstance(attn, dict) and attn.get("alibi") is True))


@dataclass
class _Slopes:
    """One family's slopes: the checkpoint's (``None``: no ALiBi there), transformers'
    eager ones where they differ, how they are computed, and what the output says."""

    own: list[float] | None
    eager: list[float] | None
    formula: str
    mechanism: str = "alibi"
    scale: float = 1.0
    rounding: str | None = None
    notes: list[str] = field(default_factory=list)


def _mpt(cfg: dict[str, Any], nh: int) -> _Slopes:
    """MPT: MosaicML's code (the checkpoint's prior) against transformers' (always ALiBi,
    ``b = 8``)."""
    attn = section(cfg, "attn_config")
    alibi = boolean(attn, "alibi", True, "attn_config.alibi")
    bias_max = number(attn, "alibi_bias_max", 8.0, positive=True,
                      name="attn_config.alibi_bias_max")
    if bias_max > MAX_BIAS_MAX:
        raise ValueError(
            f"config: attn_config.alibi_bias_max = {bias_max:g} makes MPT's slopes "
            f"2^(-b k/P) underflow to 0 in float32 (b must be at most {MAX_BIAS_MAX})")
    hf = [float(m) for m in mpt_slopes(nh, 8.0)]
    out = _Slopes(None, hf, "fl32(1/fl32(2^(k b/P))), P = 2^ceil(log2 H), even k first (MPT)",
                  notes=["MPT adds the bias unscaled to the scaled scores q.k/sqrt(h)"])
    if not alibi:
        learned = boolean(cfg, "learned_pos_emb", True)
        out.mechanism = "absolute" if learned else "none"
        out.notes.append(
            f"attn_config.alibi = false: MosaicML's code uses "
            f"{'learned absolute positions' if learned else 'no positions'} (the prior "
            "below); transformers' MptModel always adds ALiBi with alibi_bias_max = 8 and "
            "has no learned positions: --measure checks that prior (eager_prior)")
        return out
    out.own = [float(m) for m in mpt_slopes(nh, bias_max)]
    if bias_max != 8:
        out.notes.append(
            f"alibi_bias_max = {bias_max:g}: MosaicML's code uses it (the prior below); "
            "transformers' MptModel always uses 8: --measure checks that prior (eager_prior)")
    else:
        out.eager = None
    return out


def _falcon(cfg: dict[str, Any], nh: int) -> _Slopes:
    head_dim = head_count(cfg, ("hidden_size", "n_embd"), "hidden size") // nh
    scale = 1.0 / math.sqrt(head_dim)
    own = [float(s) * scale for s in bfloat16_round(bloom_slopes(nh))]
    return _Slopes(
        own, [2.0 * m for m in own], "bf16(BLOOM's float32 slope) / sqrt(head_dim) (Falcon)",
        scale=scale,
        rounding="bfloat16: each entry m * j of the alibi tensor is rounded to bfloat16",
        notes=[
            "Falcon: the float32 slopes are rounded to bfloat16 and the bias is divided by "
            f"sqrt(head_dim) = sqrt({head_dim}); each entry m*j (key position j) is itself "
            "rounded to bfloat16, an error up to 2^-9 m j that does not depend on the "
            "distance alone (the measured check absorbs it in the content spread)",
            "transformers' eager Falcon path (needed for attention weights) adds the ALiBi "
            "term twice (once before the 1/sqrt(h) scaling, once through the mask): it "
            "applies slope 2 m/sqrt(h), unlike its SDPA path and the original code; "
            "--measure checks the prior the eager path applies (eager_prior)"])


def _slopes(cfg: dict[str, Any], mt: str, nh: int) -> _Slopes:
    if mt == "mpt":
        out = _mpt(cfg, nh)
    elif mt in FALCON:
        out = _falcon(cfg, nh)
    elif mt == "bloom":
        out = _Slopes([float(m) for m in bloom_slopes(nh)], None,
                      "fl32(fl32(2^(-8/P))^k) (BLOOM, float32)", notes=[
                          "BLOOM adds the bias unscaled (baddbmm with beta = 1) to q.k/sqrt(h)"])
    else:
        return _Slopes(alibi_slopes(nh), None, "2^(-8h/H), Press et al. reference set (float64)",
                       notes=[f"{mt}: the config says ALiBi; the reference slopes 2^(-8h/H) and "
                              "an unscaled bias are assumed (check the model's code)"])
    out.notes.append(
        "slopes are the model's float32 numbers (each operation correctly rounded); torch's "
        "vectorised pow may give the neighbouring float32 for some heads (relative 2^-24, "
        "moving D_l(W) by at most W m 2^-24 relative)")
    return out


def alibi_priors(cfg: dict[str, Any], mt: str, nl: int, nh: int) -> ModelPriors:
    """One ``ALiBi`` prior per head, shared by every layer (module docstring)."""
    sl = _slopes(cfg, mt, nh)
    dtype = string(cfg, "torch_dtype", None) or string(cfg, "dtype", "float32")
    if sl.rounding is None and dtype in ("bfloat16", "float16"):
        sl.rounding = f"{dtype}: the alibi tensor m * j is cast to the model dtype"
    heads = []
    for h in range(nh):
        params: dict[str, Any] = {"slope_formula": sl.formula, "heads": nh}
        if sl.own is None:  # MPT without ALiBi in MosaicML's code: a uniform prior
            enc, cls, mech = NoPE(), uniform_class(sl.mechanism), sl.mechanism
        else:
            params["slope"] = sl.own[h]
            enc = ALiBi(slope=sl.own[h])
            cls, mech = enc.classify(), "alibi"
        if mt in FALCON:
            params["slope_bf16"] = sl.own[h] / sl.scale
            params["scale"] = sl.scale
        if sl.rounding:
            params["rounding"] = sl.rounding
        eager = None if sl.eager is None else ALiBi(sl.eager[h])
        heads.append(HeadPrior(None, h, mech, params, enc, cls, measured_encoding=eager))
    notes = [f"ALiBi slopes shared by all {nl} layers (layers = all)", *sl.notes]
    return ModelPriors(mt, sl.mechanism, nl, nh, heads, notes=notes)

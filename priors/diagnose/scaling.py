"""Logit temperatures: factors that multiply a head's attention logits, some growing with ``l``.

Several families scale the query (or the rotary ``cos``/``sin``) by a factor ``tau``, so the
logits become ``tau (s_d + b(d))``. For the uniform prior of a rotary or NoPE head
(``b = 0``) the prior is unchanged, but a content spread ``B`` becomes ``tau B``: Theorem 3
(docs/theory.md §5) holds with ``B`` replaced by ``tau(l) B`` at each length ``l``, and

    M_l(W) <= e^{2 tau(l) B} W / l.

With ``tau(l) ~ kappa ln l`` (the length-dependent factors below) the right side is
``~ e^{2B'} W l^{2 kappa B - 1}``: the head still dilutes for content spreads
``B < B* = 1 / (2 kappa)``, but Theorem 3 no longer forces dilution above ``B*`` (the
temperature lets bounded content keep a fixed share). That is docs/theory.md §5 with a
length-dependent temperature; ``B = 0`` masses are those of the uniform prior.

The factors read from a config (each checked against the model's own code by the tests):

* ``rope-attention-factor``: YaRN and LongRoPE multiply ``cos`` and ``sin`` by
  ``f = attention_factor`` (transformers' ``_compute_yarn_parameters`` /
  ``_compute_longrope_parameters``), i.e. both ``q`` and ``k``: ``tau = f^2`` on the rotated
  dimensions, ``1`` on any others (``tau <= max(f^2, 1)``, the bound used); constant in ``l``;
* ``logn`` (Qwen's original code, ``use_logn_attn``): the query at position ``p`` is
  scaled by ``log_L(p + 1)`` when ``p + 1 > L = seq_length``: ``tau(l) = max(1, ln l / ln L)``;
* ``step`` (PhiMoE's ``short_mscale`` / ``long_mscale`` on ``cos`` and ``sin``): the whole
  sequence uses ``short_mscale^2`` up to ``original_max_position_embeddings`` tokens and
  ``long_mscale^2`` beyond;
* ``floor-log`` (Llama 4's ``attn_temperature_tuning`` on its NoPE layers):
  ``tau(l) = 1 + attn_scale ln(1 + floor(l / floor_scale))``; Mistral's
  ``llama_4_scaling_beta`` (Ministral 3, Mistral 4): ``tau(l) = 1 + beta ln(1 +
  floor((l - 1) / original_max_position_embeddings))`` (position ids start at 0).

``tau`` is evaluated in float64; the models evaluate it in float32 (relative ~1e-7), which
moves a bracket far less than its printed digits.

>>> t = Temperature((Factor("floor-log", strength=0.1, base_length=8192),))
>>> t.at(8191), round(t.at(8192), 12), t.critical_bound()
(1.0, 1.069314718056, 5.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from priors.diagnose.config import integer, number, section, string

__all__ = ["Factor", "Temperature", "rope_attention_factor", "rope_dict", "yarn_mscale"]


@dataclass(frozen=True)
class Factor:
    """One multiplicative factor of the logits (see the module docstring for the kinds)."""

    kind: str
    value: float = 1.0
    base_length: int | None = None
    strength: float = 0.0
    offset: int = 0
    source: str = ""

    def at(self, length: int) -> float:
        """The factor at query length ``length`` (the row of query position ``l - 1``)."""
        if self.kind == "constant":
            return self.value
        if self.kind == "logn":
            return max(1.0, math.log(length) / math.log(self.base_length))
        if self.kind == "step":
            return self.value if length > self.base_length else self.strength
        # floor-log
        return 1.0 + self.strength * math.log1p((length - self.offset) // self.base_length)

    @property
    def kappa(self) -> float:
        """``lim tau(l) / ln l``: 0 for a constant factor."""
        if self.kind == "logn":
            return 1.0 / math.log(self.base_length)
        if self.kind == "floor-log":
            return self.strength
        return 0.0

    def formula(self) -> str:
        if self.kind == "constant":
            return f"{self.value:.10g}"
        if self.kind == "logn":
            return f"max(1, ln l / ln {self.base_length})"
        if self.kind == "step":
            return f"({self.strength:.10g} if l <= {self.base_length} else {self.value:.10g})"
        shift = "l" if self.offset == 0 else f"(l - {self.offset})"
        return f"1 + {self.strength:g} ln(1 + floor({shift} / {self.base_length}))"


@dataclass(frozen=True)
class Temperature:
    """The product of ``factors``: ``tau(l)``, the multiplier of a head's logits."""

    factors: tuple[Factor, ...] = field(default_factory=tuple)

    def at(self, length: int) -> float:
        out = 1.0
        for f in self.factors:
            out *= f.at(length)
        return out

    @property
    def length_dependent(self) -> bool:
        return any(f.kind != "constant" for f in self.factors)

    def critical_bound(self) -> float | None:
        """``B* = 1 / (2 kappa)``: content spreads below it still dilute (``None`` for a
        constant temperature, which leaves the class as it is; 0 when two factors grow)."""
        growing = [f for f in self.factors if f.kappa > 0]
        if not growing:
            return None
        if len(growing) > 1:
            return 0.0
        c = 1.0
        for f in self.factors:
            if f.kappa == 0:
                c *= max(f.value, f.strength) if f.kind == "step" else f.value
        return 1.0 / (2.0 * c * growing[0].kappa)

    def formula(self) -> str:
        return " * ".join(f.formula() for f in self.factors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "formula": self.formula(),
            "factors": [{"kind": f.kind, "formula": f.formula(), "source": f.source}
                        for f in self.factors],
            "length_dependent": self.length_dependent,
            "critical_score_bound": self.critical_bound(),
        }


def rope_dict(cfg: dict[str, Any], layer_type: str | None = None) -> dict[str, Any]:
    """The rotary parameters: ``rope_parameters`` (transformers 5; per layer type when
    nested) or the legacy ``rope_scaling``, ``{}`` when neither is given."""
    for key in ("rope_parameters", "rope_scaling"):
        rp = section(cfg, key)
        if not rp:
            continue
        nested = {k: v for k, v in rp.items() if isinstance(v, dict)}
        if nested and layer_type is not None and layer_type in nested:
            return nested[layer_type]
        if nested and all(isinstance(v, dict) for v in rp.values()):
            # nested by layer type, no type given: the first one stands for all
            return next(iter(nested.values()))
        return rp
    return {}


def yarn_mscale(scale: float, m: float = 1.0) -> float:
    """YaRN's ``0.1 m ln(scale) + 1`` (1 for ``scale <= 1``), as transformers'
    ``get_mscale``."""
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def rope_attention_factor(cfg: dict[str, Any], rp: dict[str, Any]) -> Factor | None:
    """YaRN's or LongRoPE's attention factor ``f`` as the constant temperature ``f^2``
    (``max(f^2, 1)`` with a partial rotary factor), computed as transformers does;
    ``None`` for the other rope types."""
    rope_type = string(rp, "rope_type", None, "rope_type") or string(rp, "type", "default",
                                                                      "rope type")
    if rope_type not in ("yarn", "longrope"):
        return None
    orig = cfg.get("original_max_position_embeddings")
    if orig is None:
        orig = rp.get("original_max_position_embeddings")
    if orig is None:
        orig = cfg.get("max_position_embeddings")
    orig = integer({"v": orig}, "v", minimum=1,
                   name=f"{rope_type} original_max_position_embeddings")
    factor = number(rp, "factor", None, positive=True, name=f"{rope_type} factor")
    if factor is None:
        max_pos = number(cfg, "max_position_embeddings", positive=True)
        if max_pos is None:
            raise ValueError(f"config: {rope_type} rope scaling without factor needs "
                             "max_position_embeddings")
        factor = max_pos / orig
    f = number(rp, "attention_factor", None, positive=True, name="attention_factor")
    how = "attention_factor"
    if f is None and rope_type == "yarn":
        m = number(rp, "mscale", None, name="mscale")
        m_all = number(rp, "mscale_all_dim", None, name="mscale_all_dim")
        if m and m_all:
            f, how = yarn_mscale(factor, m) / yarn_mscale(factor, m_all), "mscale/mscale_all_dim"
        else:
            f, how = yarn_mscale(factor), "0.1 ln(factor) + 1"
    elif f is None:
        if factor > 1 and orig < 2:  # ln(orig) = 0: transformers divides by zero too
            raise ValueError(f"config: longrope original_max_position_embeddings = {orig} "
                             "leaves the attention factor sqrt(1 + ln(factor) / "
                             "ln(original_max_position_embeddings)) undefined (needs >= 2)")
        f = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
        how = "sqrt(1 + ln(factor) / ln(original_max_position_embeddings))"
    partial = number(rp, "partial_rotary_factor", None) or number(
        cfg, "partial_rotary_factor", None)
    value = f * f if partial in (None, 1.0) else max(f * f, 1.0)
    source = (f"{rope_type} attention factor f = {f:.10g} ({how}, factor = {factor:.10g}) "
              "on cos and sin: logits times f^2"
              + ("" if partial in (None, 1.0) else
                 f" on the rotated part only (partial_rotary_factor = {partial:g}): bound "
                 "max(f^2, 1)"))
    if value == 1.0:
        return None
    return Factor("constant", value=value, source=source)

"""The value types of a checkpoint's priors, shared by every family's reader.

``HeadPrior`` is one head's (or a group of heads') prior, ``ModelPriors`` everything read
from one checkpoint; ``head_count`` and ``uniform_class`` are what the family readers
(``alibi``, ``t5``, ``bounded``) need besides their own arithmetic. ``families.model_priors``
dispatches to those readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from priors.classify import Classification
from priors.diagnose.config import MAX_LAYERS, shown
from priors.encodings import Encoding

__all__ = [
    "HeadPrior",
    "ModelPriors",
    "UnsupportedModel",
    "head_count",
    "layer_ranges",
    "uniform_class",
]


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

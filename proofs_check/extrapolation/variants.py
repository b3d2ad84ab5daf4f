"""The positional variants of the experiment: one name, parsed once, and its prior.

A variant is a name, how its attention logits get their positional part (docs/theory.md §5:
an additive bias ``b_h(d)`` per head, a rotation of queries and keys, or the causal OT
operator of §2 in place of softmax), and the prior ``priors.encodings`` object per head
that predicts its window mass. Learned biases (``t5``, ``kerple-log``) are predicted from
their learned values after training; every other prior is known before training.

======================  =======================================  ==========================
name                    positional part                          prior per head
======================  =======================================  ==========================
``nope``                none                                     ``NoPE``
``rope``                rotary queries/keys (bounded change)     ``NoPE`` (docs/theory.md §5)
``alibi``               ``-m_h d``, ``m_h = 2^(-8h/H)``           ``ALiBi(m_h)``
``alibi-xF``            ``-F m_h d`` (slopes scaled by ``F``)     ``ALiBi(F m_h)``
``t5``                  learned table, 32 buckets, 128           ``T5Buckets(table_h)``
``t5-A``                fixed table ``-A ln(1 + d_b)``, ``d_b``   ``T5Buckets(table)``
                        the first distance of bucket ``b``
``kerple-log``          learned ``-r1 ln(1 + r2 d)``              ``KerpleLog(r1_h, r2_h)``
``kerple-R1-R2``        fixed ``-R1 ln(1 + R2 d)``                ``KerpleLog(R1, R2)``
``logd-A``              ``-A ln(1 + d)``                          ``LogDistance(A)``
``margin-T``            ``-(1 + delta*) ln(1 + d)``, delta* of   ``LogDistance(1 + delta*)``
                        ``priors.margin.select_margin`` at tol T
``ot-R``                causal OT operator at ``rho = R``        ``CausalOTPrior(R)``
======================  =======================================  ==========================

:func:`parse_variant` is the only place a name is read; everything downstream holds the
:class:`Variant` it returns.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_VARIANTS",
    "GPU_VARIANTS",
    "HELDOUT_VARIANTS",
    "QUICK_VARIANTS",
    "T5_BUCKETS",
    "T5_MAX_DISTANCE",
    "Variant",
    "parse_variant",
    "parse_variants",
]

#: T5 bucket layout of the ``t5`` and ``t5-A`` variants (Raffel et al. 2020, unidirectional).
T5_BUCKETS = 32
T5_MAX_DISTANCE = 128

#: The full sweep, the causal OT operator at two values of rho included.
DEFAULT_VARIANTS = (
    "nope",
    "rope",
    "alibi",
    "t5",
    "kerple-log",
    "logd-0.8",
    "logd-1.0",
    "logd-1.1",
    "logd-1.2",
    "margin-0.1",
    "margin-0.01",
    "logd-2",
    "ot-0.3",
    "ot-0.6",
)
#: The ``quick`` preset: the loss model's fitting set (docs/extrapolation.md) and NoPE,
#: the diluting prior outside its domain.
QUICK_VARIANTS = (
    "nope",
    "alibi",
    "logd-0.8",
    "logd-1.0",
    "logd-1.2",
    "margin-0.1",
    "logd-2",
)
#: Variants never used to fit the loss model: exponents near the old threshold, ALiBi with
#: scaled slopes, fixed KERPLE and fixed T5 tables (docs/extrapolation.md).
HELDOUT_VARIANTS = (
    "logd-1.4",
    "alibi-x0.25",
    "alibi-x0.0625",
    "kerple-2-0.02",
    "t5-1.5",
    "t5-2",
)
#: The GPU preset: the softmax variants of the full sweep and the held-out families.
GPU_VARIANTS = tuple(v for v in DEFAULT_VARIANTS if not v.startswith("ot-")) + HELDOUT_VARIANTS

_NUM = r"(\d+(?:\.\d+)?)"
_KINDS_WITH_NUMBERS = {
    "logd": re.compile(r"logd-" + _NUM),
    "margin": re.compile(r"margin-" + _NUM),
    "ot": re.compile(r"ot-" + _NUM),
    "alibi": re.compile(r"alibi-x" + _NUM),
    "t5": re.compile(r"t5-" + _NUM),
    "kerple": re.compile(r"kerple-" + _NUM + "-" + _NUM),
}
_SIMPLE = {"nope": "nope", "rope": "rope", "alibi": "alibi", "t5": "t5", "kerple-log": "kerple"}


@dataclass(frozen=True)
class Variant:
    """One positional variant, parsed from its name.

    ``kind``: ``nope``, ``rope``, ``alibi``, ``t5``, ``kerple``, ``logd``, ``margin`` or
    ``ot``. ``params``: the numbers of the name (the exponent of ``logd``, the tolerance of
    ``margin``, ``rho`` of ``ot``, the slope scale of ``alibi-xF``, ``A`` of ``t5-A``,
    ``(R1, R2)`` of ``kerple-R1-R2``; empty otherwise). ``learned``: the bias is trained.
    """

    name: str
    kind: str
    params: tuple[float, ...] = ()
    learned: bool = False

    @property
    def value(self) -> float:
        """The one number of ``logd-A``, ``margin-T``, ``ot-R``, ``alibi-xF``, ``t5-A``."""
        if len(self.params) != 1:
            raise ValueError(f"variant {self.name!r} has no single parameter")
        return self.params[0]

    @property
    def uses_operator(self) -> bool:
        """True when the causal OT operator replaces softmax (Theorem 3 does not apply)."""
        return self.kind == "ot"

    @property
    def fixed_bias(self) -> bool:
        """True for a non-constant additive bias known before training (ALiBi, log-distance,
        margin, fixed KERPLE, fixed T5): the loss model's domain (docs/extrapolation.md)."""
        return not self.learned and self.kind in ("alibi", "logd", "margin", "kerple", "t5")

    @property
    def prior_known_before_training(self) -> bool:
        """True unless the prior depends on learned values."""
        return not self.learned

    def exponent(self, window: int, design_length: int) -> float | None:
        """The log-distance exponent: ``A`` for ``logd-A``; ``1 + delta*`` for ``margin-T``
        with ``delta* = priors.margin.select_margin(window, design_length, T).delta``
        (docs/theory.md §7, ``B = 0``, ``L0 = W``); ``None`` for other kinds."""
        if self.kind == "logd":
            return self.value
        if self.kind == "margin":
            from priors.margin import select_margin

            return float(select_margin(window, design_length, self.value).alpha)
        return None

    def fixed_priors(self, n_heads: int, exponent: float | None = None) -> list[Any] | None:
        """The per-head ``priors.encodings`` of a bias known before training (None for a
        learned bias, for no bias and for rotations); ``exponent`` of ``logd``/``margin``."""
        from priors.encodings import ALiBi, KerpleLog, LogDistance, T5Buckets, alibi_slopes

        if self.kind == "alibi":
            scale = self.params[0] if self.params else 1.0
            return [ALiBi(scale * m) for m in alibi_slopes(n_heads)]
        if self.kind in ("logd", "margin"):
            if exponent is None:
                raise ValueError(f"exponent is required for variant {self.name!r}")
            return [LogDistance(alpha=exponent)] * n_heads
        if self.kind == "kerple" and not self.learned:
            return [KerpleLog(*self.params)] * n_heads
        if self.kind == "t5" and not self.learned:
            return [T5Buckets(T5_BUCKETS, T5_MAX_DISTANCE, fixed_t5_table(self.value))] * n_heads
        return None

    def constant_score_priors(self, n_heads: int, exponent: float | None = None) -> list[Any]:
        """The prior per head known before training: ``fixed_priors``, ``NoPE`` for
        ``nope``/``rope``, ``CausalOTPrior(R)`` for ``ot-R``; ``ValueError`` for learned."""
        from priors.encodings import CausalOTPrior, NoPE

        fixed = self.fixed_priors(n_heads, exponent)
        if fixed is not None:
            return fixed
        if self.kind in ("nope", "rope"):
            return [NoPE()] * n_heads
        if self.kind == "ot":
            return [CausalOTPrior(rho=self.value)] * n_heads
        raise ValueError(f"variant {self.name!r}: its prior is learned, known after training")


def fixed_t5_table(a: float) -> tuple[float, ...]:
    """``table[b] = -a ln(1 + d_b)``, ``d_b`` the smallest distance in bucket ``b``: the
    log-distance bias sampled at the bucket starts, constant beyond ``T5_MAX_DISTANCE``
    (so the prior dilutes, docs/theory.md §5, although it falls like ``d^-a`` before)."""
    from priors.encodings import t5_bucket

    starts = [0] * T5_BUCKETS
    buckets = t5_bucket(range(4 * T5_MAX_DISTANCE), T5_BUCKETS, T5_MAX_DISTANCE)
    seen: set[int] = set()
    for d, b in enumerate(buckets.tolist()):
        if b not in seen:
            seen.add(b)
            starts[b] = d
    if len(seen) != T5_BUCKETS:
        raise ValueError("fixed_t5_table: some bucket holds no distance below 4 * max_distance")
    return tuple(-a * math.log1p(d) for d in starts)


def parse_variant(name: object) -> Variant:
    """The :class:`Variant` of a name of the module's table; ``ValueError`` naming it."""
    if not isinstance(name, str):
        raise ValueError(f"variant must be a string, got {name!r}")
    if name in _SIMPLE:
        kind = _SIMPLE[name]
        return Variant(name, kind, learned=kind in ("t5", "kerple"))
    for kind, pattern in _KINDS_WITH_NUMBERS.items():
        m = pattern.fullmatch(name)
        if m is not None:
            params = tuple(float(g) for g in m.groups())
            _check_params(name, kind, params)
            return Variant(name, kind, params)
    raise ValueError(
        f"variant must be one of nope, rope, alibi, alibi-xF, t5, t5-A, kerple-log, "
        f"kerple-R1-R2, logd-A, margin-T, ot-R (F, A, R1, R2, T, R numbers), got {name!r}"
    )


def _check_params(name: str, kind: str, params: tuple[float, ...]) -> None:
    value = params[0]
    if kind in ("logd", "t5", "alibi") and not 0 < value <= 64:
        raise ValueError(f"variant {name!r}: the number must be in (0, 64]")
    if kind == "margin" and not 0 < value < 1:
        raise ValueError(f"variant {name!r}: the tolerance must be in (0, 1)")
    if kind == "ot" and not 0 <= value < 1:
        raise ValueError(f"variant {name!r}: rho must be in [0, 1)")
    if kind == "kerple" and not all(0 < p <= 64 for p in params):
        raise ValueError(f"variant {name!r}: R1 and R2 must be in (0, 64]")


def parse_variants(names: Any) -> tuple[Variant, ...]:
    """A tuple of distinct :class:`Variant` from names (a sequence of strings or variants).

    Distinct as variants, not only as names: two spellings of one number (``logd-1`` and
    ``logd-1.0``) are the same variant, which would be trained twice and counted twice by
    the rank claims."""
    out = tuple(n if isinstance(n, Variant) else parse_variant(n) for n in names)
    if not out:
        raise ValueError("variants must not be empty")
    seen = [v.name for v in out]
    if len(set(seen)) != len(seen):
        raise ValueError(f"variants must be distinct, got {', '.join(seen)}")
    first: dict[tuple[Any, ...], str] = {}
    for v in out:
        other = first.setdefault((v.kind, v.params, v.learned), v.name)
        if other != v.name:
            raise ValueError(f"variants must be distinct: {other!r} and {v.name!r} are the "
                             "same variant")
    return out

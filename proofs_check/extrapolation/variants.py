"""The positional variants of the experiment and the theory's prediction for each.

A variant is a name, how its attention logits get their positional part (docs/theory.md §5:
an additive bias ``b_h(d)`` per head, a rotation of queries and keys, or the causal OT
operator of §2 in place of softmax), and the prior ``priors.encodings`` object per head
that predicts its window mass. Learned biases (T5 buckets, KERPLE-log) are predicted from
their learned values after training.

===============  =======================================  =========================
name             positional part                          prior per head
===============  =======================================  =========================
``nope``         none                                     ``NoPE``
``rope``         rotary queries/keys (bounded change)     ``NoPE`` (docs/theory.md §5)
``alibi``        ``-m_h d``, ``m_h = 2^-2 .. 2^-8``        ``ALiBi(m_h)``
``t5``           learned table over 32 buckets (128)      ``T5Buckets(table_h)``
``kerple-log``   learned ``-r1 ln(1 + r2 d)``              ``KerpleLog(r1_h, r2_h)``
``logd-A``       ``-A ln(1 + d)`` (A = 0.8, 1.0, ...)      ``LogDistance(A)``
``margin-T``     ``-(1 + delta*) ln(1 + d)``, delta* of   ``LogDistance(1 + delta*)``
                 ``priors.margin.select_margin`` at tol T
``ot-R``         causal OT operator at ``rho = R``        ``CausalOTPrior(R)``
===============  =======================================  =========================
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_VARIANTS",
    "QUICK_VARIANTS",
    "Variant",
    "parse_variant",
]

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
#: The ``--quick`` subset: two diluting, two summable, the margin exponent.
QUICK_VARIANTS = ("nope", "rope", "alibi", "logd-0.8", "margin-0.1", "logd-2")

_NUM = r"(\d+(?:\.\d+)?)"


@dataclass(frozen=True)
class Variant:
    """One positional variant.

    ``kind`` is one of ``nope``, ``rope``, ``alibi``, ``t5``, ``kerple``, ``logd``,
    ``margin``, ``ot``; ``value`` is the exponent (``logd``), the tolerance (``margin``)
    or ``rho`` (``ot``).
    """

    name: str
    kind: str
    value: float | None = None
    learned: bool = field(default=False)

    @property
    def uses_operator(self) -> bool:
        """True when the causal OT operator replaces softmax (Theorem 3 does not apply)."""
        return self.kind == "ot"


def parse_variant(name: str) -> Variant:
    """The :class:`Variant` for a name of the table above; ``ValueError`` naming it."""
    if not isinstance(name, str):
        raise ValueError(f"variant must be a string, got {name!r}")
    simple = {
        "nope": Variant("nope", "nope"),
        "rope": Variant("rope", "rope"),
        "alibi": Variant("alibi", "alibi"),
        "t5": Variant("t5", "t5", learned=True),
        "kerple-log": Variant("kerple-log", "kerple", learned=True),
    }
    if name in simple:
        return simple[name]
    m = re.fullmatch(r"(logd|margin|ot)-" + _NUM, name)
    if m is None:
        raise ValueError(
            f"variant must be one of {', '.join(DEFAULT_VARIANTS)} "
            f"(logd-A, margin-T, ot-R with a number), got {name!r}"
        )
    kind, value = m.group(1), float(m.group(2))
    if kind == "logd" and value <= 0:
        raise ValueError(f"variant {name!r}: the exponent must be > 0")
    if kind == "margin" and not 0 < value < 1:
        raise ValueError(f"variant {name!r}: the tolerance must be in (0, 1)")
    if kind == "ot" and not 0 <= value < 1:
        raise ValueError(f"variant {name!r}: rho must be in [0, 1)")
    return Variant(name, kind, value)

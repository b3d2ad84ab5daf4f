"""Priors cut off by a mask: a sliding window (keys at ``d >= span`` get no mass) and
chunked attention (the row sees only the keys of its own chunk).

Sliding-window attention (Mistral, Gemma 2/3 local layers, Qwen 2 upper layers) masks
every key at distance ``d >= span`` (``b(d) = -inf`` there). The prior of the remaining
keys is the base prior restricted to ``d < span``::

    weight_sum(lo, hi) = base.weight_sum(min(lo, span), min(hi, span)),

so ``S_inf = S_span`` is finite: the prior is summable in the sense of docs/theory.md §5
(docs/theory.md §5) and ``D_l(W) = (S_span - S_W) / S_span`` for every ``l >= span``. The
distant mass stops growing because the distant keys are *masked*, not because the prior
concentrates: nothing beyond ``span`` can be attended to at all.

Chunked attention (Llama 4's RoPE layers, ``attention_chunk_size = C``) splits the
positions into blocks of ``C``; a query sees the keys of its own block only, so the row of
length ``l`` (query position ``l - 1``) sees the ``k(l) = ((l - 1) mod C) + 1`` most recent
keys. The prior of that row is the base prior on ``d < k(l)``: it depends on ``l`` and has
no limit (``M_l(W)`` returns to 1 at the start of every chunk and falls to ``S_W / S_C`` at
its end), but it never spreads over more than ``C`` keys, so the distant mass is at most
``(S_C - S_W) / S_C``.

>>> from priors.encodings import NoPE
>>> enc = SlidingWindow(base=NoPE(), span=4096)
>>> float(enc.window_mass(512, 10**12)) == 512 / 4096
True
>>> chunked = ChunkedWindow(base=NoPE(), chunk=8192)
>>> [float(chunked.window_mass(512, n)) for n in (8192, 8193, 8704)]
[0.0625, 1.0, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding

__all__ = ["ChunkedWindow", "SlidingWindow"]


def _check(enc: Encoding, size_name: str) -> None:
    """A stationary ``base`` and an integer ``size_name >= 1`` (stored as ``int``)."""
    if not isinstance(enc.base, Encoding) or enc.base.length_dependent:
        raise ValueError("base must be a stationary Encoding")
    size = getattr(enc, size_name)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"{size_name} must be an integer >= 1, got {size!r}")
    object.__setattr__(enc, size_name, int(size))


@dataclass(frozen=True)
class SlidingWindow(Encoding):
    """``base`` prior on ``d < span``, no mass at ``d >= span`` (a sliding-window mask)."""

    base: Encoding | None = None
    span: int = 4096
    name = "sliding-window"

    def __post_init__(self) -> None:
        _check(self, "span")

    @property
    def params(self) -> dict:
        return {"span": self.span, "base": self.base.name, "base_params": self.base.params}

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        inside = np.asarray(self.base.bias(np.minimum(d, self.span - 1)))
        return np.where(d < self.span, inside, -np.inf)

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        return self.base.weight_sum(min(lo, self.span), min(hi, self.span), dps=dps)

    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """``S_inf = S_span``: finitely many keys carry mass."""
        return self.base.weight_sum(0, self.span, dps=dps)

    def classify(self) -> Classification:
        return Classification(
            "summable",
            f"exact beyond l = {self.span}",
            {
                "test": f"finite support: keys at d >= {self.span} are masked (sliding window)",
                "span": self.span,
                "base_class": self.base.classify().label,
                "note": "the distant mass stays bounded because distant keys are masked, "
                "not attended",
            },
        )


@dataclass(frozen=True)
class ChunkedWindow(Encoding):
    """``base`` prior on the ``k(l) = ((l - 1) mod chunk) + 1`` keys of the row's own chunk
    (chunked attention); no mass on earlier keys."""

    base: Encoding | None = None
    chunk: int = 8192
    name = "chunked"
    length_dependent = True

    def __post_init__(self) -> None:
        _check(self, "chunk")

    @property
    def params(self) -> dict:
        return {"chunk": self.chunk, "base": self.base.name, "base_params": self.base.params}

    def keys_seen(self, length: int) -> int:
        """``k(l) = ((l - 1) mod chunk) + 1``: the keys the row of length ``l`` sees."""
        return (length - 1) % self.chunk + 1

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        k = self.keys_seen(length)
        inside = np.asarray(self.base.bias(np.minimum(d, k - 1)))
        return np.where(d < k, inside, -np.inf)

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        k = self.keys_seen(length)
        return self.base.weight_sum(min(lo, k), min(hi, k), dps=dps)

    @property
    def limit_known(self) -> bool:
        """No limit: ``M_l(W)`` oscillates with period ``chunk``."""
        return False

    def classify(self) -> Classification:
        return Classification(
            "summable",
            f"periodic in l (period {self.chunk}); D_l(W) <= (S_C - S_W) / S_C",
            {
                "test": f"finite support: the row sees at most {self.chunk} keys (chunked "
                "attention)",
                "chunk": self.chunk,
                "base_class": self.base.classify().label,
                "note": "no limit as l -> inf: the window mass returns to 1 at the start of "
                "every chunk; the distant mass stays bounded because earlier chunks are "
                "masked, not attended",
            },
        )

"""Sandwich (Chi et al. 2023): the inner product of sinusoidal embeddings as a bias.

With embedding dimension ``dim`` (even), frequencies ``w_i = base^(-2i/dim)``,
``i = 1 .. dim/2``, a compression ratio ``compress >= 1`` and a scale ``scale > 0``::

    b(d) = scale * ( sum_{i=1}^{dim/2} cos(w_i d / compress) - dim/2 ),

i.e. ``p_l . p_j - dim/2`` for sinusoidal ``p``, shifted so that ``b(0) = 0``. The bias is
bounded, ``-scale * dim <= b(d) <= 0``, so by THEORY.md §5 the prior dilutes:
``e^{-scale dim} W / l <= M_l(W) <= e^{scale dim} W / l``.

No closed form exists for ``sum e^{b(d)}`` (the frequencies are geometric, not
arithmetic), so the masses are exact sums of the float64 values ``e^{b(d)}`` (exactly
rounded with ``math.fsum``): about 13 correct digits whatever ``dps``, and lengths up to
``MAX_SUM_LENGTH`` (beyond, a ``ValueError`` says so; use the bounded-bias bracket).

>>> enc = Sandwich(dim=8)
>>> enc.bias(0.0) == 0.0 and bool(-8 <= enc.bias(1000.0) <= 0)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding, positive_param

__all__ = ["MAX_SUM_LENGTH", "Sandwich"]

#: Longest range summed exactly (term by term, float64).
MAX_SUM_LENGTH = 2**22
_BLOCK = 2**16


@dataclass(frozen=True)
class Sandwich(Encoding):
    """``b(d) = scale (sum_i cos(w_i d / compress) - dim/2)``; bounded, so it dilutes."""

    dim: int = 128
    base: float = 10000.0
    scale: float = 1.0
    compress: float = 1.0
    name = "sandwich"
    max_digits = 13

    def __post_init__(self) -> None:
        dim = self.dim
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 2 or dim % 2:
            raise ValueError(f"dim must be an even integer >= 2, got {dim!r}")
        object.__setattr__(self, "dim", int(dim))
        base = positive_param(self.base, "base")
        if base <= 1:
            raise ValueError(f"base must be > 1, got {self.base!r}")
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "scale", positive_param(self.scale, "scale"))
        compress = positive_param(self.compress, "compress")
        if compress < 1:
            raise ValueError(f"compress must be >= 1, got {self.compress!r}")
        object.__setattr__(self, "compress", compress)

    @property
    def frequencies(self) -> np.ndarray:
        i = np.arange(1, self.dim // 2 + 1, dtype=np.float64)
        return self.base ** (-2.0 * i / self.dim)

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        phase = np.multiply.outer(d / self.compress, self.frequencies)
        return self.scale * (np.cos(phase).sum(axis=-1) - self.dim / 2)

    def _check_range(self, hi: int) -> None:
        if hi > MAX_SUM_LENGTH:
            raise ValueError(
                f"length must be <= {MAX_SUM_LENGTH} for sandwich (no closed form; exact "
                f"summation only), got {hi}"
            )

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        parts = []
        for start in range(lo, hi, _BLOCK):
            d = np.arange(start, min(hi, start + _BLOCK), dtype=np.float64)
            parts.extend(np.exp(self._bias(d, None)).tolist())
        with mpmath.workdps(dps):
            return mpmath.mpf(math.fsum(parts))

    def classify(self) -> Classification:
        bound = self.scale * self.dim
        return Classification(
            "dilutes",
            "W/l",
            {
                "test": "bounded bias: -scale*dim <= b(d) <= 0",
                "bias_bound": bound,
                "window_mass_bracket": f"e^-{bound:g} W/l <= M <= e^{bound:g} W/l",
            },
        )

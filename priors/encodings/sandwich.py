"""Sandwich (Chi et al. 2023): the inner product of sinusoidal embeddings as a bias.

With embedding dimension ``dim`` (even), frequencies ``w_i = base^(-2i/dim)``,
``i = 1 .. dim/2``, a compression ratio ``compress >= 1`` and a scale ``scale > 0``::

    b(d) = scale * ( sum_{i=1}^{dim/2} cos(w_i d / compress) - dim/2 ),

i.e. ``p_l . p_j - dim/2`` for sinusoidal ``p``, shifted so that ``b(0) = 0``. The bias is
bounded, ``-scale * dim <= b(d) <= 0``, so by docs/theory.md §5 the prior dilutes:
``e^{-scale dim} W / l <= M_l(W) <= e^{scale dim} W / l``.

No closed form exists for ``sum e^{b(d)}`` (the frequencies are geometric, not
arithmetic), so the masses are exact sums over the float64 biases ``b(d)``, in the log
domain: per block of distances ``e^{m} * fsum(exp(b(d) - m))`` with ``m`` the block's
largest bias, the blocks combined in mpmath (no underflow, however small the masses, and
no overflow warning). The digits are those of the float64 bias: ``b(d)`` carries an
absolute error of at most (``eps = 2^-52``)::

    delta_b <= scale eps [ (d/compress) (4 + ln base) sum_i w_i + (dim/2)(2 + log2 dim) + dim ],

so every weight ``e^{b(d)}`` a relative error ``e^{delta_b} - 1`` and every mass twice
that (plus the rounding of ``exp``): ``mass_digits`` states ``floor(-log10)`` of it, at
most 13, and an encoding whose bias carries no correct digit at the asked length is
refused (``ValueError``). The work is ``length * dim/2`` cosines: at most
``MAX_COSINES`` (beyond, a ``ValueError`` says so; use the bounded-bias bracket), and
lengths up to ``MAX_SUM_LENGTH``.

>>> enc = Sandwich(dim=8)
>>> enc.bias(0.0) == 0.0 and bool(-8 <= enc.bias(1000.0) <= 0)
True

Per head: ``sandwich_heads(H, dim)`` gives head ``h`` (0-based) the scale ``H / (8 (h+1))``,
the rule of NVIDIA NeMo's ``SandwichRelativePositionEmbedding``, the reference
implementation of the paper's multi-head variant (it divides the shifted bias of head
``k = 1..H`` by ``8 k / H``, the same ``8 k / H`` head schedule as ALiBi's slope exponent
``2^(-8k/H)``, applied as a harmonic rather than a geometric scale):

>>> heads = sandwich_heads(8, 64)
>>> [enc.scale for enc in heads[:3]], heads[-1].scale
([1.0, 0.5, 0.3333333333333333], 0.125)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding, positive_param

__all__ = ["MAX_COSINES", "MAX_SUM_LENGTH", "Sandwich", "sandwich_heads"]

#: Longest range summed exactly (term by term, float64).
MAX_SUM_LENGTH = 2**22
#: Most cosine evaluations (``length * dim/2``) one sum may cost (about 10 s).
MAX_COSINES = 2**30
#: Elements of one block of phases (``distances * dim/2``): bounds the memory (32 MiB).
_BLOCK_ELEMENTS = 2**22
_EPS = 2.0**-52


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
        freqs = self.frequencies
        d = np.asarray(d, dtype=np.float64)
        flat = d.ravel()
        step = max(1, _BLOCK_ELEMENTS // freqs.size)
        out = np.empty(flat.shape, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            for start in range(0, flat.size, step):
                phase = np.multiply.outer(flat[start : start + step] / self.compress, freqs)
                out[start : start + step] = self.scale * (
                    np.cos(phase).sum(axis=-1) - self.dim / 2
                )
        return out.reshape(d.shape)

    def bias_error(self, hi: int) -> float:
        """Bound on the absolute float64 error of ``b(d)`` for ``d < hi`` (module docstring)."""
        freqs = self.frequencies
        phase = (hi / self.compress) * (4 + math.log(self.base)) * float(freqs.sum())
        half = self.dim / 2
        return self.scale * _EPS * (phase + half * (2 + math.log2(self.dim)) + self.dim)

    def _mass_error(self, hi: int) -> float:
        """Relative error bound of every mass summed over ``d < hi``."""
        delta = self.bias_error(hi)
        return 2 * (math.expm1(delta) + 2 * _EPS) if delta < 700 else math.inf

    def mass_digits(self, window: int, length: int, dps: int) -> int:
        """``floor(-log10)`` of the masses' relative error bound, at most 13 and ``dps``."""
        err = self._mass_error(length)
        digits = math.floor(-math.log10(err)) if err < 1 else 0
        return max(1, min(dps, self.max_digits or dps, digits))

    def _check_range(self, hi: int) -> None:
        if hi > MAX_SUM_LENGTH:
            raise ValueError(
                f"length must be <= {MAX_SUM_LENGTH} for sandwich (no closed form; exact "
                f"summation only), got {hi}"
            )
        work = hi * (self.dim // 2)
        if work > MAX_COSINES:
            raise ValueError(
                f"length * dim/2 = {work:.3g} cosines exceeds {MAX_COSINES} for sandwich "
                "(no closed form; exact summation only): lower --length or --dim"
            )
        if self._mass_error(hi) >= 0.1:
            raise ValueError(
                f"sandwich with scale = {self.scale!r}, dim = {self.dim}: the float64 bias "
                f"b(d), d < {hi}, carries an error up to {self.bias_error(hi):.3g}, so the "
                "masses would have no correct digit; lower --scale or --length"
            )

    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        step = max(1, _BLOCK_ELEMENTS // (self.dim // 2))
        blocks = []
        for start in range(lo, hi, step):
            d = np.arange(start, min(hi, start + step), dtype=np.float64)
            b = self._bias(d, None)
            top = float(b.max())
            # e^{b - top} <= 1; the terms that underflow are below 1e-308 of the block sum
            blocks.append((top, math.fsum(np.exp(b - top).tolist())))
        with mpmath.workdps(dps):
            return mpmath.fsum(mpmath.exp(mpmath.mpf(top)) * part for top, part in blocks)

    def classify(self) -> Classification:
        bound = self.scale * self.dim
        return Classification(
            "dilutes",
            "W/l",
            {
                "test": "bounded bias: -scale*dim <= b(d) <= 0",
                "bias_bound": bound,
                "window_mass_bracket": f"e^-{bound!r} W/l <= M <= e^{bound!r} W/l",
            },
        )


def sandwich_heads(
    num_heads: int, head_dim: int, *, base: float = 10000.0, compress: float = 1.0
) -> tuple[Sandwich, ...]:
    """One Sandwich prior per head: head ``h`` (0-based) gets ``scale = H / (8 (h + 1))``.

    ``b_h(d) = (sum_{i=1}^{head_dim/2} cos(w_i d / compress) - head_dim/2) / (8 (h+1) / H)``
    with ``w_i = base^(-2i/head_dim)``: NeMo's multi-head Sandwich (Chi et al. 2023), whose
    bias of head ``k = h + 1`` is the shifted sinusoidal inner product divided by ``8 k / H``.
    Head 0 is the sharpest (``scale = H/8``), the last head the flattest (``1/8``). Every
    head is bounded (``-scale * head_dim <= b_h <= 0``), so every head dilutes (docs/theory.md
    §5; docs/theory.md §5).
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, (int, np.integer)):
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    if not 1 <= num_heads <= 4096:
        raise ValueError(f"num_heads must lie in [1, 4096], got {num_heads!r}")
    return tuple(
        Sandwich(dim=head_dim, base=base, scale=int(num_heads) / (8 * (h + 1)), compress=compress)
        for h in range(int(num_heads))
    )

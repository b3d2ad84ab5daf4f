"""T5 relative-position buckets, unidirectional (Raffel et al. 2020), docs/theory.md §5.

The bias is a learned table ``b = table[bucket(d)]`` over ``num_buckets`` buckets. The
unidirectional (causal) bucket of distance ``d >= 0``, with ``E = num_buckets // 2``::

    bucket(d) = d                                                        if d < E
              = min(E + floor(ln(d/E) / ln(max_distance/E) * (num_buckets - E)),
                    num_buckets - 1)                                     otherwise

(evaluated here in float64; the reference evaluates the logarithm in float32, which can
move a distance across a boundary only where the argument of ``floor`` lies within float32
rounding of an integer). ``bucket`` is nondecreasing and reaches the last bucket at a
finite distance ``D_sat <= max_distance``, so the prior is a finite sum over ``d < D_sat``
plus a constant tail ``e^{table[-1]}`` per key: closed form, O(1) in the length, and not
summable (dilutes like ``W/l`` up to the constant ``e^{table[-1]}``).

>>> enc = T5Buckets(table=[0.0] * 32)       # a zero table is NoPE
>>> float(enc.window_mass(16, 1024)) == 16 / 1024
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mpmath
import numpy as np

from priors.classify import Classification
from priors.encodings.base import Encoding
from priors.harmonic import exact_arb
from priors.precision import guarded
from priors.validation import as_count, as_real_vector

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = ["T5Buckets", "t5_bucket"]


def t5_bucket(d: Any, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """Unidirectional T5 bucket index of distances ``d >= 0`` (int64 array)."""
    d = np.asarray(d, dtype=np.float64)
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = exact + np.floor(
            np.log(np.maximum(d, 1.0) / exact)
            / math.log(max_distance / exact)
            * (num_buckets - exact)
        )
    large = np.minimum(large, num_buckets - 1)
    return np.where(d < exact, np.floor(d), large).astype(np.int64)


@dataclass(frozen=True)
class T5Buckets(Encoding):
    """T5 unidirectional relative buckets with a learned ``table`` (length ``num_buckets``).

    ``table`` is required (the learned per-bucket biases of one head); it is stored as a
    tuple of floats.
    """

    num_buckets: int = 32
    max_distance: int = 128
    table: tuple[float, ...] | None = None
    name = "t5"
    arb_method = "bucket counts times e^{table[k]} in Arb, the constant tail in the last bucket"

    def __post_init__(self) -> None:
        nb, md = self.num_buckets, self.max_distance
        if isinstance(nb, bool) or not isinstance(nb, (int, np.integer)) or nb < 2:
            raise ValueError(f"num_buckets must be an integer >= 2, got {nb!r}")
        if isinstance(md, bool) or not isinstance(md, (int, np.integer)) or md <= nb // 2:
            raise ValueError(f"max_distance must be an integer > num_buckets // 2, got {md!r}")
        # distances are float64 in the bucket function: capped where lengths are
        md = as_count(md, "max_distance")
        nb = as_count(nb, "num_buckets")
        if self.table is None:
            raise ValueError("table is required: the learned per-bucket biases")
        table = as_real_vector(self.table, "table")
        if table.size != nb:
            raise ValueError(f"table must have num_buckets = {nb} entries, got {table.size}")
        object.__setattr__(self, "num_buckets", int(nb))
        object.__setattr__(self, "max_distance", int(md))
        object.__setattr__(self, "table", tuple(float(t) for t in table))

    def bucket_starts(self) -> list[int]:
        """``start_k``: the smallest distance ``d`` with ``bucket(d) >= k``, for every bucket.

        ``bucket`` is nondecreasing and ``bucket(max_distance) = num_buckets - 1``, so a
        bisection on ``t5_bucket`` itself (all buckets at once) finds them in
        ``O(log max_distance)`` vectorised steps, consistent with the float64 bucket
        function, without enumerating the distances (``max_distance`` may be ``1e18``).
        """
        nb, md = self.num_buckets, self.max_distance
        k = np.arange(nb, dtype=np.int64)
        lo = np.zeros(nb, dtype=np.int64)
        hi = np.full(nb, md, dtype=np.int64)  # bucket(hi) >= k
        while np.any(lo < hi):
            mid = lo + (hi - lo) // 2
            above = t5_bucket(mid.astype(np.float64), nb, md) >= k
            hi = np.where(above, mid, hi)
            lo = np.where(above, lo, mid + 1)
        return [int(v) for v in lo]

    @property
    def saturation(self) -> int:
        """``D_sat``: the smallest distance in the last bucket (all larger ones are too)."""
        return self.bucket_starts()[-1]

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        table = np.asarray(self.table)
        return table[t5_bucket(d, self.num_buckets, self.max_distance)]

    def bucket_counts(self, lo: int, hi: int) -> list[int]:
        """Exact number of distances ``lo <= d < hi`` in each bucket: bucket ``k`` holds
        ``[start_k, start_{k+1})`` (empty when equal), the last one every ``d >= D_sat``;
        O(num_buckets log max_distance), whatever the length."""
        starts: list[int | None] = [*self.bucket_starts(), None]
        counts = []
        for k in range(self.num_buckets):
            a = max(lo, starts[k])
            b = hi if starts[k + 1] is None else min(hi, starts[k + 1])
            counts.append(max(0, b - a))
        return counts

    @guarded(10)
    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        # closed form: sum_k count_k e^{table[k]}
        terms = [
            c * mpmath.exp(mpmath.mpf(t))
            for c, t in zip(self.bucket_counts(lo, hi), self.table, strict=True)
            if c
        ]
        return mpmath.fsum(terms)

    def _weight_sum_arb(self, lo: int, hi: int | None) -> flint.arb | None:
        """``sum_k count_k e^{table[k]}`` in Arb (exact integer counts); not summable
        (``hi=None``: None)."""
        import flint

        if hi is None:
            return None
        terms = (
            c * exact_arb(t).exp()
            for c, t in zip(self.bucket_counts(lo, hi), self.table, strict=True)
            if c
        )
        return sum(terms, flint.arb(0))

    def classify(self) -> Classification:
        return Classification(
            "dilutes",
            "W/l",
            {
                "test": "constant bias table[-1] beyond the last bucket boundary",
                "saturation_distance": self.saturation,
                "tail_weight": mpmath.nstr(mpmath.exp(mpmath.mpf(self.table[-1])), 17),
            },
        )

"""A user-supplied bias: a callable ``b(d)`` or an array over ``d = 0..m-1`` (docs/theory.md §5).

The given values are used exactly (each float64 ``b(d)`` is taken as the exact binary
number it is, ``e^{b(d)}`` evaluated at ``dps`` digits). Beyond the given range the bias
is whatever the *stated* tail assumption says; it is part of the result, never implicit:

* ``tail="none"``: no continuation; lengths beyond ``m`` raise ``ValueError``;
* ``tail="constant"``: ``b(d) = b(m-1)`` for ``d >= m`` (not summable: dilutes);
* ``tail="power"``: ``e^{b(d)} = e^{b(m-1)} (m / (1+d))^p`` for ``d >= m``, with the stated
  ``tail_exponent = p`` (summable iff ``p > 1``), summed in closed form (Hurwitz zeta).

The class (``classify``) follows the tail assumption when one is stated and is otherwise
the numeric evidence of ``priors.classify.classify_values`` (estimated tail exponent
``-db/d ln(1+d)`` over the last octave; "inconclusive" within ``margin`` of 1); the
evidence is reported either way.

>>> import numpy as np
>>> enc = UserBias(-np.log1p(np.arange(100.0)) * 2, tail="power", tail_exponent=2.0)
>>> from priors.encodings.log_distance import LogDistance
>>> bool(abs(enc.window_mass(10, 10**6) - LogDistance(2.0).window_mass(10, 10**6)) < 1e-14)
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mpmath
import numpy as np

from priors.classify import DEFAULT_MARGIN, Classification, classify_values
from priors.encodings.base import Encoding, finite_param
from priors.harmonic import _power_sum, _zeta_tail
from priors.precision import guarded
from priors.validation import as_count, as_real_vector

__all__ = ["TAILS", "UserBias"]

TAILS = ("none", "constant", "power")


@dataclass(frozen=True)
class UserBias(Encoding):
    """Bias values ``b(0..m-1)`` (array, or a callable sampled at ``d = 0..extent-1``)
    with an explicit tail assumption (``"none"``, ``"constant"``, ``"power"``)."""

    values: Any = None
    tail: str = "none"
    tail_exponent: float | None = None
    extent: int | None = None
    margin: float = DEFAULT_MARGIN
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    name = "user"

    def __post_init__(self) -> None:
        values = self.values
        if callable(values):
            if self.extent is None:
                raise ValueError("extent is required with a callable bias: sample d < extent")
            m = as_count(self.extent, "extent", minimum=1)
            if m > 10**7:
                raise ValueError(f"extent must be <= 1e7, got {m}")
            func: Callable[[int], Any] = values
            try:
                values = [float(func(d)) for d in range(m)]
            except (TypeError, ValueError) as exc:
                raise ValueError(f"values: the callable failed: {exc}") from exc
        if values is None:
            raise ValueError("values is required: an array of b(d) or a callable")
        arr = as_real_vector(values, "values")
        if self.extent is not None and not callable(self.values):
            m = as_count(self.extent, "extent", minimum=1)
            if m != arr.size:
                raise ValueError(f"extent must equal len(values) = {arr.size}, got {m}")
        object.__setattr__(self, "values", tuple(arr.tolist()))
        object.__setattr__(self, "extent", int(arr.size))
        if self.tail not in TAILS:
            raise ValueError(f"tail must be one of {TAILS}, got {self.tail!r}")
        if self.tail == "power":
            if self.tail_exponent is None:
                raise ValueError('tail_exponent is required with tail="power"')
            p = finite_param(self.tail_exponent, "tail_exponent")
            if p < 0:
                raise ValueError(f"tail_exponent must be >= 0, got {self.tail_exponent!r}")
            object.__setattr__(self, "tail_exponent", p)
        elif self.tail_exponent is not None:
            raise ValueError(f'tail_exponent only applies to tail="power", not {self.tail!r}')
        margin = finite_param(self.margin, "margin")
        if not 0 <= margin < 1:
            raise ValueError(f"margin must be in [0, 1), got {self.margin!r}")
        object.__setattr__(self, "margin", margin)

    @property
    def params(self) -> dict[str, Any]:
        return {
            "extent": self.extent,
            "tail": self.tail,
            "tail_exponent": self.tail_exponent,
            "margin": self.margin,
        }

    def summation_note(self) -> str:
        m = self.extent
        if self.tail == "none":
            return f"exact sum of the {m} given values; no continuation beyond d = {m - 1}"
        if self.tail == "constant":
            return f"exact sum of the {m} given values; assumed b(d) = b({m - 1}) for d >= {m}"
        return (
            f"exact sum of the {m} given values; assumed e^b(d) = e^b({m - 1}) "
            f"({m}/(1+d))^{self.tail_exponent!r} for d >= {m} (Hurwitz zeta)"
        )

    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        m = self.extent
        if self.tail == "none" and np.any(d > m - 1):
            raise ValueError(f"d must be < extent = {m} (tail='none')")
        arr = np.asarray(self.values)
        idx = np.minimum(np.floor(d), m - 1).astype(np.int64)
        out = arr[idx]
        if self.tail == "power":
            out = np.where(d >= m, arr[-1] - self.tail_exponent * np.log((1 + d) / m), out)
        return out

    def _check_range(self, hi: int) -> None:
        if self.tail == "none" and hi > self.extent:
            raise ValueError(
                f"length must be <= extent = {self.extent} with tail='none' "
                f"(state a tail assumption to go further), got {hi}"
            )

    def _prefix(self, dps: int) -> list[mpmath.mpf]:
        """Exact prefix sums of ``e^{b(d)}`` over the given values, cached per ``dps``."""
        if dps not in self._cache:
            with mpmath.workdps(dps):
                acc = mpmath.mpf(0)
                out = [acc]
                for v in self.values:
                    acc += mpmath.exp(mpmath.mpf(v))
                    out.append(acc)
            self._cache[dps] = out
        return self._cache[dps]

    @guarded(10)
    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        m = self.extent
        work = mpmath.mp.dps  # dps + the guard digits
        value = mpmath.mpf(0)
        if lo < min(hi, m):
            head_lo, head_hi = lo, min(hi, m)
            if head_hi - head_lo <= 64:
                value = mpmath.fsum(
                    mpmath.exp(mpmath.mpf(v)) for v in self.values[head_lo:head_hi]
                )
            else:
                prefix = self._prefix(work + 2 + int(math.log10(m)))
                value = prefix[head_hi] - prefix[head_lo]
                # the difference is at least the range's largest term e^peak, so it cancels
                # at most log10(S_hi / e^peak) digits: the prefix's 2 guard digits cover
                # that up to 2; beyond, the range is summed directly (positive terms)
                peak = max(self.values[head_lo:head_hi])
                if head_lo > 0 and mpmath.log10(prefix[head_hi]) - peak / math.log(10) > 2:
                    value = mpmath.fsum(
                        mpmath.exp(mpmath.mpf(v)) for v in self.values[head_lo:head_hi]
                    )
        t_lo, t_hi = max(lo, m), hi
        if t_hi > t_lo:
            last = mpmath.exp(mpmath.mpf(self.values[-1]))
            if self.tail == "constant":
                value += (t_hi - t_lo) * last
            else:
                p = self.tail_exponent
                tail = _power_sum(t_lo, t_hi, mpmath.mpf(p), mpmath.mpf(1), work)
                value += last * mpmath.mpf(m) ** p * tail
        return value

    @property
    def limit_known(self) -> bool:
        """``tail="none"`` states nothing beyond the values: the limit is unknown."""
        return self.tail != "none"

    def _check_limit(self) -> None:
        if not self.limit_known:
            raise ValueError(
                "the limit M_inf(W) is unknown with tail='none' (nothing is stated beyond "
                f"d = {self.extent - 1}); state a tail assumption"
            )

    def _limit_window_mass(self, w: int, dps: int) -> mpmath.mpf:
        """``M_inf(W)`` under the stated tail; ``ValueError`` with ``tail="none"``."""
        self._check_limit()
        return super()._limit_window_mass(w, dps)

    def limit_distant_mass(self, window: int, *, dps: int = 30) -> mpmath.mpf:
        """``D_inf(W)`` under the stated tail; ``ValueError`` with ``tail="none"``."""
        self._check_limit()
        return super().limit_distant_mass(window, dps=dps)

    @guarded(10)
    def total_sum(self, *, dps: int = 30) -> mpmath.mpf:
        """Finite only for ``tail="power"`` with ``p > 1``."""
        if self.tail != "power" or self.tail_exponent <= 1:
            return mpmath.inf
        m = self.extent
        head = self._weight_sum(0, m, None, dps + 10)
        p = mpmath.mpf(self.tail_exponent)
        tail = mpmath.exp(mpmath.mpf(self.values[-1])) * mpmath.mpf(m) ** p
        # zeta(p, m+1), relative to itself however small
        return head + tail * _zeta_tail(m, p, mpmath.mpf(1), mpmath.mp.dps)

    @guarded(10)
    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        """``sum_{d>=w} e^{b(d)}`` under the power tail (``p > 1``; docs/theory.md §5),
        summed from ``w`` on: the given values ``w <= d < m`` (``_weight_sum``) plus
        ``e^{b(m-1)} m^p zeta(p, max(w, m) + 1)``, never ``S_inf - S_W``, which cancels the
        digits by which ``S_W`` exceeds the tail."""
        m = self.extent
        work = mpmath.mp.dps  # dps + the guard digits
        head = self._weight_sum(w, m, None, work) if w < m else mpmath.mpf(0)
        p = mpmath.mpf(self.tail_exponent)
        scale = mpmath.exp(mpmath.mpf(self.values[-1])) * mpmath.mpf(m) ** p
        return head + scale * _zeta_tail(max(w, m), p, mpmath.mpf(1), work)

    def classify(self) -> Classification:
        numeric = classify_values(self.values, margin=self.margin)
        evidence = dict(numeric.evidence)
        evidence["numeric_label"] = numeric.label
        evidence["tail_assumption"] = self.summation_note()
        if self.tail == "constant":
            return Classification("dilutes", "W/l", evidence, "assumed-tail")
        if self.tail == "power":
            p = self.tail_exponent
            if p > 1:
                return Classification("summable", f"l^-({p!r}-1)", evidence, "assumed-tail")
            rate = "ln W/ln l" if p == 1 else f"l^-(1-{p!r})"
            return Classification("dilutes", rate, evidence, "assumed-tail")
        return Classification(numeric.label, numeric.rate, evidence, "numeric")

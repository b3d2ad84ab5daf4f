"""Summable or diluting: the class of a positional prior (docs/theory.md §5, Theorem 3).

With prior partial sums ``S_m = sum_{d<m} e^{b(d)}`` and content scores ``|s| <= B``:

* summable (``S_inf < inf``): ``D_l(W) <= 1 - e^{-2B} S_W / S_inf`` for every ``l``, the
  distant mass stays bounded away from one;
* not summable: ``M_l(W) -> 0``, ``D_l(W) -> 1`` (dilution), at the rate of ``S_W / S_l``.

Three ways to decide:

* closed form (every built-in family: the p-series test for ``(1+d)^-alpha`` and
  ``(1 + r2 d)^-r1``, the geometric test for ``e^{-m d}``, a constant or bounded tail for
  NoPE, T5 and Sandwich) -- ``Encoding.classify()``;
* symbolic, a cross-check of the closed form (``priors.symbolic.classify(enc,
  symbolic=True)``): a limit comparison of the summand ``e^{b(d)}`` with ``(1+d)^-2``,
  then sympy's ``Sum.is_convergent``;
* numeric evidence for a bias given as data (``classify_values``, here): the estimated
  tail exponent ``p = -db / d ln(1+d)`` over the last octave of the range (the local
  p-series exponent: ``(1+d)^-p`` is summable iff ``p > 1``), and "inconclusive" when
  ``p`` is within ``margin`` of 1 or the range is too short to say.

This module is a leaf: the value type ``Classification`` that every encoding returns and
the numeric test, on numpy alone (it imports no encoding). The symbolic test of an
encoding (``classify``, ``symbolic_label``) is ``priors.symbolic``.

>>> import numpy as np
>>> c = classify_values(-2.0 * np.log1p(np.arange(4096.0)))
>>> c.label, round(c.evidence["tail_exponent"], 12)
('summable', 2.0)
>>> classify_values(-1.0 * np.log1p(np.arange(4096.0))).label
'inconclusive'
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MARGIN",
    "LABELS",
    "MIN_SAMPLES",
    "Classification",
    "classify_values",
]

LABELS = ("summable", "dilutes", "inconclusive")
#: Default margin around the critical exponent 1 inside which numeric evidence does not decide.
DEFAULT_MARGIN = 0.05
#: Fewer sampled distances than this never decide numerically.
MIN_SAMPLES = 16


@dataclass(frozen=True)
class Classification:
    """The class of a prior with its rate and evidence (docs/theory.md §5).

    Attributes
    ----------
    label : str
        ``"summable"``, ``"dilutes"`` or ``"inconclusive"``.
    rate : str
        How the window mass behaves: for ``"dilutes"`` the rate of ``M_l(W) -> 0``
        (``"W/l"``, ``"l^-(1-rho)"``, ``"ln W/ln l"``, ...); for ``"summable"`` the rate at
        which ``D_l(W)`` approaches its limit (``"e^{-m l}"``, ``"l^-(alpha-1)"``, ...).
    evidence : Mapping
        The test used and its numbers (JSON-friendly).
    method : str
        ``"closed-form"``, ``"symbolic"``, ``"numeric"`` or ``"assumed-tail"``.
    """

    label: str
    rate: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    method: str = "closed-form"

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"label must be one of {LABELS}, got {self.label!r}")

    @property
    def summable(self) -> bool:
        return self.label == "summable"

    def to_dict(self) -> dict[str, Any]:
        """``{"label", "rate", "method", "evidence"}``, JSON-ready."""
        return {
            "label": self.label,
            "rate": self.rate,
            "method": self.method,
            "evidence": dict(self.evidence),
        }

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``."""
        return json.dumps(self.to_dict(), **json_kwargs)


def _exp_sum(values: np.ndarray) -> float | str:
    """``sum e^{v}`` to float64 rounding (``e^{top} fsum(e^{v - top})``, no overflow warning):
    a float, or its 17-digit decimal string beyond the float range."""
    top = float(values.max())
    part = math.fsum(np.exp(values - top).tolist())
    if top < 700:
        return math.exp(top) * part
    import mpmath

    with mpmath.workdps(20):
        return mpmath.nstr(mpmath.exp(mpmath.mpf(top)) * part, 17)


def classify_values(
    values: Any, *, margin: float = DEFAULT_MARGIN, start: int = 0
) -> Classification:
    """Numeric class of a bias given as samples ``b(d)`` at ``d = start .. start+m-1``.

    The estimated tail exponent is the secant slope ``p = -(b(d2) - b(d1)) /
    (ln(1+d2) - ln(1+d1))`` over the last octave ``d1 = (d2+1)//2 - 1 .. d2`` of the
    range (exact for the log-distance family). ``p > 1 + margin``: "summable";
    ``p < 1 - margin``: "dilutes"; otherwise, or with fewer than ``MIN_SAMPLES`` samples,
    "inconclusive". The evidence holds ``p``, the margin, the sampled range and the
    partial sums ``S_m`` at powers of two (float64, exactly rounded with ``math.fsum``).
    """
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError("values must be a nonempty array of finite bias values")
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and 0 <= margin < 1):
        raise ValueError(f"margin must be in [0, 1), got {margin!r}")
    m = arr.size
    d2 = start + m - 1
    d1 = max(start, (d2 + 1) // 2 - 1)
    evidence: dict[str, Any] = {"samples": m, "range": [start, d2], "margin": margin}
    sums = {}
    k = 1
    while k <= m:
        sums[str(start + k)] = _exp_sum(arr[:k])
        k *= 2
    evidence["partial_sums"] = sums
    if m < MIN_SAMPLES or d2 == d1:
        evidence["reason"] = f"fewer than {MIN_SAMPLES} samples"
        return Classification("inconclusive", "unknown", evidence, "numeric")
    p = -(arr[d2 - start] - arr[d1 - start]) / (math.log1p(d2) - math.log1p(d1))
    evidence["tail_exponent"] = float(p)
    evidence["octave"] = [d1, d2]
    if p > 1 + margin:
        return Classification("summable", f"l^-({p:.4g}-1) (estimated)", evidence, "numeric")
    if p < 1 - margin:
        rate = "1/l" if abs(p) <= margin else f"l^-(1-{p:.4g}) (estimated)"
        return Classification("dilutes", rate, evidence, "numeric")
    evidence["reason"] = f"tail exponent within {margin} of 1: the evidence does not decide"
    return Classification("inconclusive", "unknown", evidence, "numeric")


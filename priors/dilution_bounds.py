"""The closed-form bounds of Theorem 1 (docs/theory.md §3): dilution.

If the content scores satisfy ``|s[l,j]| <= B``, the prefix-consistent operator at balance
``rho`` in ``[0, 1)`` (``kappa = rho / (1 - rho)``) satisfies, for every row ``l`` and key
``j <= l``,

    a[l,j] <= e^{2B(1-rho)} l^{-(1-rho)}                                (weight bound)
    C'[l,j]^{1+kappa} <= (1+kappa) e^{2B} (H_l - H_{j-1})               (column bound)

with ``C'[l,j] = sum_{i<=l} a[i,j]`` and ``H_m = 1 + 1/2 + ... + 1/m``; any ``W`` keys of
row ``l`` together receive at most ``W`` times the weight bound (window bound). At
``rho = 0`` the weight bound is the softmax bound ``e^{2B}/l``.

The theorem checks (``proofs_check.theorems.dilution``) compare the operator with these
functions and the figures (``paper_figs.py``, figure 3) draw them, so both use one formula.
``B`` and ``rho`` are plain floats (the exponential is ``math.exp``, float64); the length
and the harmonic tail may be any number or array type with ``*`` and ``**`` (``float``,
``numpy.ndarray``, ``torch.Tensor``), evaluated by that type's arithmetic.

>>> weight_bound(1, 0.5, 0.0), weight_bound(4, 0.5, 0.0)     # B = 0: l^-(1-rho)
(1.0, 0.5)
>>> window_bound(8, 4, 0.5, 0.0)                             # 8 keys: 8 * 0.5
4.0
>>> column_bound(1.0, 0.0, 0.0)                              # rho = 0, B = 0: H_l - H_{j-1}
1.0
>>> harmonic_tails(3)[2].tolist()                            # H_3 - H_{j-1}, j = 1, 2, 3
[1.8333333333333333, 0.8333333333333334, 0.3333333333333333]
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

__all__ = ["column_bound", "harmonic_tails", "weight_bound", "window_bound"]

Num = TypeVar("Num")


def _rho(rho: object) -> float:
    value = _real(rho, "rho")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"rho must lie in [0, 1), got {rho!r}")
    return value


def _score_bound(score_bound: object) -> float:
    value = _real(score_bound, "score_bound")
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"score_bound must be a finite number >= 0, got {score_bound!r}")
    return value


def _score_factor(exponent: float, score_bound: float) -> float:
    """``e^exponent`` (``2B(1-rho)`` or ``2B``) in float64; ``ValueError`` naming
    ``score_bound`` where it overflows (beyond ``e^709.78``), not an ``OverflowError``."""
    try:
        return math.exp(exponent)
    except OverflowError:
        raise ValueError(
            f"score_bound = {score_bound!r} is too large for the float64 bounds: the factor "
            f"e^{exponent:.6g} overflows (it must stay below e^709)"
        ) from None


def _real(value: object, name: str) -> float:
    if isinstance(value, (bool, str, bytes)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None


def weight_bound(length: Num, rho: float, score_bound: float) -> Num:
    """``e^{2B(1-rho)} l^{-(1-rho)}``: the largest weight row ``l`` can give one key (§3).

    ``length`` is ``l >= 1`` (a number or an array of row indices), ``rho`` in ``[0, 1)``,
    ``score_bound`` is ``B >= 0``. ``ValueError`` naming ``rho`` or ``score_bound`` when
    they are out of range.
    """
    r = _rho(rho)
    b = _score_bound(score_bound)
    return _score_factor(2 * b * (1 - r), b) * length ** -(1 - r)


def window_bound(window: int, length: Num, rho: float, score_bound: float) -> Num:
    """``W e^{2B(1-rho)} l^{-(1-rho)}``: the most any ``W`` keys of row ``l`` receive (§3).

    ``W`` times ``weight_bound(length, rho, score_bound)``; it exceeds 1 (the trivial bound
    of a row's mass) for short rows, and a caller that draws it clips it there.
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    return window * weight_bound(length, rho, score_bound)


def column_bound(harmonic_tail: Num, rho: float, score_bound: float) -> Num:
    """``(1+kappa) e^{2B} (H_l - H_{j-1})``: the bound on ``C'[l,j]^{1+kappa}`` (§3).

    ``harmonic_tail`` is ``H_l - H_{j-1} = sum_{i=j}^{l} 1/i`` (a number or an array; the
    caller computes it, e.g. from ``priors.harmonic.harmonic_number``), ``kappa =
    rho/(1-rho)``.
    """
    r = _rho(rho)
    b = _score_bound(score_bound)
    kappa = r / (1 - r)
    return (1 + kappa) * _score_factor(2 * b, b) * harmonic_tail


def harmonic_tails(n: int) -> Any:
    """``T[l-1, j-1] = H_l - H_{j-1}`` for ``1 <= j <= l <= n`` (0 above), float64 numpy.

    Without cancellation: ``H_m`` is summed at 40 digits (its definition) and split
    into two floats ``hi + lo``; ``hi_l - hi_{j-1}`` is exact whenever ``H_{j-1} >= H_l / 2``
    (Sterbenz), which holds next to the diagonal where the difference is small, and
    otherwise the difference is at least ``H_l / 2`` and rounds with relative error
    ``<= eps``; adding ``lo_l - lo_{j-1}`` leaves a relative error of a few ulps. The naive
    difference of rounded harmonic numbers loses ``log10(l H_l)`` digits (``~2e-12`` at
    ``l = 2048``), enough to fail a check of a bound that is attained.
    """
    import mpmath
    import numpy as np

    m = int(n)
    if isinstance(n, bool) or m != n or m < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    hi = np.zeros(m + 1)
    lo = np.zeros(m + 1)
    with mpmath.workdps(40):  # H_m by its defining sum: <= n roundings of 1e-40 each
        h = mpmath.mpf(0)
        for k in range(1, m + 1):
            h += mpmath.mpf(1) / k
            hi[k] = float(h)
            lo[k] = float(h - mpmath.mpf(hi[k]))
    tails = (hi[1:, None] - hi[None, :-1]) + (lo[1:, None] - lo[None, :-1])
    return np.tril(tails)

"""Arbitrary-precision row-by-row solver of Lemma 2.1 (docs/theory.md §2), the ground truth.

Same mathematics as :mod:`._newton`, written in mpmath for small ``n``: per row a
safeguarded Newton iteration on ``zeta = log Z`` whose every evaluation solves each key's
monotone scalar equation ``x + kappa log(C_j + e^x) = s_j - zeta`` by Newton from an upper
bound (monotone convergence, ``h`` convex increasing). Runs at ``dps`` plus guard digits inside
``mpmath.workdps`` and never touches the global precision.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import mpmath

from priors.precision import guarded

__all__ = ["causal_ot_exact_mp"]

_GUARD = 15


def _as_rows(scores: object) -> list[list[object]]:
    try:
        import torch  # local: this module is only imported from proofs_check.operators

        if isinstance(scores, torch.Tensor):
            if scores.is_complex() or scores.dtype == torch.bool:
                raise ValueError(f"scores must be real, got a tensor of dtype {scores.dtype}")
            scores = scores.detach().cpu().double().tolist()
    except ImportError:  # pragma: no cover - torch is a dependency of proofs_check
        pass
    if hasattr(scores, "tolist"):
        scores = scores.tolist()
    if not isinstance(scores, Sequence) or len(scores) == 0:
        raise ValueError("scores must be a non-empty n x n matrix")
    rows = [list(r) if isinstance(r, Sequence) else None for r in scores]
    n = len(rows)
    if any(r is None or len(r) != n for r in rows):
        raise ValueError(f"scores must be square n x n (got {n} rows of unequal/other length)")
    return rows  # type: ignore[return-value]


def _solve_key(t: mpmath.mpf, log_c: mpmath.mpf | None, kappa: mpmath.mpf, eps: mpmath.mpf):
    """Root of ``x + kappa*log(C + e^x) = t`` (``log_c is None`` means ``C = 0``)."""
    if log_c is None:
        return t / (1 + kappa)
    x = min(t / (1 + kappa), t - kappa * log_c)  # upper bound: Newton decreases monotonically
    c = mpmath.exp(log_c)
    for _ in range(200):
        a = mpmath.exp(x)
        d = c + a
        dx = (x + kappa * mpmath.log(d) - t) / (1 + kappa * a / d)
        x -= dx
        if abs(dx) <= eps * (1 + abs(x)):
            return x
    raise RuntimeError("scalar Newton did not converge")  # pragma: no cover


def causal_ot_exact_mp(scores: object, rho: object, *, dps: int = 30) -> list[list[mpmath.mpf]]:
    r"""The prefix-consistent causal OT operator in mpmath (docs/theory.md §2, Lemma 2.1).

    Row ``l`` (1-based) solves ``a_j (C[l-1,j] + a_j)^kappa = e^{s[l,j]} / Z_l`` with
    ``sum_j a_j = 1`` and ``kappa = rho/(1-rho)``; ``C[l-1,j] = sum_{k=j}^{l-1} a[k,j]``.

    Parameters
    ----------
    scores : n x n matrix (nested sequences, numpy array or torch tensor); entries above the
        diagonal are ignored, ``-inf`` entries are masked keys (weight exactly 0). Float
        entries are taken exactly; strings are parsed by mpmath at working precision;
        complex or boolean entries (or tensors), and anything else that is no real number,
        raise ValueError naming the entry.
    rho : real in ``[0, 1)`` (float taken exactly, or an mpmath number / string).
    dps : decimal digits of the result (guard digits are added internally).

    Returns
    -------
    list of ``n`` rows, row ``l-1`` a list of ``l`` ``mpmath.mpf`` (index ``j-1``).

    Examples
    --------
    The fixed point of Lemma 2.1 holds to the working precision, and ``rho = 0`` is softmax:

    >>> import mpmath
    >>> s = [[0.0, 0.0, 0.0], [0.5, -1.0, 0.0], [2.0, 0.0, 1.0]]
    >>> a = causal_ot_exact_mp(s, 0.5, dps=30)
    >>> with mpmath.workdps(30):  # kappa = 1: a_j C'_j / w_j = 1/Z_3 for every key j
    ...     c2 = [a[0][0] + a[1][0] + a[2][0], a[1][1] + a[2][1], a[2][2]]
    ...     z = [a[2][j] * c2[j] / mpmath.exp(s[2][j]) for j in range(3)]
    ...     print(max(abs(zj - z[0]) for zj in z) < mpmath.mpf(10) ** -28)
    True
    >>> sm = causal_ot_exact_mp(s, 0, dps=30)[2]
    >>> with mpmath.workdps(30):
    ...     print(abs(sm[1] - 1 / (1 + mpmath.e ** 2 + mpmath.e)) < mpmath.mpf(10) ** -28)
    True
    """
    if not isinstance(dps, int) or isinstance(dps, bool) or dps < 1:
        raise ValueError(f"dps must be a positive integer, got {dps!r}")
    return _solve_rows(_as_rows(scores), rho, dps=dps)


@guarded(_GUARD)
def _solve_rows(rows: list, rho: object, *, dps: int) -> list[list[mpmath.mpf]]:
    """The rows of ``causal_ot_exact_mp`` at ``dps + _GUARD`` digits, rounded to ``dps``."""
    n = len(rows)
    try:
        if isinstance(rho, bool):  # True/False are not an exponent, as in validate_rho
            raise TypeError("a bool is not rho")
        r = mpmath.mpf(rho)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"rho must be a real number in [0, 1), got {rho!r}") from exc
    if not mpmath.isfinite(r) or not 0 <= r < 1:
        raise ValueError(f"rho must be finite and in [0, 1), got {rho!r}")
    kappa = r / (1 - r)
    eps = mpmath.mpf(10) ** (-(dps + _GUARD - 3))
    col: list[mpmath.mpf] = [mpmath.mpf(0)] * n
    out: list[list[mpmath.mpf]] = []
    for i in range(n):
        s: list[mpmath.mpf | None] = []
        for j in range(i + 1):
            v = rows[i][j]
            if isinstance(v, float) and math.isnan(v):
                raise ValueError(f"scores[{i}][{j}] is NaN")
            try:
                if isinstance(v, bool):
                    raise TypeError("a bool is not a score")
                if isinstance(v, numbers.Integral):  # numpy integers too, exactly
                    v = int(v)
                elif isinstance(v, numbers.Real) and not isinstance(v, (float, mpmath.mpf)):
                    v = float(v)  # numpy floats: float32 and float64 are exact in a float
                sv = mpmath.mpf(v)
            except (TypeError, ValueError):
                raise ValueError(f"scores[{i}][{j}] must be a real number or -inf, "
                                 f"got {v!r}") from None
            if mpmath.isnan(sv) or sv == mpmath.inf:
                raise ValueError(f"scores[{i}][{j}] must be finite or -inf, got {v!r}")
            s.append(None if sv == -mpmath.inf else sv)
        if all(v is None for v in s):
            raise ValueError(f"scores row {i} has every key masked")
        keys = [j for j in range(i + 1) if s[j] is not None]
        log_c = {j: (mpmath.log(col[j]) if col[j] > 0 else None) for j in keys}
        if kappa == 0:
            zeta = mpmath.log(mpmath.fsum(mpmath.exp(s[j]) for j in keys))
            xs = {j: s[j] - zeta for j in keys}
        else:
            zeta = mpmath.log(mpmath.fsum(mpmath.exp(s[j]) for j in keys))
            lo, hi = -mpmath.inf, mpmath.inf
            for _ in range(500):
                xs = {j: _solve_key(s[j] - zeta, log_c[j], kappa, eps) for j in keys}
                a = {j: mpmath.exp(xs[j]) for j in keys}
                tot = mpmath.fsum(a.values())
                u = mpmath.log(tot)
                slope = mpmath.fsum(
                    a[j] / (1 + kappa * a[j] / (col[j] + a[j])) for j in keys
                ) / tot
                b1, b2 = zeta + u, zeta + u / (1 - r)
                lo, hi = max(lo, min(b1, b2)), min(hi, max(b1, b2))
                new = zeta + u / slope
                if not lo <= new <= hi:
                    new = (lo + hi) / 2
                done = abs(new - zeta) <= eps * (1 + abs(zeta))
                zeta = new
                if done:
                    break
            else:  # pragma: no cover
                raise RuntimeError(f"row {i}: normaliser iteration did not converge")
            xs = {j: _solve_key(s[j] - zeta, log_c[j], kappa, eps) for j in keys}
        tot = mpmath.fsum(mpmath.exp(xs[j]) for j in keys)
        row = [mpmath.mpf(0)] * (i + 1)
        for j in keys:
            row[j] = mpmath.exp(xs[j]) / tot
            col[j] += row[j]
        out.append(row)
    return out

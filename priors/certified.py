"""Certified window and distant masses: Arb ball enclosures (THEORY.md §5–§6).

The rigorous mode of ``python -m priors.mass --certify``. For the encodings whose prior
partial sums have a closed form, the two sums of THEORY.md §5,

    S_W = sum_{d<W} e^{b(d)},      T = sum_{d=W}^{l-1} e^{b(d)}      (the tail, never S_l - S_W),

are evaluated in Arb ball arithmetic (python-flint), and so are

    M_l(W) = S_W / (S_W + T),   D_l(W) = T / (S_W + T),   M_inf(W) = S_W / S_inf  (0 if S_inf = inf)

and the content-score brackets ``(M^-, M^+)``, ``(D^-, D^+)`` of
``priors.content_bounds`` with ``E = e^{2B}`` as a ball. Every returned ball is
guaranteed to contain the exact value; the working precision is doubled (from
``prec + 32`` bits) until each ball has at least ``prec`` bits of relative accuracy
(a ``RuntimeWarning`` says so if it does not get there; the ball still encloses).

=================  ==============================================================
encoding           sums in Arb
=================  ==============================================================
``NoPE``           ``S_W = W``, ``T = l - W`` (exact integers)
``ALiBi``          ``S_W = expm1(-m W) / expm1(-m)``,
                   ``T = e^{-m W} expm1(-m (l-W)) / expm1(-m)``, ``S_inf = -1/expm1(-m)``
``LogDistance``    ``priors.harmonic.harmonic_tail_arb`` (Hurwitz zeta differences,
                   digamma at ``alpha = 1``), ``S_inf = zeta(alpha)``
``KerpleLog``      ``r2^-r1 (zeta(r1, lo + 1/r2) - zeta(r1, hi + 1/r2))`` (digamma
                   differences at ``r1 = 1``), ``S_inf = r2^-r1 zeta(r1, 1/r2)``
``T5Buckets``      ``sum_k count_k e^{table[k]}`` over the distinct buckets, the last one
                   counting the constant tail (bucket counts are exact integers)
=================  ==============================================================

Parameters given as floats are exact binary numbers and enter the balls exactly.

>>> from flint import arb, ctx
>>> from priors.encodings import LogDistance, NoPE
>>> c = certified_masses(LogDistance(alpha=2.0), 1, 10**15)
>>> with ctx.workprec(300):                      # M_inf(1) = 1 / zeta(2) = 6 / pi^2
...     c.limit_window_mass.contains(6 / arb.pi() ** 2)
True
>>> certified_masses(NoPE(), 512, 65536).window_mass == arb(512) / 65536   # exact ball
True
>>> lo, hi = outward_decimal(c.window_mass, 12)   # decimal strings that enclose the ball
>>> from mpmath import mpf, workdps
>>> with workdps(60):
...     bool(mpf(lo) <= LogDistance(alpha=2.0).window_mass(1, 10**15, dps=50) <= mpf(hi))
True
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import Any

import flint
import numpy as np

from priors.content_bounds import distant_mass_bounds, window_mass_bounds
from priors.encodings.alibi import ALiBi
from priors.encodings.base import check_window_length, finite_param
from priors.encodings.kerple import KerpleLog
from priors.encodings.log_distance import LogDistance
from priors.encodings.nope import NoPE
from priors.encodings.t5 import T5Buckets, t5_bucket
from priors.harmonic import exact_arb, harmonic_tail_arb, steep_power_sum_arb

__all__ = [
    "CERTIFIED_ENCODINGS",
    "CertifiedMasses",
    "certified_masses",
    "check_certifiable",
    "outward_decimal",
    "prec_for_digits",
]

#: Encodings with a certified mode (their ``name``), in the order of THEORY.md §5.
CERTIFIED_ENCODINGS = ("nope", "alibi", "log-distance", "kerple-log", "t5")
#: Guard bits of the first attempt on top of the requested precision.
_GUARD_BITS = 32
#: Precision doublings before giving up on the requested accuracy (and warning).
_MAX_DOUBLINGS = 8
#: Terms summed one by one (cheaper and exact-er than two zeta values).
_DIRECT_TERMS = 64

Pair = tuple[flint.arb, flint.arb]
#: ``(S_W, T, S_inf or None)`` as balls at the current Arb working precision.
Sums = tuple[flint.arb, flint.arb, flint.arb | None]


@dataclass(frozen=True)
class CertifiedMasses:
    """Ball enclosures of the masses of one encoding at one ``(W, l)`` (THEORY.md §5).

    ``window_mass``, ``distant_mass`` and ``limit_window_mass`` are the ``B = 0`` values;
    ``window_mass_bracket = (M^-, M^+)`` and ``distant_mass_bracket = (D^-, D^+)`` are
    the content-score brackets for ``|s| <= score_bound`` (both equal to the exact value at
    ``B = 0``), each endpoint a ball: every attainable mass lies in
    ``[M^-.lower(), M^+.upper()]``. Each ball has at least ``prec`` bits of relative
    accuracy (exact zeros have radius 0); ``method`` says how the sums were evaluated.
    """

    encoding: str
    params: dict[str, Any]
    window: int
    length: int
    score_bound: float
    window_mass: flint.arb
    distant_mass: flint.arb
    limit_window_mass: flint.arb
    window_mass_bracket: Pair
    distant_mass_bracket: Pair
    prec: int
    method: str

    def to_json(self, digits: int) -> dict[str, Any]:
        """The enclosures as ``[lower, upper]`` decimal strings with ``digits`` significant
        digits, rounded outwards (``outward_decimal``), so that they really enclose."""
        m_lo, m_hi = self.window_mass_bracket
        d_lo, d_hi = self.distant_mass_bracket
        return {
            "window_mass_ball": list(outward_decimal(self.window_mass, digits)),
            "distant_mass_ball": list(outward_decimal(self.distant_mass, digits)),
            "limit_window_mass_ball": list(outward_decimal(self.limit_window_mass, digits)),
            "window_mass_bracket_ball": [
                outward_decimal(m_lo, digits)[0],
                outward_decimal(m_hi, digits)[1],
            ],
            "distant_mass_bracket_ball": [
                outward_decimal(d_lo, digits)[0],
                outward_decimal(d_hi, digits)[1],
            ],
            "prec": self.prec,
            "certify_method": self.method,
        }


def prec_for_digits(digits: int) -> int:
    """Bits of relative accuracy for balls printed with ``digits`` significant digits:
    ``ceil(digits log2 10) + 24`` (the radius then sits far below the last printed digit)."""
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or digits < 1:
        raise ValueError(f"digits must be an integer >= 1, got {digits!r}")
    return math.ceil(int(digits) * math.log2(10)) + 24


def outward_decimal(ball: flint.arb, digits: int) -> tuple[str, str]:
    """``(lower, upper)`` decimal strings with ``digits`` significant digits enclosing ``ball``.

    Arb's ``mid_rad_10exp`` gives integers with ``ball ⊆ [mid ± rad] 10^exp`` (rigorous);
    the exact decimals ``(mid - rad) 10^exp`` and ``(mid + rad) 10^exp`` are then rounded
    to ``digits`` significant digits towards ``-inf`` and ``+inf`` with Python's
    ``decimal`` (``ROUND_FLOOR`` / ``ROUND_CEILING``, correctly rounded; ``e`` marks an
    exponent). Hence the exact values of the strings ``lower`` and ``upper`` (parsed by
    ``mpmath.mpf`` at enough precision) bracket every point of the ball.

    >>> outward_decimal(flint.arb(2) / 3, 5)
    ('0.66666', '0.66667')
    """
    if not isinstance(ball, flint.arb):
        raise ValueError(f"ball must be a flint.arb, got {type(ball).__name__}")
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or digits < 1:
        raise ValueError(f"digits must be an integer >= 1, got {digits!r}")
    if not ball.is_finite():
        raise ValueError(f"ball must be finite, got {ball}")
    mid, rad, exp = (int(v) for v in ball.mid_rad_10exp(int(digits) + 5))
    out = []
    for value, rounding in ((mid - rad, ROUND_FLOOR), (mid + rad, ROUND_CEILING)):
        ctx = Context(prec=int(digits), rounding=rounding, Emax=MAX_EMAX, Emin=MIN_EMIN)
        rounded = ctx.plus(Decimal(f"{value}E{exp}"))  # the constructor is exact
        out.append(str(rounded).replace("E", "e"))
    return out[0], out[1]


# ----------------------------------------------------------------------------- the sums


def _nope_sums(enc: NoPE, w: int, n: int) -> Callable[[], Sums]:
    def sums() -> Sums:
        return flint.arb(w), flint.arb(n - w), None

    return sums


def _alibi_sums(enc: ALiBi, w: int, n: int) -> Callable[[], Sums]:
    def sums() -> Sums:
        m = exact_arb(enc.slope)
        den = -(-m).expm1()  # 1 - e^{-m} > 0, no cancellation for small slopes
        s_w = -(-m * w).expm1() / den
        tail = (-m * w).exp() * -(-m * (n - w)).expm1() / den
        return s_w, tail, 1 / den

    return sums


def _log_distance_sums(enc: LogDistance, w: int, n: int) -> Callable[[], Sums]:
    def sums() -> Sums:
        work = flint.ctx.prec
        s_w = harmonic_tail_arb(0, w, enc.alpha, prec=work)
        tail = harmonic_tail_arb(w, n, enc.alpha, prec=work)
        steep = steep_power_sum_arb(0, None, exact_arb(enc.alpha), flint.arb(1), work)
        if enc.alpha <= 1:
            total = None
        else:
            total = steep if steep is not None else exact_arb(enc.alpha).zeta()
        return s_w, tail, total

    return sums


def _kerple_log_sum(r1: flint.arb, r2: flint.arb, lo: int, hi: int) -> flint.arb:
    """``sum_{d=lo}^{hi-1} (1 + r2 d)^-r1`` at the current working precision."""
    if hi == lo:
        return flint.arb(0)
    if hi - lo <= _DIRECT_TERMS:
        return sum(((1 + r2 * d) ** (-r1) for d in range(lo, hi)), flint.arb(0))
    q = 1 / r2
    steep = steep_power_sum_arb(lo, hi, r1, q, flint.ctx.prec)
    if steep is not None:
        return r2 ** (-r1) * steep
    if r1.is_exact() and r1 == 1:
        inner = (hi + q).digamma() - (lo + q).digamma()
    else:
        inner = r1.zeta(lo + q) - r1.zeta(hi + q)
    return r2 ** (-r1) * inner


def _kerple_log_sums(enc: KerpleLog, w: int, n: int) -> Callable[[], Sums]:
    def sums() -> Sums:
        r1, r2 = exact_arb(enc.r1), exact_arb(enc.r2)
        steep = steep_power_sum_arb(0, None, r1, 1 / r2, flint.ctx.prec)
        if enc.r1 <= 1:
            total = None
        elif steep is not None:
            total = r2 ** (-r1) * steep
        else:
            total = r2 ** (-r1) * r1.zeta(1 / r2)
        return _kerple_log_sum(r1, r2, 0, w), _kerple_log_sum(r1, r2, w, n), total

    return sums


def _t5_counts(enc: T5Buckets, lo: int, hi: int) -> list[int]:
    """Exact number of distances ``lo <= d < hi`` in each bucket (the last one absorbs
    every ``d >= D_sat``)."""
    counts = [0] * enc.num_buckets
    sat = enc.saturation
    head_hi = min(hi, sat)
    if lo < head_hi:
        buckets = t5_bucket(np.arange(lo, head_hi), enc.num_buckets, enc.max_distance)
        for k, c in enumerate(np.bincount(buckets, minlength=enc.num_buckets)):
            counts[k] += int(c)
    counts[-1] += max(0, hi - max(lo, sat))
    return counts


def _t5_sums(enc: T5Buckets, w: int, n: int) -> Callable[[], Sums]:
    window_counts = _t5_counts(enc, 0, w)
    tail_counts = _t5_counts(enc, w, n)

    def sums() -> Sums:
        weights = [exact_arb(t).exp() for t in enc.table]
        s_w = sum((c * e for c, e in zip(window_counts, weights, strict=True) if c), flint.arb(0))
        tail = sum((c * e for c, e in zip(tail_counts, weights, strict=True) if c), flint.arb(0))
        return s_w, tail, None

    return sums


_METHODS: dict[type, tuple[Callable[[Any, int, int], Callable[[], Sums]], str]] = {
    NoPE: (_nope_sums, "exact integers S_W = W, T = l - W"),
    ALiBi: (
        _alibi_sums,
        "geometric sums in Arb: S_W = expm1(-m W)/expm1(-m), T = e^{-m W} expm1(-m (l-W))"
        "/expm1(-m)",
    ),
    LogDistance: (
        _log_distance_sums,
        "Hurwitz zeta differences in Arb (harmonic_tail_arb; digamma at alpha = 1)",
    ),
    KerpleLog: (
        _kerple_log_sums,
        "r2^-r1 (zeta(r1, lo + 1/r2) - zeta(r1, hi + 1/r2)) in Arb (digamma at r1 = 1)",
    ),
    T5Buckets: (
        _t5_sums,
        "bucket counts times e^{table[k]} in Arb, the constant tail in the last bucket",
    ),
}


def check_certifiable(enc: object) -> None:
    """``ValueError`` unless ``enc`` is one of ``CERTIFIED_ENCODINGS``."""
    if type(enc) not in _METHODS:
        name = getattr(enc, "name", type(enc).__name__)
        raise ValueError(
            f"certified masses are available for {', '.join(CERTIFIED_ENCODINGS)}; got {name}"
        )


def _accurate(ball: flint.arb, prec: int) -> bool:
    return bool(ball.is_finite()) and ball.rel_accuracy_bits() >= prec


def certified_masses(
    enc: Any, window: int, length: int, *, score_bound: float = 0.0, prec: int = 128
) -> CertifiedMasses:
    """Guaranteed ball enclosures of ``M_l(W)``, ``D_l(W)``, ``M_inf(W)`` and the §5 brackets.

    Parameters
    ----------
    enc : Encoding
        ``NoPE``, ``ALiBi``, ``LogDistance``, ``KerpleLog`` or ``T5Buckets`` (closed-form
        sums); any other encoding raises ``ValueError``.
    window, length : int
        ``1 <= W <= l <= 1e18``.
    score_bound : float
        Content-score bound ``B >= 0`` (THEORY.md §5); ``E = e^{2B}`` enters as a ball.
    prec : int
        Bits of relative accuracy of every ball (``>= 16``).

    Returns
    -------
    CertifiedMasses
        The distant mass is ``T / (S_W + T)`` from the tail itself (never ``1 - M``).
    """
    check_certifiable(enc)
    w, n = check_window_length(window, length)
    b = finite_param(score_bound, "score_bound")
    if b < 0:
        raise ValueError(f"score_bound must be >= 0, got {score_bound!r}")
    if isinstance(prec, bool) or not isinstance(prec, numbers.Integral) or prec < 16:
        raise ValueError(f"prec must be an integer >= 16, got {prec!r}")
    prec = int(prec)
    if prec > 100_000:
        raise ValueError(f"prec must be <= 100000, got {prec}")
    factory, method = _METHODS[type(enc)]
    sums = factory(enc, w, n)
    work = prec + _GUARD_BITS
    for attempt in range(_MAX_DOUBLINGS + 1):
        with flint.ctx.workprec(work):
            s_w, tail, total = sums()
            norm = s_w + tail
            m = s_w / norm
            d = tail / norm
            limit = flint.arb(0) if total is None else s_w / total
            e = (2 * exact_arb(b)).exp()
            m_br = window_mass_bounds(s_w, tail, e)
            d_br = distant_mass_bounds(s_w, tail, e)
        balls = (m, d, limit, *m_br, *d_br)
        if all(_accurate(x, prec) for x in balls):
            break
        if attempt == _MAX_DOUBLINGS:
            worst = min(x.rel_accuracy_bits() if x.is_finite() else 0 for x in balls)
            warnings.warn(
                f"certified masses: {worst} bits of relative accuracy after raising the "
                f"working precision to {work} bits, not prec={prec} (the balls still enclose)",
                RuntimeWarning,
                stacklevel=2,
            )
            break
        work *= 2
    return CertifiedMasses(
        encoding=enc.name,
        params=enc.params,
        window=w,
        length=n,
        score_bound=b,
        window_mass=m,
        distant_mass=d,
        limit_window_mass=limit,
        window_mass_bracket=(m_br[0], m_br[1]),
        distant_mass_bracket=(d_br[0], d_br[1]),
        prec=prec,
        method=f"{method}; working precision {work} bits",
    )

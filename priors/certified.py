"""Certified window and distant masses: Arb ball enclosures (docs/theory.md §5–§6).

The rigorous mode of ``python -m priors.mass --certify``. For the encodings whose prior
partial sums have a closed form, the two sums of docs/theory.md §5,

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
``LogDistance``    ``priors.harmonic.power_sum_arb`` at ``shift = 1`` (Hurwitz zeta
                   differences, digamma at ``alpha = 1``), ``S_inf = zeta(alpha)``
``KerpleLog``      ``r2^-r1 (zeta(r1, lo + 1/r2) - zeta(r1, hi + 1/r2))`` (digamma
                   differences at ``r1 = 1``; ``power_sum_arb`` at ``shift = 1/r2``),
                   ``S_inf = r2^-r1 zeta(r1, 1/r2)``
``T5Buckets``      ``sum_k count_k e^{table[k]}`` over the distinct buckets, the last one
                   counting the constant tail (bucket counts are exact integers)
=================  ==============================================================

Each of these encodings evaluates its own sums in Arb (``Encoding._weight_sum_arb``,
described by ``Encoding.arb_method``); an encoding without them has no certified mode.
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

import json
import math
import numbers
import warnings
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import Any

import flint

from priors.content_bounds import distant_mass_bounds, window_mass_bounds
from priors.harmonic import exact_arb
from priors.validation import check_prec, check_score_bound, check_window_length

__all__ = [
    "CERTIFIED_ENCODINGS",
    "CertifiedMasses",
    "certified_masses",
    "check_certifiable",
    "outward_decimal",
    "prec_for_digits",
]

#: Encodings with a certified mode (their ``name``), in the order of docs/theory.md §5.
CERTIFIED_ENCODINGS = ("nope", "alibi", "log-distance", "kerple-log", "t5")
#: Guard bits of the first attempt on top of the requested precision.
_GUARD_BITS = 32
#: Precision doublings before giving up on the requested accuracy (and warning).
_MAX_DOUBLINGS = 8

Pair = tuple[flint.arb, flint.arb]


@dataclass(frozen=True)
class CertifiedMasses:
    """Ball enclosures of the masses of one encoding at one ``(W, l)`` (docs/theory.md §5).

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

    def to_dict(self, digits: int) -> dict[str, Any]:
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

    def to_json(self, digits: int, **json_kwargs: Any) -> str:
        """``to_dict(digits)`` as a JSON string (``json.dumps`` keywords pass through)."""
        return json.dumps(self.to_dict(digits), **json_kwargs)


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
        rounded = ctx.plus(Decimal(value))  # an integer: exact, then rounded
        sign, kept, shift = rounded.as_tuple()
        scale = shift + exp  # a Python integer: no exponent range to leave
        if MIN_EMIN < scale + len(kept) and scale + len(kept) < MAX_EMAX:
            out.append(str(Decimal((sign, kept, scale))).replace("E", "e"))
        else:  # beyond decimal's exponent range (a mass like 1e-10^21): written by hand
            body = "".join(map(str, kept))
            point = f"{body[0]}.{body[1:]}" if len(body) > 1 else body
            out.append(f"{'-' if sign else ''}{point}e{scale + len(kept) - 1:+d}")
    return out[0], out[1]


# ----------------------------------------------------------------------------- the sums


def check_certifiable(enc: object) -> None:
    """``ValueError`` unless ``enc`` has a certified mode (one of ``CERTIFIED_ENCODINGS``):
    an encoding is certifiable when it evaluates its sums in Arb (``arb_method``)."""
    if getattr(enc, "arb_method", None) is None:
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
        Content-score bound ``B >= 0`` (docs/theory.md §5); ``E = e^{2B}`` enters as a ball.
    prec : int
        Bits of relative accuracy of every ball (``>= 16``).

    Returns
    -------
    CertifiedMasses
        The distant mass is ``T / (S_W + T)`` from the tail itself (never ``1 - M``).
    """
    check_certifiable(enc)
    w, n = check_window_length(window, length)
    b = check_score_bound(score_bound)
    prec = check_prec(prec)
    if prec > 100_000:
        raise ValueError(f"prec must be <= 100000, got {prec}")
    work = prec + _GUARD_BITS
    for attempt in range(_MAX_DOUBLINGS + 1):
        with flint.ctx.workprec(work):
            # S_W, T and S_inf (None when the prior is not summable), docs/theory.md §5
            s_w = enc._weight_sum_arb(0, w)
            tail = enc._weight_sum_arb(w, n)
            total = enc._weight_sum_arb(0, None)
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
        method=f"{enc.arb_method}; working precision {work} bits",
    )

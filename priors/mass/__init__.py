"""Window and distant masses of any positional prior, with brackets (docs/theory.md §5–§6).

For an encoding with prior partial sums ``S_m`` and query length ``l >= W``:

* exact, at ``B = 0``: ``M_l(W) = S_W / S_l`` and ``D_l(W) = T / S_l`` with the tail
  ``T = S_l - S_W`` summed directly (no subtraction);
* under content scores ``|s| <= B`` (``E = e^{2B}``), the attained brackets of
  ``priors.content_bounds``: ``S_W / (S_W + E T) <= M_l(W) <= E S_W / (E S_W + T)`` and
  ``T / (E S_W + T) <= D_l(W) <= E T / (S_W + E T)``;
* where the encoding has them (``Encoding.series_brackets``: the log-distance prior), the
  series brackets of docs/theory.md §6 (integral test and Euler–Maclaurin, certified);
* the limit ``M_inf(W) = S_W / S_inf`` (0 for a diluting prior) and the class.

The command line ``python -m priors.mass`` lives in ``priors.mass.__main__`` (argument
parsing, its entry point ``main``) and ``priors.mass.format`` (its text and JSON records);
importing this library loads neither.

>>> from priors.encodings import LogDistance
>>> r = mass_report(LogDistance(alpha=1.1), 512, 65536, score_bound=0.5)
>>> lo, hi = r.window_mass_bracket
>>> bool(lo <= r.window_mass <= hi)
True
>>> elo, ehi = r.series_bracket["euler_maclaurin"]
>>> bool(elo <= r.window_mass <= ehi)        # at B = 0 the series bracket holds the exact value
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import mpmath

from priors.classify import Classification
from priors.content_bounds import distant_mass_bounds, window_mass_bounds
from priors.encodings.base import GUARD_DPS, Encoding
from priors.harmonic import DEFAULT_DPS
from priors.precision import guarded
from priors.validation import check_dps, check_score_bound, check_window_length

__all__ = ["MassReport", "mass_report", "masses"]

Pair = tuple[mpmath.mpf, mpmath.mpf]


@dataclass(frozen=True)
class MassReport:
    """Window/distant masses of one encoding at one length (docs/theory.md §5).

    ``window_mass``/``distant_mass`` are exact at ``B = 0``; the ``*_bracket`` pairs hold
    every value attainable with content scores ``|s| <= score_bound`` (equal to the exact
    value at ``B = 0``); ``series_bracket`` is the dict of docs/theory.md §6 brackets of the
    ``B = 0`` value (``Encoding.series_brackets``: log-distance only, else ``None``;
    clipped to ``[0, 1]``); ``summation`` says how the sums were formed where the encoding
    says so (``Encoding.summation_note``).
    ``limit_window_mass`` is ``None`` when the limit is unknown (a user bias with no stated
    tail). Every number has ``digits`` correct significant digits (``dps``, or fewer where
    ``enc.mass_digits`` says so: float64-backed encodings, unmet error bounds).
    """

    encoding: str
    params: dict[str, Any]
    window: int
    length: int
    score_bound: float
    window_mass: mpmath.mpf
    distant_mass: mpmath.mpf
    window_mass_bracket: Pair
    distant_mass_bracket: Pair
    series_bracket: dict[str, Pair] | None
    limit_window_mass: mpmath.mpf | None
    classification: Classification
    dps: int
    digits: int
    summation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; numbers are decimal strings with ``digits`` significant digits
        (lossless; most JSON parsers would round numbers to float64)."""

        def num(x: mpmath.mpf) -> str:
            return mpmath.nstr(x, self.digits, min_fixed=-4, max_fixed=6)

        def pair(p: Pair) -> list[str]:
            return [num(p[0]), num(p[1])]

        def outward(p: Pair) -> list[str]:
            # certified brackets: round the ends down and up, so the decimals still enclose
            from priors.certified import outward_decimal
            from priors.harmonic import exact_arb

            return [
                outward_decimal(exact_arb(p[0]), self.digits)[0],
                outward_decimal(exact_arb(p[1]), self.digits)[1],
            ]

        series = (
            None
            if self.series_bracket is None
            else {k: outward(v) for k, v in self.series_bracket.items()}
        )
        return {
            "encoding": self.encoding,
            "params": self.params,
            "window": self.window,
            "length": self.length,
            "score_bound": self.score_bound,
            "window_mass": num(self.window_mass),
            "distant_mass": num(self.distant_mass),
            "window_mass_bracket": pair(self.window_mass_bracket),
            "distant_mass_bracket": pair(self.distant_mass_bracket),
            "series_bracket": series,
            "limit_window_mass": (
                None if self.limit_window_mass is None else num(self.limit_window_mass)
            ),
            "class": self.classification.label,
            "rate": self.classification.rate,
            "evidence": self.classification.to_dict()["evidence"],
            "summation": self.summation,
            "dps": self.dps,
            "digits": self.digits,
        }

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``."""
        return json.dumps(self.to_dict(), **json_kwargs)


def masses(
    enc: Encoding, window: int, length: int, *, score_bound: float = 0.0, dps: int = DEFAULT_DPS
) -> tuple[Pair, Pair, mpmath.mpf, mpmath.mpf]:
    """``((M^-, M^+), (D^-, D^+), M, D)`` at length ``l`` (docs/theory.md §5).

    ``M = S_W / (S_W + T)`` and ``D = T / (S_W + T)`` at ``B = 0``; the brackets from
    ``priors.content_bounds`` with ``E = e^{2B}``, all from the same two sums ``S_W`` and
    ``T`` (``Encoding._mass_sums``, the sums behind ``window_mass`` and ``distant_mass``).
    """
    w, n, b, dps = _check_inputs(enc, window, length, score_bound, dps)
    s_w, tail = enc._mass_sums(w, n, dps)
    return _masses_from_sums(s_w, tail, b, dps)


def _check_inputs(
    enc: object, window: object, length: object, score_bound: object, dps: object
) -> tuple[int, int, float, int]:
    """The public door of ``masses`` and ``mass_report``: every argument validated once
    (``ValueError`` naming it); what is behind it takes the validated values."""
    if not isinstance(enc, Encoding):
        raise ValueError(f"enc must be an Encoding, got {type(enc).__name__}")
    w, n = check_window_length(window, length)
    return w, n, check_score_bound(score_bound), check_dps(dps)


@guarded(GUARD_DPS)
def _masses_from_sums(
    s_w: mpmath.mpf, tail: mpmath.mpf, b: float, dps: int
) -> tuple[Pair, Pair, mpmath.mpf, mpmath.mpf]:
    """``masses`` from ``S_W`` and ``T`` (computed with ``GUARD_DPS`` guard digits),
    rounded to ``dps`` digits."""
    e = mpmath.exp(2 * mpmath.mpf(b))
    m_br = window_mass_bounds(s_w, tail, e)
    d_br = distant_mass_bounds(s_w, tail, e)
    return m_br, d_br, s_w / (s_w + tail), tail / (s_w + tail)


def mass_report(
    enc: Encoding,
    window: int,
    length: int,
    *,
    score_bound: float = 0.0,
    dps: int = DEFAULT_DPS,
) -> MassReport:
    """Masses, brackets, limit and class of ``enc`` at window ``W`` and length ``l``.

    Parameters
    ----------
    enc : Encoding
        Any encoding of ``priors.encodings``.
    window, length : int
        ``1 <= W <= l <= 1e18``.
    score_bound : float
        Content-score bound ``B >= 0`` of docs/theory.md §5.
    dps : int
        Decimal digits of every number.
    """
    w, n, b, dps = _check_inputs(enc, window, length, score_bound, dps)
    # the sums of ``masses``, called from here so that a warning about the digits a sum
    # carries names the caller of ``mass_report`` (``Encoding._warn_digits``' stacklevel)
    s_w, tail = enc._mass_sums(w, n, dps)
    m_br, d_br, m, d = _masses_from_sums(s_w, tail, b, dps)
    series = enc._series_brackets(w, n, dps)
    digits = enc.mass_digits(w, n, dps)
    return MassReport(
        encoding=enc.name,
        params=enc.params,
        window=w,
        length=n,
        score_bound=float(score_bound),
        window_mass=m,
        distant_mass=d,
        window_mass_bracket=m_br,
        distant_mass_bracket=d_br,
        series_bracket=series,
        limit_window_mass=enc._limit_window_mass(w, dps) if enc.limit_known else None,
        classification=enc.classify(),
        dps=dps,
        digits=digits,
        summation=enc.summation_note(),
    )


"""Window and distant masses of any positional prior, with brackets (THEORY.md §5–§6).

For an encoding with prior partial sums ``S_m`` and query length ``l >= W``:

* exact, at ``B = 0``: ``M_l(W) = S_W / S_l`` and ``D_l(W) = T / S_l`` with the tail
  ``T = S_l - S_W`` summed directly (no subtraction);
* under content scores ``|s| <= B`` (``E = e^{2B}``), the attained brackets of
  ``priors.content_bounds``: ``S_W / (S_W + E T) <= M_l(W) <= E S_W / (E S_W + T)`` and
  ``T / (E S_W + T) <= D_l(W) <= E T / (S_W + E T)``;
* for the log-distance prior, the series brackets of THEORY.md §6 from
  ``priors.brackets.window_mass_brackets`` (integral test and Euler–Maclaurin, certified);
* the limit ``M_inf(W) = S_W / S_inf`` (0 for a diluting prior) and the class.

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

from dataclasses import dataclass
from typing import Any

import mpmath

from priors.classify import Classification
from priors.content_bounds import distant_mass_bounds, window_mass_bounds
from priors.encodings.base import GUARD_DPS, Encoding, check_window_length, finite_param
from priors.harmonic import DEFAULT_DPS, _check_dps

__all__ = ["MassReport", "mass_report", "masses"]

Pair = tuple[mpmath.mpf, mpmath.mpf]


@dataclass(frozen=True)
class MassReport:
    """Window/distant masses of one encoding at one length (THEORY.md §5).

    ``window_mass``/``distant_mass`` are exact at ``B = 0``; the ``*_bracket`` pairs hold
    every value attainable with content scores ``|s| <= score_bound`` (equal to the exact
    value at ``B = 0``); ``series_bracket`` is the dict of THEORY.md §6 brackets of the
    ``B = 0`` value (log-distance only, else ``None``; clipped to ``[0, 1]``).
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

    def to_json(self) -> dict[str, Any]:
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
            "evidence": self.classification.to_json()["evidence"],
            "summation": self.summation,
            "dps": self.dps,
            "digits": self.digits,
        }


def masses(
    enc: Encoding, window: int, length: int, *, score_bound: float = 0.0, dps: int = DEFAULT_DPS
) -> tuple[Pair, Pair, mpmath.mpf, mpmath.mpf]:
    """``((M^-, M^+), (D^-, D^+), M, D)`` at length ``l`` (THEORY.md §5).

    ``M = S_W / (S_W + T)`` and ``D = T / (S_W + T)`` at ``B = 0``; the brackets from
    ``priors.content_bounds`` with ``E = e^{2B}``, all from the same two sums.
    """
    w, n = check_window_length(window, length)
    b = finite_param(score_bound, "score_bound")
    if b < 0:
        raise ValueError(f"score_bound must be >= 0, got {score_bound!r}")
    dps = _check_dps(dps)
    enc._warn_digits(dps)
    work = dps + GUARD_DPS
    lkw = n if enc.length_dependent else None
    s_w = enc.weight_sum(0, w, length=lkw, dps=work)
    tail = enc.weight_sum(w, n, length=lkw, dps=work)
    with mpmath.workdps(work):
        e = mpmath.exp(2 * mpmath.mpf(b))
        m_br = window_mass_bounds(s_w, tail, e)
        d_br = distant_mass_bounds(s_w, tail, e)
        m = s_w / (s_w + tail)
        d = tail / (s_w + tail)
    with mpmath.workdps(dps):
        return (+m_br[0], +m_br[1]), (+d_br[0], +d_br[1]), +m, +d


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
        Content-score bound ``B >= 0`` of THEORY.md §5.
    dps : int
        Decimal digits of every number.
    """
    if not isinstance(enc, Encoding):
        raise ValueError(f"enc must be an Encoding, got {type(enc).__name__}")
    m_br, d_br, m, d = masses(enc, window, length, score_bound=score_bound, dps=dps)
    w, n = check_window_length(window, length)
    series = None
    if enc.name == "log-distance" and enc.alpha > 0:
        from priors.brackets import window_mass_brackets

        # a mass lies in [0, 1]: clipping keeps the enclosure and makes it informative
        with mpmath.workdps(dps):
            series = {
                k: (max(lo, mpmath.mpf(0)), min(hi, mpmath.mpf(1)))
                for k, (lo, hi) in window_mass_brackets(w, n, enc.alpha, dps=dps).items()
            }
    digits = enc.mass_digits(w, n, dps)
    note = getattr(enc, "summation_note", None)
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
        limit_window_mass=enc.limit_window_mass(w, dps=dps) if enc.limit_known else None,
        classification=enc.classify(),
        dps=dps,
        digits=digits,
        summation=note() if callable(note) else None,
    )


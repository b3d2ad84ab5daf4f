"""Input checks of the margin selector (docs/theory.md §7), shared by the library and its command.

Each check raises ``MarginInputError``, a ``ValueError`` whose ``argument`` names the
offending parameter of ``select_margin``; ``python -m priors.margin`` maps that name to its
option (``growth_tol`` is ``--tol``) and prints the message in one line. The caps and the
reading of numbers given as text are those of every door (``priors.validation``: ASCII
decimals, integers parsed exactly, a decimal float64 would round refused); the certified
search reads the growth budget and the score bound as the decimals they spell
(``decimal_text``).
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import NamedTuple

from priors.validation import (
    DPS_MAX,
    MAX_SCORE_BOUND,
    SCORE_CAP_TEXT,
    as_count,
    count_from_text,
    echo,
    real_from_text,
)

__all__ = [
    "DPS_MAX",
    "DPS_MIN",
    "MAX_EVALUATIONS",
    "MarginInputError",
    "MarginInputs",
    "as_budget",
    "decimal_text",
    "validate_inputs",
]

#: Smallest working precision accepted: 10 requested significant digits, a 1e-12 bracket
#: and guard digits for the cancellation in ``G - tol`` near the crossing.
DPS_MIN = 15
#: Default budget of growth evaluations for one ``select_margin`` call (each three Hurwitz
#: sums: 0.13 ms at dps 30 on an idle core, so ~3 s at most; ~0.5 ms at dps 100, ~85 ms at
#: dps 1000). Each of 162 seeded non-monotone settings (tests) needs under 1800; only
#: ``tol`` within a tiny distance of a local maximum of ``G`` needs more
#: (``priors.margin.search``: the cost grows like ``1 / sqrt(distance)``).
MAX_EVALUATIONS = 20_000


class MarginInputError(ValueError):
    """Bad input to ``select_margin``; ``argument`` names the offending parameter."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument
        self.detail = message


class MarginInputs(NamedTuple):
    """Validated inputs of ``select_margin``; the ``*_text`` fields are exact decimals."""

    window: int
    lmin: int
    lmax: int
    growth_tol: float
    growth_tol_text: str
    score_bound: float
    score_bound_text: str
    dps: int


def decimal_text(value: object, name: str) -> tuple[float, str]:
    """A finite real as ``(float, decimal string)``; a string is read by
    ``priors.validation.real_from_text(exact=True)`` and keeps its decimal, which is then
    the float's."""
    if isinstance(value, bool):
        raise MarginInputError(name, f"must be a real number, got {value!r}")
    if isinstance(value, str):
        try:
            number = real_from_text(value, exact=True)
        except ValueError as exc:
            raise MarginInputError(name, str(exc)) from None
        text = value.strip()
    elif isinstance(value, numbers.Real):
        # a narrower float (numpy float32/float16) prints as its own shortest decimal
        # ("0.1"), not as the float64 it widens to (0.10000000149011612)
        if getattr(getattr(value, "dtype", None), "itemsize", 8) < 8:
            text = str(value)
            number = float(text)
        else:
            try:
                number = float(value)
            except OverflowError:
                raise MarginInputError(
                    name, f"{echo(value)} overflows the float range (|x| <= 1.8e308)"
                ) from None
            text = repr(number)
    else:
        raise MarginInputError(name, f"must be a real number, got {value!r}")
    if not math.isfinite(number):
        raise MarginInputError(name, f"must be finite, got {value!r}")
    return number, text


def _length(value: object, name: str) -> int:
    """A window or length as a positive integer (an integral real, or its decimal text
    read by ``priors.validation.count_from_text``)."""
    try:
        if isinstance(value, str):
            return count_from_text(value, minimum=1)
        return as_count(value, name, minimum=1)
    except ValueError as exc:
        raise MarginInputError(name, str(exc).removeprefix(f"{name} ")) from None


def as_budget(value: object) -> int:
    """``max_evaluations`` as a positive integer (an int, or its decimal text)."""
    if isinstance(value, str):
        try:
            return count_from_text(value, minimum=1)
        except ValueError as exc:
            raise MarginInputError("max_evaluations", str(exc)) from None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise MarginInputError("max_evaluations", f"must be a positive integer, got {value!r}")
    return int(value)


def validate_inputs(
    window: object,
    lmax: object,
    growth_tol: object,
    lmin: object,
    score_bound: object,
    dps: object,
) -> MarginInputs:
    """Check every input of ``select_margin`` except the budget (``as_budget``).

    ``W >= 1``, ``W < L1 < 10**dps`` (so the lengths are exact at ``dps`` digits),
    ``W <= L0 < L1`` (``L0 = W`` when ``lmin`` is ``None``), ``0 < growth_tol < 1``,
    ``0 <= B <= MAX_SCORE_BOUND`` and ``DPS_MIN <= dps <= DPS_MAX``.
    """
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral):
        raise MarginInputError("dps", f"must be an integer, got {dps!r}")
    dps = int(dps)
    if dps < DPS_MIN:
        raise MarginInputError(
            "dps",
            f"{dps} is too small to give 10 significant digits and a 1e-12 bracket "
            f"(needs >= {DPS_MIN})",
        )
    if dps > DPS_MAX:
        raise MarginInputError("dps", f"must be <= {DPS_MAX}, got {dps}")
    w = _length(window, "window")
    l1 = _length(lmax, "lmax")
    if l1 <= w:
        raise MarginInputError("lmax", f"must be > window = {w}, got {l1}")
    l0 = w if lmin is None else _length(lmin, "lmin")
    if not w <= l0 < l1:
        raise MarginInputError("lmin", f"must lie in [window, lmax) = [{w}, {l1}), got {l0}")
    if l1 >= 10**dps:
        raise MarginInputError(
            "lmax",
            f"{l1} is beyond what dps = {dps} digits represent exactly "
            f"(needs dps >= {len(str(l1))})",
        )
    tol_f, tol_text = decimal_text(growth_tol, "growth_tol")
    if not 0.0 < tol_f < 1.0:
        raise MarginInputError("growth_tol", f"must lie in (0, 1), got {tol_text}")
    if tol_f < sys.float_info.min:
        # the search certifies G <= the largest float <= tol; among subnormals that float
        # can be far below tol, leaving a band where nothing can be decided
        raise MarginInputError(
            "growth_tol",
            f"must be >= {sys.float_info.min!r} (a normal float64), got {tol_text}",
        )
    b_f, b_text = decimal_text(score_bound, "score_bound")
    if b_f < 0.0:
        raise MarginInputError("score_bound", f"must be >= 0, got {b_text}")
    if b_f > MAX_SCORE_BOUND:
        raise MarginInputError("score_bound", f"must be <= {SCORE_CAP_TEXT}, got {b_text}")
    return MarginInputs(w, l0, l1, tol_f, tol_text, b_f, b_text, dps)

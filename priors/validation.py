"""The numeric guards every door shares: the library's arguments and the commands' options.

Every library function of ``priors`` checks its arguments with these before computing,
so that bad input gets one clear line naming the argument (the command lines print it
and exit with status 2), and ``priors.cli`` parses the options' text with the same
functions, so that a value is read, capped and worded the same way through the API and
through every command:

* the caps: ``MAX_LENGTH`` (lengths, windows, distances: 1e18), ``DPS_MIN``/``DPS_MAX``
  (decimal digits: 5 to 1000), ``MAX_SCORE_BOUND`` (content-score bound: 1e6);
* ``as_count``: a nonnegative integer count (a length, a window, a summation bound),
  at most ``MAX_LENGTH``; ``check_window_length``: a window and a query length,
  ``1 <= W <= l``;
* ``check_dps``: decimal digits of an mpmath result (an integer in ``[5, 1000]``; the
  library's own guard digits go on top, through its validated internals);
* ``check_prec``: bits of relative accuracy of an Arb ball (an integer ``>= 16``);
* ``check_score_bound``: ``0 <= B <= 1e6``, a float64 as given;
* ``as_real``: a finite real number (an exponent, a shift, a position, a strength),
  returned exactly as an ``mpmath.mpf``, optionally bounded below;
* ``as_real_vector``: a one-dimensional sequence of finite reals (a bias table);
* text, as a user types it: ``decimal_from_text`` (ASCII decimal notation only: no
  underscores, no other scripts' digits, no hexadecimal), ``real_from_text`` (a finite
  float; ``1e400`` overflows, ``1e-400`` underflows; with ``exact``, a decimal that
  float64 would round is refused), ``count_from_text`` (an integer, parsed exactly) and
  ``score_bound_from_text``.

>>> as_count(1e15, "length")
1000000000000000
>>> as_real(0.5, "rho") == 0.5
True
>>> as_real(0, "shift", minimum=0)
Traceback (most recent call last):
...
ValueError: shift must be > 0, got 0
"""

from __future__ import annotations

import decimal
import math
import numbers
import re
from typing import Any

import mpmath

__all__ = [
    "DPS_MAX",
    "DPS_MIN",
    "MAX_LENGTH",
    "MAX_SCORE_BOUND",
    "SCORE_CAP_TEXT",
    "as_count",
    "as_float",
    "as_real",
    "as_real_vector",
    "check_dps",
    "check_prec",
    "check_score_bound",
    "check_window_length",
    "count_from_text",
    "decimal_from_text",
    "echo",
    "real_from_text",
    "score_bound_from_text",
]

#: Largest count ``m`` accepted (the toolkit is specified up to ``n = 1e15``; beyond
#: ``1e18`` float-valued callers could no longer express every integer).
MAX_LENGTH = 10**18
#: Fewest decimal digits a result may be asked for.
DPS_MIN = 5
#: Most decimal digits a result may be asked for (the cost of the Hurwitz sums grows
#: faster than quadratically in the digits: ``dps = 10**6`` runs out of memory).
DPS_MAX = 1000
#: Largest content-score bound ``B`` (docs/theory.md §5): beyond it ``e^{2B}`` makes every
#: bracket ``[0, 1]``; the margin search needs ``alpha`` up to ``~2B / ln W`` for it.
MAX_SCORE_BOUND = 1e6
#: ``MAX_SCORE_BOUND`` as the messages write it.
SCORE_CAP_TEXT = "1e6"
#: Longest echo of a user's value inside a message.
_ECHO = 40
#: ASCII decimal notation (``decimal.Decimal`` alone also reads ``5_12`` and non-ASCII
#: digits), and the words for infinity and NaN (refused later, by what they are).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WORDS = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def echo(value: object, limit: int = _ECHO) -> str:
    """``repr`` of a user's value, shortened to about ``limit`` characters."""
    out = repr(value)
    if len(out) > limit:
        out = f"{out[: limit - 12]}...({len(str(value))} chars)"
    return out


def _cap_text(limit: int) -> str:
    """``1e18`` for a power of ten from a million on, else the integer itself."""
    digits = str(limit)
    if limit >= 10**6 and digits.rstrip("0") == "1":
        return f"1e{len(digits) - 1}"
    return digits


def decimal_from_text(text: object) -> decimal.Decimal:
    """The exact decimal written in ``text`` (``inf`` and ``nan`` kept as such).

    ASCII decimal notation only: an optional sign, digits with an optional point, an
    optional exponent; surrounding whitespace is ignored. ``ValueError`` ("not a
    number: ...") for anything else: ``5_12``, ``٥١٢`` (Arabic-Indic digits), ``0x10``.
    """
    body = text.strip() if isinstance(text, str) else None
    if body is None or not (_DECIMAL.fullmatch(body) or _WORDS.fullmatch(body)):
        raise ValueError(f"not a number: {echo(text)}")
    return decimal.Decimal(body)


def real_from_text(text: object, *, exact: bool = False) -> float:
    """A finite float from ``text`` (``decimal_from_text``).

    ``1e400`` is refused as overflowing the float range, a nonzero value that rounds to
    0 (``1e-400``) as underflowing it. With ``exact``, a decimal that float64 does not
    represent as the decimal it prints as (``1.0000000000000000001`` is the float
    ``1.0``) is refused too: say it with at most 17 significant digits.
    """
    value = decimal_from_text(text)
    if not value.is_finite():
        raise ValueError(f"must be a finite number, got {echo(text)}")
    out = float(value)
    if math.isinf(out):
        raise ValueError(f"{echo(text)} overflows the float range (|x| <= 1.8e308)")
    if out == 0 and value != 0:
        raise ValueError(f"{echo(text)} underflows the float range (|x| >= 5e-324)")
    if exact and decimal.Decimal(repr(out)) != value:
        raise ValueError(
            f"{echo(text)} is not a float64: it would be read as {out!r}; give at most "
            "17 significant digits"
        )
    return out


def count_from_text(text: object, *, minimum: int = 0, maximum: int = MAX_LENGTH) -> int:
    """An integer from ``text``, parsed exactly (``999999999999999999``, ``1e15``; not
    ``2**0``, ``5_12``): decimal notation whose value is an integer in
    ``[minimum, maximum]``."""
    try:
        value = decimal_from_text(text)
    except ValueError:
        raise ValueError(f"must be an integer, got {echo(text)}") from None
    if not value.is_finite():
        raise ValueError(f"must be an integer, got {echo(text)}")
    if value > maximum:
        raise ValueError(f"must be <= {_cap_text(maximum)}, got {echo(text)}")
    if value < minimum:
        raise ValueError(f"must be >= {minimum}, got {echo(text)}")
    if value != value.to_integral_value():
        raise ValueError(f"must be an integer, got {echo(text)}")
    return int(value)


def as_count(
    value: object, name: str, *, minimum: int = 0, maximum: int = MAX_LENGTH
) -> int:
    """Validate a nonnegative integer count (a length or a window) named ``name``.

    Accepts Python and numpy integers and integral floats (``1e15``); raises
    ``ValueError`` naming the argument otherwise (also below ``minimum`` and above
    ``maximum``, by default ``MAX_LENGTH``).
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        out = int(value)
    elif isinstance(value, (float, mpmath.mpf)) or isinstance(value, numbers.Real):
        fv = float(value)
        if not math.isfinite(fv) or fv != math.floor(fv):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        out = int(mpmath.mpf(value)) if isinstance(value, mpmath.mpf) else int(fv)
    else:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if out < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {out}")
    if out > maximum:
        raise ValueError(f"{name} must be <= {_cap_text(maximum)}, got {out}")
    return out


def check_window_length(window: object, length: object) -> tuple[int, int]:
    """Validate ``1 <= window <= length <= 1e18`` (docs/theory.md §5 needs ``l >= W``)."""
    w = as_count(window, "window", minimum=1)
    n = as_count(length, "length", minimum=1)
    if n < w:
        raise ValueError(f"length must be >= window, got window={w}, length={n}")
    return w, n


def check_dps(dps: object) -> int:
    """Decimal digits of an mpmath result: an integer in ``[DPS_MIN, DPS_MAX]``
    (``ValueError`` otherwise)."""
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral):
        raise ValueError(f"dps must be an integer, got {echo(dps)}")
    if dps < DPS_MIN:
        raise ValueError(f"dps must be >= {DPS_MIN}, got {echo(dps)}")
    if dps > DPS_MAX:
        raise ValueError(f"dps must be <= {DPS_MAX}, got {echo(dps)}")
    return int(dps)


def score_bound_from_text(text: object) -> float:
    """``B`` from option text: ``real_from_text(exact=True)`` in ``[0, MAX_SCORE_BOUND]``
    (the wording of ``check_score_bound`` without the name)."""
    out = real_from_text(text, exact=True)
    problem = _score_bound_range(out)
    if problem:
        raise ValueError(f"{problem}, got {echo(text)}")
    return out


def _score_bound_range(value: float) -> str:
    """What is wrong with a finite ``B`` (``""`` if nothing): the one wording of the cap."""
    if value < 0:
        return "must be >= 0"
    if value > MAX_SCORE_BOUND:
        return f"must be <= {SCORE_CAP_TEXT}"
    return ""


def as_float(value: object, name: str) -> float:
    """``float(value)`` of a real ``value``; ``ValueError`` naming ``name`` where it
    overflows the float range (an integer like ``10**400``)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        raise ValueError(
            f"{name} = {echo(value)} overflows the float range (|x| <= 1.8e308)"
        ) from None


def check_score_bound(value: object, name: str = "score_bound") -> float:
    """The content-score bound ``B`` (docs/theory.md §5): a float64 (given as a float or
    an integer it holds exactly) with ``0 <= B <= MAX_SCORE_BOUND``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite real number, got {echo(value)}")
    out = as_float(value, name)
    if not math.isfinite(out):
        raise ValueError(f"{name} must be a finite real number, got {echo(value)}")
    if out != value:
        raise ValueError(
            f"{name} = {echo(value)} is not exactly a float64 (it would be read as "
            f"{out!r}); pass a float"
        )
    problem = _score_bound_range(out)
    if problem:
        raise ValueError(f"{name} {problem}, got {echo(value)}")
    return out


def as_real_vector(values: object, name: str) -> Any:
    """A nonempty one-dimensional sequence of finite reals as a float64 numpy array; a
    nested table (``[[0.0] * 16] * 2``) is refused, not flattened."""
    import numpy as np

    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of real numbers, got {echo(values)}")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be a sequence of real numbers") from exc
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (a flat sequence of numbers), got shape "
            f"{arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def check_prec(prec: object) -> int:
    """Bits of relative accuracy of an Arb ball: an integer ``>= 16`` (``ValueError``
    otherwise)."""
    if isinstance(prec, bool) or not isinstance(prec, numbers.Integral) or prec < 16:
        raise ValueError(f"prec must be an integer >= 16, got {prec!r}")
    return int(prec)


def as_real(
    value: object, name: str, *, minimum: object = None, inclusive: bool = False
) -> mpmath.mpf:
    """A finite real number named ``name``, returned as an exact ``mpf``.

    Floats, integers and ``mpf`` are taken exactly (they are dyadic rationals); other
    inputs (decimal strings, fractions) are converted at the current mpmath precision.
    With ``minimum``, the value must be ``> minimum`` (``>= minimum`` if ``inclusive``);
    the messages are ``"{name} must be a finite real number, got ..."`` and
    ``"{name} must be > {minimum}, got ..."``.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    try:
        out = mpmath.mpmathify(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a finite real number, got {value!r}") from exc
    if not isinstance(out, mpmath.mpf) or not mpmath.isfinite(out):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if minimum is not None and (out < minimum or (out == minimum and not inclusive)):
        bound = ">=" if inclusive else ">"
        raise ValueError(f"{name} must be {bound} {minimum}, got {value!r}")
    return out

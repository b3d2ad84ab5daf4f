"""Argument validators shared by the exact back ends (``ValueError`` naming the argument).

Every library function of ``priors`` checks its arguments with these before computing,
so that bad input gets one clear line naming the argument (the command lines print it
and exit with status 2):

* ``as_count``: a nonnegative integer count (a length, a window, a summation bound),
  at most ``MAX_LENGTH``; ``check_window_length``: a window and a query length,
  ``1 <= W <= l``;
* ``check_dps``: decimal digits of an mpmath result (an integer ``>= 5``);
* ``check_prec``: bits of relative accuracy of an Arb ball (an integer ``>= 16``);
* ``as_real``: a finite real number (an exponent, a shift, a position, a strength),
  returned exactly as an ``mpmath.mpf``, optionally bounded below.

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

import math
import numbers

import mpmath

__all__ = [
    "MAX_LENGTH",
    "as_count",
    "as_real",
    "check_dps",
    "check_prec",
    "check_window_length",
]

#: Largest count ``m`` accepted (the toolkit is specified up to ``n = 1e15``; beyond
#: ``1e18`` float-valued callers could no longer express every integer).
MAX_LENGTH = 10**18


def as_count(value: object, name: str, *, minimum: int = 0) -> int:
    """Validate a nonnegative integer count (a length or a window) named ``name``.

    Accepts Python and numpy integers and integral floats (``1e15``); raises
    ``ValueError`` naming the argument otherwise (also below ``minimum`` and above
    ``MAX_LENGTH``).
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
    if out > MAX_LENGTH:
        raise ValueError(f"{name} must be <= {MAX_LENGTH:.0e}, got {out}")
    return out


def check_window_length(window: object, length: object) -> tuple[int, int]:
    """Validate ``1 <= window <= length <= 1e18`` (docs/theory.md §5 needs ``l >= W``)."""
    w = as_count(window, "window", minimum=1)
    n = as_count(length, "length", minimum=1)
    if n < w:
        raise ValueError(f"length must be >= window, got window={w}, length={n}")
    return w, n


def check_dps(dps: object) -> int:
    """Decimal digits of an mpmath result: an integer ``>= 5`` (``ValueError`` otherwise)."""
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral) or int(dps) < 5:
        raise ValueError(f"dps must be an integer >= 5, got {dps!r}")
    return int(dps)


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

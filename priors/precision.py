"""Guard digits, then round: the precision idiom of the mpmath back end, written once.

A function asked for ``dps`` significant digits computes at ``dps + guard`` digits and
rounds its result back to ``dps`` (mpmath's own ``defun_wrapped`` does the same with
guard bits). ``guarded(guard)`` turns a function with a ``dps`` argument into one that
does exactly that::

    @guarded(10)
    def total_sum(self, *, dps=30):
        return mpmath.zeta(self.alpha)         # evaluated at dps + 10 digits

is the same as::

    def total_sum(self, *, dps=30):
        with mpmath.workdps(dps + 10):
            value = mpmath.zeta(self.alpha)
        with mpmath.workdps(dps):
            return +value

The body sees the raised precision as the mpmath context (``mpmath.mp.dps``) and the
requested digits as its ``dps`` argument. ``rounded(value, dps)`` is the rounding step
alone (``+value`` at ``dps`` digits, also inside tuples, lists and dicts). Arguments are
validated by the caller before the guarded part runs (at the caller's precision, so that
a decimal string is parsed the same way as before).

>>> import mpmath
>>> @guarded(10)
... def third(*, dps=15):
...     return mpmath.mpf(1) / 3, mpmath.mp.dps
>>> value, working = third(dps=20)
>>> working, value == mpmath.mpf(1) / 3        # computed at 30 digits, rounded to 20
(30, False)
>>> with mpmath.workdps(20):
...     value == mpmath.mpf(1) / 3
True
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import mpmath

__all__ = ["guarded", "rounded"]

F = TypeVar("F", bound=Callable[..., Any])


def _round(value: Any) -> Any:
    if isinstance(value, (mpmath.mpf, mpmath.mpc)):
        return +value
    if isinstance(value, tuple):
        return tuple(_round(v) for v in value)
    if isinstance(value, list):
        return [_round(v) for v in value]
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    return value


def rounded(value: Any, dps: int) -> Any:
    """``+value`` at ``dps`` digits: an ``mpf``/``mpc`` rounded to the precision, the
    entries of a tuple, list or dict likewise; anything else unchanged."""
    with mpmath.workdps(dps):
        return _round(value)


def guarded(guard: int | Callable[..., int]) -> Callable[[F], F]:
    """Decorator: run the function at ``dps + guard`` digits, return it rounded to ``dps``.

    ``dps`` is the function's argument of that name (keyword or positional, its default
    when omitted). ``guard`` is a number of digits, or a callable receiving the same
    arguments as the function (``guard(self, ...)``) for a guard that depends on the
    parameters.
    """

    def decorate(fn: F) -> F:
        params = inspect.signature(fn).parameters
        if "dps" not in params:
            raise TypeError(f"{fn.__qualname__} has no dps argument to guard")
        position = list(params).index("dps")
        default = params["dps"].default
        kind = params["dps"].kind
        by_position = kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if "dps" in kwargs:
                dps = kwargs["dps"]
            elif by_position and len(args) > position:
                dps = args[position]
            elif default is not inspect.Parameter.empty:
                dps = default
            else:
                raise TypeError(f"{fn.__qualname__}() missing the argument 'dps'")
            extra = guard(*args, **kwargs) if callable(guard) else guard
            with mpmath.workdps(dps + extra):
                value = fn(*args, **kwargs)
            return rounded(value, dps)

        return wrapper  # type: ignore[return-value]

    return decorate

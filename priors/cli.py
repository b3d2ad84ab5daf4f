"""What every command line of the project shares: parsing, one-line errors, safe output.

The contract (README, "Bad input"): bad input gives exactly one line on stderr,
``PROG: error: MESSAGE``, exit status 2 and nothing on stdout; a reader that goes away
(``| head``) ends the command quietly with status 0; a full disk (``> /dev/full``) is one
line, ``PROG: error: cannot write the output: ...``, and status 1; Ctrl-C is status 130.

* ``Parser``: ``argparse`` whose errors raise ``UsageError`` (no usage block), and which
  reads ``-inf``, ``-1e5`` or ``-nan`` after an option as a value, not as an option.
* ``real``, ``count``, ``digits_option``: option types with the wording shared by every
  command (``1e400`` overflows the float range, ``1e-400`` underflows it, integers are
  parsed exactly, long inputs are echoed truncated).
* ``run(prog, body, argv)``: calls ``body(argv)`` and turns the exceptions above into the
  contract; ``emit(text)`` writes stdout so that a closed pipe or a full disk is caught.
* ``progress(prog, message)``: a line on stderr that never raises.

Imports only the standard library (the margin command must stay light).
"""

from __future__ import annotations

import argparse
import decimal
import errno
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

__all__ = [
    "MAX_COUNT",
    "OutputError",
    "Parser",
    "UsageError",
    "argtype",
    "check_writable_dir",
    "count",
    "echo",
    "emit",
    "exact_real",
    "progress",
    "read_text",
    "real",
    "run",
]

#: Largest count accepted by ``count`` (lengths and windows, docs/theory.md §5: up to 1e18).
MAX_COUNT = 10**18
#: Longest echo of a user's value inside a message.
_ECHO = 40
_NUMBER = re.compile(r"^-(\d|\.\d|inf(inity)?$|nan$)", re.IGNORECASE)


class UsageError(Exception):
    """Bad command-line input: one line on stderr, exit status 2."""


class OutputError(Exception):
    """Writing the output failed for a reason other than a closed pipe (e.g. a full disk)."""


class _NegativeNumbers:
    """Stands in for argparse's negative-number matcher: ``-inf``, ``-1e5``, ``-.5`` and
    ``-nan`` are values (argparse's own pattern only knows ``-5`` and ``-.5``)."""

    def match(self, text: str) -> bool:
        return bool(_NUMBER.match(text))


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` for the contract: errors raise ``UsageError``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NegativeNumbers()  # type: ignore[assignment]

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        group = super().add_argument_group(*args, **kwargs)
        group._negative_number_matcher = self._negative_number_matcher
        return group

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise UsageError(message)

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            if file is None or file is sys.stdout:
                emit(message, end="")
            else:
                _write_quietly(file, message)


def argtype(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type=`` from a parser of this module: its ``ValueError`` message
    becomes argparse's (``argument --x: MESSAGE``)."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def echo(text: object, limit: int = _ECHO) -> str:
    """``repr`` of a user's value, shortened to about ``limit`` characters."""
    out = repr(text)
    if len(out) > limit:
        out = f"{out[: limit - 12]}...({len(str(text))} chars)"
    return out


def exact_real(text: str) -> decimal.Decimal:
    """The decimal ``text`` exactly (``inf``/``nan`` kept); ``ValueError`` if not a number."""
    body = text.strip()
    try:
        return decimal.Decimal(body)
    except decimal.InvalidOperation:
        raise ValueError(f"not a number: {echo(text)}") from None


def real(text: str, *, exact: bool = False) -> float:
    """A finite float from ``text``: the option type of every real-valued option.

    ``1e400`` is refused as overflowing the float range, a nonzero value that rounds to
    0 (``1e-400``) as underflowing it. With ``exact``, a decimal that float64 does not
    represent as the decimal it prints as (``1.0000000000000000001`` is the float
    ``1.0``) is refused too: say it with at most 17 significant digits.
    """
    value = exact_real(text)
    if value.is_nan():
        raise ValueError(f"must be a finite number, got {echo(text)}")
    if value.is_infinite():
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


def count(text: str, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """An integer from ``text``, parsed exactly (``999999999999999999``, ``1e15``, ``2**0``
    no): decimal notation whose value is an integer in ``[minimum, maximum]``."""
    try:
        value = exact_real(text)
    except ValueError:
        raise ValueError(f"not an integer: {echo(text)}") from None
    if not value.is_finite():
        raise ValueError(f"not an integer: {echo(text)}")
    if value > maximum:
        raise ValueError(f"must be <= {maximum:.0e}, got {echo(text)}".replace("e+", "e"))
    if value < minimum:
        raise ValueError(f"must be >= {minimum}, got {echo(text)}")
    if value != value.to_integral_value():
        raise ValueError(f"not an integer: {echo(text)}")
    return int(value)


def read_text(path: str, option: str, *, limit: int = 1 << 24) -> str:
    """The UTF-8 text of the file ``path`` given to ``option``, at most ``limit`` bytes
    (``/dev/zero`` is refused, not read until memory runs out)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"{option}: cannot read {echo(path)}: {exc.strerror}") from None
    if len(data) > limit:
        raise ValueError(f"{option}: {echo(path)} is larger than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{option}: {echo(path)} is not a UTF-8 text file") from None


def check_writable_dir(path: str, option: str) -> None:
    """``UsageError`` unless a file can be created in the directory ``path`` (probed by
    creating and removing an empty temporary file: permissions alone miss read-only
    mounts and root)."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
    except OSError as exc:
        raise UsageError(f"{option}: cannot write in {echo(path)}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(probe)


def _write_quietly(stream: Any, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def progress(prog: str, message: str) -> None:
    """``[prog] message`` on stderr, flushed; never raises (stderr may be closed)."""
    _write_quietly(sys.stderr, f"[{prog}] {message}\n")


class _PipeClosed(Exception):
    pass


def _silence_stdout() -> None:
    # nothing more can reach the reader; keep the interpreter's final flush quiet
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def emit(text: str, *, end: str = "\n") -> None:
    """Write ``text`` to stdout and flush: ``_PipeClosed`` when the reader went away,
    ``OutputError`` when the write failed otherwise (full disk)."""
    try:
        sys.stdout.write(text + end)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise _PipeClosed from None
    except OSError as exc:
        _silence_stdout()
        reason = exc.strerror or os.strerror(exc.errno or errno.EIO)
        raise OutputError(f"cannot write the output: {reason}") from None


def one_line(message: object, limit: int = 400) -> str:
    """``message`` on one line (whitespace collapsed), at most ``limit`` characters."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run(
    prog: str,
    body: Callable[[Sequence[str] | None], int],
    argv: Sequence[str] | None = None,
    *,
    bad_input: tuple[type[BaseException], ...] = (UsageError,),
) -> int:
    """``body(argv)`` under the contract of the module docstring; returns the exit status.

    ``bad_input``: the exception types that mean bad input (exit 2); ``UsageError`` always.
    """
    kinds = (UsageError, *bad_input)
    try:
        return body(argv)
    except kinds as exc:
        _write_quietly(sys.stderr, f"{prog}: error: {one_line(exc)}\n")
        return 2
    except _PipeClosed:
        return 0
    except OutputError as exc:
        _write_quietly(sys.stderr, f"{prog}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        _write_quietly(sys.stderr, f"{prog}: interrupted\n")
        return 130
    except SystemExit as exc:  # --help, --version
        code = exc.code
        return code if isinstance(code, int) else 0 if code is None else 2

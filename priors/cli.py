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

Files, for commands and library writers alike (a refusal is ``PathError``, a ``ValueError``
whose message starts with the argument's name; ``run`` reports it as bad input, exit 2):

* ``check_output_file(path, name, suffixes=...)``, before any work: the output must be
  a regular file or not exist yet, in an existing writable directory, with a suffix the
  writer can produce. Refused: an empty path; a directory, device (``/dev/null``,
  ``/dev/full``), FIFO or socket; a dangling symbolic link; a missing or read-only
  directory. A symbolic link to a regular file is followed: the file it points to is the
  output (replaced in its own directory), the link stays as it is.
* ``atomic_output(path, name)``: a temporary file beside the output, with the output's
  suffix, for the caller to write; when the block ends it is flushed to disk
  (``fsync``) and renamed over the output, which is checked once more to be a regular
  file (or absent). On an exception it is removed and the output is untouched.
  ``write_atomic(path, data, name)`` writes text or bytes that way.
* ``check_output_dir(path, name)``: an output directory, existing or to be created under
  an existing writable directory (a file, device or dangling link there is refused).
* ``read_json_file(path, name, limit=..., shape=...)``: a previous results file, ``None``
  if there is none; refused by name if it is not a regular file, larger than ``limit``
  bytes, not UTF-8 JSON, or not of the expected ``shape`` (``Record``, ``MapOf``,
  ``ListOf`` and JSON types, checked by ``check_shape``), so that a file this writer did
  not make is never silently replaced. ``read_text`` reads an input file the same way
  (regular files only, at most ``limit`` bytes).

Imports only the standard library (the margin command must stay light).
"""

from __future__ import annotations

import argparse
import contextlib
import decimal
import errno
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "MAX_COUNT",
    "ListOf",
    "MapOf",
    "OutputError",
    "Parser",
    "PathError",
    "Record",
    "UsageError",
    "argtype",
    "atomic_output",
    "check_output_dir",
    "check_output_file",
    "check_shape",
    "check_writable_dir",
    "count",
    "echo",
    "emit",
    "exact_real",
    "progress",
    "read_json_file",
    "read_text",
    "real",
    "run",
    "write_atomic",
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


class PathError(ValueError):
    """A path the file policy refuses (module docstring); the message starts with the
    argument's name (``--out: ...``, ``path: ...``). Commands report it as bad input."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.argument = name


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


# --------------------------------------------------------------------------- files

#: What a file is, by its ``stat`` mode, for the messages.
_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "an unknown kind of file"


def _shown(path: str, limit: int = 200) -> str:
    """``repr`` of a path for a message; a long one keeps its end (the file's name)."""
    out = repr(path)
    return out if len(out) <= limit else f"'...{path[-(limit - 5):]}'"


def _path_text(path: object, name: str) -> str:
    """``path`` as a nonempty ``str`` (``os.PathLike`` accepted), else ``PathError``."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise PathError(name, f"must be a path (str or os.PathLike), got {type(path).__name__}")
    if not path.strip():
        raise PathError(name, f"empty path {echo(path)}")
    if "\x00" in path:
        raise PathError(name, f"{echo(path)} contains a NUL character")
    return path


def _existing(text: str, name: str) -> os.stat_result | None:
    """``stat`` of ``text`` following links; ``None`` if nothing is there. A dangling
    symbolic link, a link loop or an unreachable path is refused."""
    try:
        return os.stat(text)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise PathError(name, f"cannot inspect {_shown(text)}: {exc.strerror}") from None
    if os.path.islink(text):
        try:
            target = os.readlink(text)
        except OSError:  # pragma: no cover - removed in between
            target = "?"
        raise PathError(
            name, f"{_shown(text)} is a dangling symbolic link (to {_shown(target)}); remove it "
            "or name another file"
        )
    return None


def _replaceable(text: str, name: str) -> str | None:
    """The path whose regular file the output replaces (a link's resolved target), or
    ``None`` if the output does not exist yet; ``PathError`` for anything else."""
    st = _existing(text, name)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):
        link = "a symbolic link to " if os.path.islink(text) else ""
        raise PathError(name, f"{_shown(text)} is {link}{_kind(st.st_mode)}, not a regular file")
    return os.path.realpath(text)


def _check_directory(directory: str, name: str) -> None:
    """``PathError`` unless a file can be created in ``directory`` (probed by creating and
    removing an empty file: permissions alone miss read-only mounts, and root)."""
    try:
        st = os.stat(directory)
    except (FileNotFoundError, NotADirectoryError):
        raise PathError(name, f"directory {_shown(directory)} does not exist") from None
    except OSError as exc:
        reason = exc.strerror
        raise PathError(name, f"cannot reach directory {_shown(directory)}: {reason}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise PathError(name, f"{_shown(directory)} is {_kind(st.st_mode)}, not a directory")
    probe = os.path.join(directory, f".probe-{os.urandom(6).hex()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        raise PathError(name, f"cannot write in {_shown(directory)}: {exc.strerror}") from None
    os.unlink(probe)


def _suffixes(allowed: Sequence[str]) -> tuple[str, ...]:
    return tuple(s.lower() if s.startswith(".") else f".{s.lower()}" for s in allowed)


def check_output_file(path: object, name: str, *, suffixes: Sequence[str] = ()) -> Path:
    """The output file ``path`` (argument ``name``) checked before any work; ``PathError``
    naming ``name`` if the policy of the module docstring refuses it.

    ``suffixes``: the file endings the writer can produce (``(".png", ".pdf")``; case is
    ignored); empty for any. Returns ``Path(path)``.
    """
    text = _path_text(path, name)
    target = _replaceable(text, name)
    allowed = _suffixes(suffixes)
    if allowed and Path(text).suffix.lower() not in allowed:
        raise PathError(
            name, f"cannot write {_shown(text)}: the name must end in {' or '.join(allowed)}"
        )
    _check_directory(os.path.dirname(target or os.path.abspath(text)), name)
    if target is not None and not os.access(target, os.W_OK):
        raise PathError(name, f"{_shown(text)} is read-only")
    return Path(text)


def check_output_dir(path: object, name: str) -> Path:
    """An output directory ``path`` (argument ``name``), before any work: an existing
    writable directory (a link to one is followed), or a path whose nearest existing
    ancestor is one (the writer creates the rest). ``PathError`` otherwise."""
    text = _path_text(path, name)
    st = _existing(text, name)
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            raise PathError(name, f"{_shown(text)} is {_kind(st.st_mode)}, not a directory")
        _check_directory(text, name)
        return Path(text)
    ancestor = os.path.dirname(os.path.abspath(text))
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    _check_directory(ancestor, name)
    return Path(text)


@contextlib.contextmanager
def atomic_output(path: object, name: str, *, suffixes: Sequence[str] = ()) -> Iterator[Path]:
    """Write the output ``path`` atomically: yields a temporary file beside it (same
    directory, same suffix, created empty with the default permissions) for the caller
    to write by name.

    When the block ends, the temporary file is flushed to disk and renamed over the output
    (a symbolic link's target; the replaced file's permission bits are kept), after
    ``check_output_file`` once more: only a regular file is ever replaced. If the block
    raises, or the output became something else meanwhile (``PathError``), the temporary
    file is removed and the output is left as it was.
    """
    check_output_file(path, name, suffixes=suffixes)
    text = _path_text(path, name)
    target = _replaceable(text, name) or os.path.abspath(text)
    directory, base = os.path.split(target)
    suffix = Path(base).suffix
    while True:
        tmp = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp{suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:  # pragma: no cover - a 48-bit name collision
            continue
    try:
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        current = _replaceable(text, name)  # the output may have changed since the check
        if current is not None:
            os.chmod(tmp, stat.S_IMODE(os.stat(current).st_mode))
        os.replace(tmp, current or target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself reaches the disk
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_atomic(
    path: object, data: str | bytes, name: str, *, suffixes: Sequence[str] = ()
) -> None:
    """Write ``data`` (``str`` as UTF-8) to the output ``path`` with ``atomic_output``."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_output(path, name, suffixes=suffixes) as tmp, open(tmp, "wb") as fh:
        fh.write(raw)


def _read_regular(text: str, name: str, limit: int) -> bytes | None:
    """At most ``limit`` bytes of the regular file ``text``; ``None`` if it does not
    exist. Devices (``/dev/zero``), FIFOs (which would block), directories and dangling
    links are refused before they are opened for reading."""
    st = _existing(text, name)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise PathError(name, f"{_shown(text)} is {_kind(st.st_mode)}, not a regular file")
    try:
        fd = os.open(text, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise PathError(name, f"cannot read {_shown(text)}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the check
            raise PathError(name, f"{_shown(text)} is not a regular file")
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise PathError(name, f"cannot read {_shown(text)}: {exc.strerror}") from None
    if len(data) > limit:
        raise PathError(name, f"{_shown(text)} is larger than {limit} bytes")
    return data


def read_text(path: str, option: str, *, limit: int = 1 << 24) -> str:
    """The UTF-8 text of the input file ``path`` given to ``option``, at most ``limit``
    bytes; a missing file, a device (``/dev/zero``), a FIFO or a directory is refused
    (``PathError``, a ``ValueError``) before anything is read."""
    text = _path_text(path, option)
    data = _read_regular(text, option, limit)
    if data is None:
        raise PathError(option, f"cannot read {_shown(text)}: No such file or directory")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PathError(option, f"{_shown(text)} is not a UTF-8 text file") from None


# ---------------------------------------------------------------- JSON document shapes


@dataclass(frozen=True)
class Record:
    """A JSON object with the keys ``required`` (each of its shape), optionally the keys
    ``optional``, and any other keys (unchecked) unless ``closed``."""

    required: Mapping[str, Any] = field(default_factory=dict)
    optional: Mapping[str, Any] = field(default_factory=dict)
    closed: bool = False


@dataclass(frozen=True)
class MapOf:
    """A JSON object whose every value has the shape ``values``."""

    values: Any


@dataclass(frozen=True)
class ListOf:
    """A JSON array whose every item has the shape ``items``."""

    items: Any


_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer",
               float: "a number", bool: "true or false", type(None): "null"}


def _describe(shape: Any) -> str:
    if isinstance(shape, (Record, MapOf)):
        return "an object"
    if isinstance(shape, ListOf):
        return "an array"
    kinds = shape if isinstance(shape, tuple) else (shape,)
    return " or ".join(_JSON_NAMES.get(k, k.__name__) for k in kinds)


def _matches_type(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int) and float in kinds:
        return True
    return isinstance(value, kinds)


def check_shape(value: Any, shape: Any, where: str = "the document") -> None:
    """``ValueError`` saying where ``value`` (parsed JSON) departs from ``shape``.

    ``shape`` is a JSON type (``dict``, ``list``, ``str``, ``int``, ``float`` (an integer
    is a number too), ``bool``, ``type(None)``), a tuple of them, ``Any`` for anything,
    or a ``Record``, ``MapOf`` or ``ListOf``.
    """
    if shape is Any:
        return
    if isinstance(shape, (Record, MapOf)):
        if not isinstance(value, dict):
            raise ValueError(f"{where} must be an object, got {_describe(type(value))}")
        if isinstance(shape, MapOf):
            for key, item in value.items():
                check_shape(item, shape.values, f"{where}[{key!r}]")
            return
        for key, sub in shape.required.items():
            if key not in value:
                raise ValueError(f"{where} has no key {key!r}")
            check_shape(value[key], sub, f"{where}[{key!r}]")
        for key, sub in shape.optional.items():
            if key in value:
                check_shape(value[key], sub, f"{where}[{key!r}]")
        if shape.closed:
            extra = sorted(set(value) - set(shape.required) - set(shape.optional))
            if extra:
                raise ValueError(f"{where} has an unexpected key {extra[0]!r}")
        return
    if isinstance(shape, ListOf):
        if not isinstance(value, list):
            raise ValueError(f"{where} must be an array, got {_describe(type(value))}")
        for i, item in enumerate(value):
            check_shape(item, shape.items, f"{where}[{i}]")
        return
    kinds = shape if isinstance(shape, tuple) else (shape,)
    if not _matches_type(value, kinds):
        raise ValueError(f"{where} must be {_describe(shape)}, got {_describe(type(value))}")


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not JSON")


def read_json_file(
    path: object, name: str, *, limit: int = 1 << 24, shape: Any = Any
) -> Any:
    """The JSON document in the file ``path`` (argument ``name``), or ``None`` if there is
    no file. ``PathError`` naming ``name`` if it is not a regular file, is larger than
    ``limit`` bytes, is not UTF-8 JSON (``NaN`` and ``Infinity`` are not JSON), or does not
    have the shape ``shape`` (``check_shape``): a file the caller did not make is refused,
    never read as empty and replaced."""
    text = _path_text(path, name)
    data = _read_regular(text, name, limit)
    if data is None:
        return None
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise PathError(name, f"{_shown(text)} is not UTF-8 text, so not a JSON file") from None
    except (ValueError, RecursionError) as exc:
        raise PathError(name, f"{_shown(text)} is not a JSON file: {one_line(exc, 120)}") from None
    try:
        check_shape(doc, shape)
    except (ValueError, RecursionError) as exc:
        raise PathError(name, f"{_shown(text)} is not a file of the expected form: "
                              f"{one_line(exc, 200)}") from None
    return doc


def check_writable_dir(path: str, option: str) -> None:
    """``UsageError`` unless a file can be created in the directory ``path``."""
    try:
        _check_directory(path, option)
    except PathError as exc:
        raise UsageError(str(exc)) from None


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

    ``bad_input``: the exception types that mean bad input (exit 2); ``UsageError`` and
    ``PathError`` always.
    """
    kinds = (UsageError, PathError, *bad_input)
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

"""Helpers the test modules share (not tests): a wall-clock alarm, the state of a path that
a refusal must leave alone, and one option of an argument list replaced.

Imported as ``support``: ``tests/conftest.py`` puts this folder on ``sys.path`` (pytest's
default import mode inserts a conftest's folder), for ``tests/priors`` as for ``tests``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def alarm(seconds: int, what: str = "a hang") -> Iterator[None]:
    """``TimeoutError`` if the block runs longer than ``seconds`` (SIGALRM, main thread)."""

    def fail(signum: int, frame: Any) -> None:
        raise TimeoutError(f"ran longer than {seconds} s ({what})")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def snapshot(path: str | os.PathLike[str]) -> tuple[Any, ...] | None:
    """What a refusal must leave alone: the entry's inode, kind, link target and (for a
    regular file) bytes; ``None`` if nothing is there. Links are not followed."""
    if not os.path.lexists(path):
        return None
    st = os.lstat(path)
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    data = Path(path).read_bytes() if stat.S_ISREG(st.st_mode) else None
    return st.st_ino, stat.S_IFMT(st.st_mode), link, data


def with_option(argv: list[str], option: str, value: str) -> list[str]:
    """``argv`` with ``option`` set to ``value`` (replaced where present, else appended)."""
    out = list(argv)
    if option in out:
        out[out.index(option) + 1] = value
    else:
        out += [option, value]
    return out

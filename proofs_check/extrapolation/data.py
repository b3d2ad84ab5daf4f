"""The offline byte corpus: the running Python's standard-library ``.py`` sources.

Corpus
    Every ``*.py`` file under ``sysconfig.get_paths()["stdlib"]``, walked in sorted order,
    skipping ``site-packages``, ``dist-packages`` and ``__pycache__`` (third-party code
    is not the same on every machine). Each file's raw bytes are one document; documents
    are joined with a single ``0x00`` byte (which never occurs in these sources), so the
    model sees byte values ``0..255`` and no tokenizer is involved.

Split (deterministic, by file, not by position)
    A file is held out when the first 8 hex digits of
    ``sha256(relative posix path)`` read as an integer, modulo 1000, fall below
    ``1000 * heldout_fraction`` (default 5%). The split therefore does not depend on
    the walk order, the file sizes or any random state, and a file is never split across
    train and held-out.

Portability
    The corpus is whatever the running interpreter ships: CPython 3.11.7 here gives 1790
    files, about 31.5 MB. Another Python version has slightly different files and so a
    slightly different corpus and split; :func:`corpus_fingerprint` (a hash of the file
    list and sizes) is recorded in every results file so that runs on different
    interpreters can be told apart.

Held-out windows (:func:`window_ends`)
    A window is the position ``e`` of its last target in the held-out stream; at context
    length ``L`` the model reads ``stream[e - L : e]`` and is scored on the last
    ``score_bytes`` next-byte predictions, whose targets ``stream[e - score_bytes + 1 :
    e + 1]`` are the same at every length. The ends are spread over the held-out files:
    the ``count`` windows go to ``count`` files evenly spaced in the file list (several
    per file, evenly within it, only when there are fewer files than windows), each
    window's targets lying inside its file. Every window records its file, so that
    uncertainties can be resampled by file.

Cache
    The two byte streams are cached as ``.bin`` files under ``cache_dir`` (default
    ``$XDG_CACHE_HOME/causal-ot-priors/extrapolation`` or
    ``~/.cache/causal-ot-priors/extrapolation``), never inside the repository, keyed by
    the fingerprint and the held-out fraction. The cache is written atomically.
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "Corpus",
    "corpus_files",
    "corpus_fingerprint",
    "default_cache_dir",
    "is_heldout",
    "load_corpus",
    "window_ends",
]

SEPARATOR = b"\x00"
_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/causal-ot-priors/extrapolation`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "causal-ot-priors" / "extrapolation"


def corpus_files(root: str | os.PathLike[str] | None = None) -> list[tuple[str, Path]]:
    """``(relative posix path, absolute path)`` of every ``.py`` file, sorted by the path."""
    base = Path(root if root is not None else sysconfig.get_paths()["stdlib"])
    if not base.is_dir():
        raise ValueError(f"root must be a directory, got {str(base)!r}")
    out: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = Path(dirpath) / name
                out.append((path.relative_to(base).as_posix(), path))
    out.sort(key=lambda t: t[0])
    return out


def is_heldout(relpath: str, heldout_fraction: float) -> bool:
    """The file-level split rule of the module docstring (sha256 of the relative path)."""
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction!r}")
    h = int(hashlib.sha256(relpath.encode("utf-8")).hexdigest()[:8], 16)
    return h % 1000 < round(1000 * heldout_fraction)


def corpus_fingerprint(files: list[tuple[str, Path]]) -> str:
    """16 hex digits of sha256 over the relative paths and sizes (identifies the corpus)."""
    h = hashlib.sha256()
    for rel, path in files:
        h.update(rel.encode("utf-8"))
        h.update(str(path.stat().st_size).encode("ascii"))
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Corpus:
    """Train and held-out byte streams (``uint8`` arrays) and where they came from.

    ``heldout_spans``: ``(start, end)`` of each held-out file in the held-out stream, in
    stream order (files joined by one separator byte)."""

    train: np.ndarray
    heldout: np.ndarray
    n_files_train: int
    n_files_heldout: int
    fingerprint: str
    python: str
    root: str
    heldout_spans: tuple[tuple[int, int], ...] = ()
    stdlib: bool = True

    def describe(self) -> dict[str, object]:
        """JSON-friendly summary for the results file."""
        return {
            "source": ("standard-library .py files of the running Python (sysconfig stdlib)"
                       if self.stdlib else ".py files under root (--corpus-root)"),
            "root": self.root,
            "python": self.python,
            "fingerprint": self.fingerprint,
            "split": "by file: sha256(relative path)[:8] mod 1000 < 1000 * heldout_fraction",
            "train_bytes": int(self.train.size),
            "heldout_bytes": int(self.heldout.size),
            "train_files": self.n_files_train,
            "heldout_files": self.n_files_heldout,
        }


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_corpus(
    *,
    heldout_fraction: float = 0.05,
    cache_dir: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Corpus:
    """Build (or read from the cache) the split byte streams of the module docstring."""
    files = corpus_files(root)
    if not files:
        raise ValueError("root holds no .py files")
    is_heldout("x", heldout_fraction)  # validates the fraction
    fp = corpus_fingerprint(files)
    held = [is_heldout(rel, heldout_fraction) for rel, _ in files]
    n_held = sum(held)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    tag = f"{fp}-h{round(1000 * heldout_fraction):03d}"
    train_path, held_path = cache / f"train-{tag}.bin", cache / f"heldout-{tag}.bin"
    if train_path.is_file() and held_path.is_file():
        train = np.fromfile(train_path, dtype=np.uint8)
        heldout = np.fromfile(held_path, dtype=np.uint8)
    else:
        parts: dict[bool, list[bytes]] = {False: [], True: []}
        for (_, path), h in zip(files, held, strict=True):
            parts[h].append(path.read_bytes())
        tr, he = SEPARATOR.join(parts[False]), SEPARATOR.join(parts[True])
        _atomic_write(held_path, he)
        _atomic_write(train_path, tr)
        train, heldout = np.frombuffer(tr, np.uint8), np.frombuffer(he, np.uint8)
    spans, pos = [], 0
    for (_, path), h in zip(files, held, strict=True):
        if h:
            size = path.stat().st_size
            spans.append((pos, pos + size))
            pos += size + len(SEPARATOR)
    if spans and spans[-1][1] != heldout.size:
        raise ValueError("the held-out cache does not match the file sizes; remove the cache")
    return Corpus(
        train=train,
        heldout=heldout,
        n_files_train=len(files) - n_held,
        n_files_heldout=n_held,
        fingerprint=fp,
        python=sys.version.split()[0],
        root=str(Path(root) if root is not None else sysconfig.get_paths()["stdlib"]),
        heldout_spans=tuple(spans),
        stdlib=root is None,
    )


def window_ends(
    spans: tuple[tuple[int, int], ...] | list[tuple[int, int]],
    count: int,
    *,
    max_context: int,
    score_bytes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``(ends, files)``: ``count`` window ends (int64 positions of the last target in the
    held-out stream) and the index of the file in ``spans`` that holds each window's
    targets (module docstring). A file is eligible when it holds ``score_bytes + 1``
    bytes and its last byte lies at least ``max_context`` bytes into the stream (so that
    every length up to ``max_context`` has its context)."""
    if count < 1 or score_bytes < 1 or max_context < score_bytes:
        raise ValueError(f"need count >= 1 and max_context >= score_bytes >= 1, got "
                         f"{count}, {max_context}, {score_bytes}")
    eligible = [k for k, (a, b) in enumerate(spans)
                if b - a >= score_bytes + 1 and b - 1 >= max_context]
    if not eligible:
        raise ValueError(f"no held-out file has {score_bytes + 1} bytes beyond the first "
                         f"{max_context} bytes of the held-out stream")
    m = len(eligible)
    per_file = np.bincount(np.floor((np.arange(count) + 0.5) * m / count).astype(int)
                           if count <= m else np.arange(count) % m, minlength=m)
    ends, files = [], []
    for k, n_k in zip(eligible, per_file.tolist(), strict=True):
        a, b = spans[k]
        lo = max(a + score_bytes, max_context)  # smallest end: targets inside the file
        for j in range(n_k):  # evenly inside [lo, b - 1]
            ends.append(lo + (j + 1) * (b - 1 - lo) // (n_k + 1))
            files.append(k)
    order = np.argsort(ends, kind="stable")
    return np.asarray(ends, dtype=np.int64)[order], np.asarray(files, dtype=np.int64)[order]

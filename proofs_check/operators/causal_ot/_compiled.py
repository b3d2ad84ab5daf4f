"""The compiled CPU kernel of the causal OT operator: build and load, forward, backward, stream row.

The C++ sources in ``csrc/`` (shipped with the package; their comments describe the algorithm)
are JIT-built by ``torch.utils.cpp_extension.load`` on first use, into torch's extension cache
(``$TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``; never inside the repository),
and loaded from there by later processes. A build at install time would need torch inside
pip's build isolation; the JIT build needs only a C++ compiler and ``ninja``. Where the build
fails, the operator uses the pure-torch solver (``_newton``) after one
:class:`CompiledFallbackWarning`.

The functions here are thin: contiguous inputs in, the kernel's outputs back with named
statistics (:class:`ForwardStats`, :class:`RowStats`).
"""

from __future__ import annotations

import hashlib
import platform
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Literal

import torch

from ._common import SliceStats

__all__ = [
    "DEFAULT_OPTIONS",
    "CompiledFallbackWarning",
    "ForwardStats",
    "KernelOptions",
    "RowStats",
    "backward",
    "forward",
    "load_extension",
    "stream_row",
    "usable",
]

_CSRC = Path(__file__).with_name("csrc")
_SOURCES = [_CSRC / "bindings.cpp"]  # the one translation unit; it includes csrc/*.h
_EXT_NAME = "proofs_check_causal_ot_cpu_v3"
_state: dict[str, object] = {}


@dataclass(frozen=True)
class KernelOptions:
    """Tuning of the compiled kernel, passed to it as one struct (``csrc/options.h``).

    The defaults are what the operator uses; the other values select the paths that tests
    compare and the team's rules that they pin.

    Attributes
    ----------
    series : bool
        Rows of 256 keys and more (640 in a team) may take the series solve (``csrc/series.h``:
        the far keys' roots as a power series, no joint Newton loop); False: every row takes
        the joint Newton loop. Both are live algorithms (short rows always take the loop);
        tests compare the two.
    stream_stores : ``"auto"``, ``"always"`` or ``"never"``
        Whether the output is written by streaming (non-temporal) stores: ``"auto"`` from
        16 MiB of output on, where the output outgrows the cache. Tests compare both paths on
        small outputs.
    poison_output : bool
        Fill the output with NaN before solving, so that an entry the kernel fails to write
        shows (its output buffer is otherwise uninitialised). For checks only.
    team_from : int or None
        The first row a team of two workers shares (at least 256); None: chosen from the
        measured cost of one exchange between the workers (``csrc/team.h``).
    exchange_ns : float or None
        The exchange cost (ns) to choose the first shared row by, instead of the measured one.
    team_give_up : float or None
        The share of a 64-row window the two workers may spend waiting before the team
        dissolves (two such windows in a row); None: 0.85 for rows shorter than 1024, 0.7
        from there; below 0: the team dissolves at its first check.
    zero_ahead : int or None
        The most rows worker 1 zeroes ahead (above the diagonal) while worker 0 solves the
        short rows alone; None: as many as it gets to.
    """

    series: bool = True
    stream_stores: Literal["auto", "always", "never"] = "auto"
    poison_output: bool = False
    team_from: int | None = None
    exchange_ns: float | None = None
    team_give_up: float | None = None
    zero_ahead: int | None = None


DEFAULT_OPTIONS = KernelOptions()
_STREAM_STORES = {"auto": -1, "never": 0, "always": 1}


def _kernel_options(mod: ModuleType, options: KernelOptions) -> object:
    """The C++ struct of ``options`` (ValueError naming a field it refuses)."""
    if options.stream_stores not in _STREAM_STORES:
        raise ValueError(f"stream_stores must be one of {tuple(_STREAM_STORES)}, got "
                         f"{options.stream_stores!r}")
    return mod.KernelOptions(
        series=bool(options.series), stream_stores=_STREAM_STORES[options.stream_stores],
        poison_output=bool(options.poison_output), team_from=options.team_from,
        exchange_ns=options.exchange_ns, team_give_up=options.team_give_up,
        zero_ahead=options.zero_ahead)


class CompiledFallbackWarning(UserWarning):
    """The compiled causal OT kernel could not be built; the pure-torch solver is used."""


def load_extension() -> ModuleType | None:
    """The compiled module, building it on first use; None (after one warning) if unavailable."""
    if "module" in _state:
        return _state["module"]  # type: ignore[return-value]
    module = None
    try:
        from torch.utils import cpp_extension

        _note_first_build(cpp_extension)
        module = _build(cpp_extension)
    except Exception as exc:  # any build or load failure: fall back, say why once
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1:]}"
        warnings.warn(
            "proofs_check: the compiled causal OT kernel is unavailable "
            f"({reason}); using the pure-torch row solver (same results, slower)",
            CompiledFallbackWarning,
            stacklevel=3,
        )
    _state["module"] = module
    return module


def usable(s: torch.Tensor) -> bool:
    """Whether the kernel runs on ``s``: a CPU float32/float64 tensor and a built kernel."""
    return s.device.type == "cpu" and s.dtype in (torch.float32, torch.float64) and (
        load_extension() is not None
    )


# -mprefer-vector-width=512 (x86-64 only): where the CPU has AVX-512, loops in 512-bit vectors
# (GCC's tuning for recent Intel cores picks 256); no effect without AVX-512.
_FLAGS = ["-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-std=c++17"]
if platform.machine().lower() in ("x86_64", "amd64"):
    _FLAGS.insert(2, "-mprefer-vector-width=512")


def _sources_digest() -> str:
    """A digest of every file in ``csrc/``: part of the build flags, so that the cached build
    is replaced whenever a header changes (torch versions the build by its sources' text)."""
    h = hashlib.sha256()
    for path in sorted(_CSRC.iterdir()):
        if path.suffix in (".cpp", ".h"):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _build(cpp_extension) -> ModuleType:
    """Build (or load from the cache) with OpenMP, else without it.

    ``-fopenmp`` is what makes ``at::parallel_for`` in the kernel parallel: the ATen header is
    compiled into the extension, and without the flag its ``#pragma omp parallel`` is ignored
    (one thread for every head). The extension then shares torch's own OpenMP runtime (the
    ``libgomp.so.1`` torch loaded first satisfies the extension's dependency), so no second
    thread pool spins against torch's. A compiler without OpenMP (Apple clang) builds the
    serial kernel instead.
    """
    last: Exception | None = None
    for extra in (["-fopenmp"], []):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return cpp_extension.load(
                    name=_EXT_NAME + ("" if extra else "_serial"),
                    sources=[str(p) for p in _SOURCES],
                    extra_cflags=[*_FLAGS, *extra, f"-DCAUSAL_OT_SOURCES={_sources_digest()}"],
                    extra_ldflags=extra, verbose=False,
                )
        except Exception as exc:  # this flag set failed: try the next
            last = exc
    assert last is not None
    raise last


def _note_first_build(cpp_extension) -> None:
    """One stderr line before a build that will take a while (nothing when cached)."""
    try:
        build_dir = Path(cpp_extension._get_build_directory(_EXT_NAME, False))
        cached = any(build_dir.glob(f"{_EXT_NAME}*.so"))
    except Exception:
        cached = False
    if not cached:
        print("proofs_check: building the compiled causal OT kernel (first use only, about "
              "a minute)", file=sys.stderr, flush=True)


def _module() -> ModuleType:
    mod = load_extension()
    if mod is None:
        raise RuntimeError("the compiled causal OT kernel is unavailable")
    return mod


@dataclass(frozen=True)
class ForwardStats(SliceStats):
    """What the compiled forward did, one entry per ``(batch, head)`` slice: the fields of
    :class:`SliceStats` (the rows after an invalid one are zero) and

    Attributes
    ----------
    fallback_rows : rows finished by the safeguarded nested iteration.
    team_rows : rows the team of two workers shared (one slice on two or more threads).
    series_rows : rows solved by the series solve (long rows).
    team_from : the team's first shared row (0 without a team).
    exchange_ns : the cost of one exchange between the team's workers that ``team_from`` was
        chosen from (0 without a team).
    guess_rows : rows whose first pass kept its guess of the row's start scale.
    """

    fallback_rows: tuple[int, ...]
    team_rows: tuple[int, ...]
    series_rows: tuple[int, ...]
    team_from: tuple[int, ...]
    exchange_ns: tuple[float, ...]
    guess_rows: tuple[int, ...]


_FLOAT_STATS = ("error_estimate", "exchange_ns")


def _forward_stats(columns: dict[str, torch.Tensor]) -> ForwardStats:
    """The kernel's statistics (name: a float64 value per slice) as named per-slice tuples."""
    fields = {}
    for name, col in columns.items():
        values = col.tolist()
        fields[name] = (tuple(float(v) for v in values) if name in _FLOAT_STATS
                        else tuple(v > 0 for v in values) if name == "converged"
                        else tuple(int(v) for v in values))
    return ForwardStats(**fields)


@dataclass(frozen=True)
class RowStats:
    """What the compiled solve of one stream row did (fields as in :class:`ForwardStats`;
    ``fallback``: the row was finished by the safeguarded nested iteration)."""

    newton_steps: int
    error_estimate: float
    converged: bool
    fallback: bool
    invalid_row: int


def forward(s: torch.Tensor, rho: float, tol: float, max_iter: int,
            options: KernelOptions = DEFAULT_OPTIONS) -> tuple[torch.Tensor, ForwardStats]:
    """Weights of ``(B, n, n)`` CPU scores (``-inf`` masked; the upper triangle is not read)."""
    mod = _module()
    w, stats = mod.forward(s.contiguous(), float(rho), float(tol), int(max_iter),
                           _kernel_options(mod, options))
    return w, _forward_stats(stats)


def stream_row(srow: torch.Tensor, col: torch.Tensor, lcol: torch.Tensor, rho: float,
               tol: float, max_iter: int,
               options: KernelOptions = DEFAULT_OPTIONS) -> tuple[torch.Tensor, RowStats]:
    """One row of the stream (``col`` = C, ``lcol`` = log C, both updated in place)."""
    mod = _module()
    row, st = mod.stream_row(srow, col, lcol, float(rho), float(tol), int(max_iter),
                             _kernel_options(mod, options))
    return row, RowStats(**st)


def backward(a: torch.Tensor, g: torch.Tensor, rho: float) -> torch.Tensor:
    """``dL/ds`` from weights ``a`` and ``g = dL/da`` (both ``(B, n, n)``)."""
    return _module().backward(a.contiguous(), g.contiguous(), float(rho))

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

import platform
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

__all__ = [
    "CompiledFallbackWarning",
    "ForwardStats",
    "RowStats",
    "backward",
    "forward",
    "load_extension",
    "stream_row",
    "usable",
]

_SOURCES = [Path(__file__).with_name("csrc") / "causal_ot_cpu.cpp"]
_EXT_NAME = "proofs_check_causal_ot_cpu_v3"
_state: dict[str, object] = {}


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
                    extra_cflags=_FLAGS + extra, extra_ldflags=extra, verbose=False,
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


# The columns of the kernel's (B, 10) statistics matrix, in order (forward_impl in csrc/).
_STAT_COLUMNS = ("newton_steps", "error_estimate", "converged", "fallback_rows", "invalid_row",
                 "team_rows", "series_rows", "team_from", "exchange_ns", "guess_rows")


@dataclass(frozen=True)
class ForwardStats:
    """What the compiled forward did, one entry per ``(batch, head)`` slice.

    Attributes
    ----------
    newton_steps : the largest number of Newton steps a row of the slice took.
    error_estimate : the largest row error estimate (``ConvergenceInfo.residual``).
    converged : every row met ``tol``.
    fallback_rows : rows finished by the safeguarded nested iteration.
    invalid_row : 0, or the code of the first invalid row (the key of ``SCORE_VALUE_ERRORS``:
        1 NaN, 2 ``+inf``, 3 every key masked); the rows after it are zero.
    team_rows : rows the team of two workers shared (one slice on two or more threads).
    series_rows : rows solved by the series solve (long rows).
    team_from : the team's first shared row (0 without a team).
    exchange_ns : the cost of one exchange between the team's workers that ``team_from`` was
        chosen from (0 without a team).
    guess_rows : rows whose first pass kept its guess of the row's start scale.
    """

    newton_steps: tuple[int, ...]
    error_estimate: tuple[float, ...]
    converged: tuple[bool, ...]
    fallback_rows: tuple[int, ...]
    invalid_row: tuple[int, ...]
    team_rows: tuple[int, ...]
    series_rows: tuple[int, ...]
    team_from: tuple[int, ...]
    exchange_ns: tuple[float, ...]
    guess_rows: tuple[int, ...]

    @property
    def max_newton_steps(self) -> int:
        return max(self.newton_steps)

    @property
    def max_error_estimate(self) -> float:
        return max(self.error_estimate)

    @property
    def all_converged(self) -> bool:
        return all(self.converged)

    @property
    def first_invalid_row(self) -> int:
        """The code of the first slice's invalid row (0: every row valid)."""
        return next((code for code in self.invalid_row if code), 0)


_FLOAT_STATS = ("error_estimate", "exchange_ns")


def _forward_stats(matrix: torch.Tensor) -> ForwardStats:
    """The kernel's statistics matrix, column by column, as named per-slice tuples."""
    named = dict(zip(_STAT_COLUMNS, matrix.t().tolist(), strict=True))
    fields = {name: tuple(float(v) for v in col) if name in _FLOAT_STATS
              else tuple(bool(v) for v in col) if name == "converged"
              else tuple(int(v) for v in col) for name, col in named.items()}
    return ForwardStats(**fields)


@dataclass(frozen=True)
class RowStats:
    """What the compiled solve of one stream row did (fields as in :class:`ForwardStats`)."""

    newton_steps: int
    error_estimate: float
    converged: bool
    fallback: bool
    invalid_row: int


def forward(s: torch.Tensor, rho: float, tol: float,
            max_iter: int) -> tuple[torch.Tensor, ForwardStats]:
    """Weights of ``(B, n, n)`` CPU scores (``-inf`` masked; the upper triangle is not read)."""
    w, stats = _module().forward(s.contiguous(), float(rho), float(tol), int(max_iter))
    return w, _forward_stats(stats)


def stream_row(srow: torch.Tensor, col: torch.Tensor, lcol: torch.Tensor, rho: float,
               tol: float, max_iter: int) -> tuple[torch.Tensor, RowStats]:
    """One row of the stream (``col`` = C, ``lcol`` = log C, both updated in place)."""
    row, st = _module().stream_row(srow, col, lcol, float(rho), float(tol), int(max_iter))
    it, err, ok, fb, bad = st.tolist()
    return row, RowStats(int(it), float(err), bool(ok), bool(fb), int(bad))


def backward(a: torch.Tensor, g: torch.Tensor, rho: float) -> torch.Tensor:
    """``dL/ds`` from weights ``a`` and ``g = dL/da`` (both ``(B, n, n)``)."""
    return _module().backward(a.contiguous(), g.contiguous(), float(rho))

r"""The compiled CPU row solver of the causal OT operator (docs/theory.md §2, Lemma 2.1), and its loader.

The C++ source is ``csrc/causal_ot_cpu.cpp`` (shipped with the package). It is JIT-built with
``torch.utils.cpp_extension.load`` on first use, into torch's extension cache
(``$TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``; never inside the
repository), and reused from there by later processes. Why JIT and not a build at install
time: building at ``pip install`` would need torch at build time, i.e. build isolation
pulling an unpinned multi-GB torch; the JIT build needs only a C++ compiler and ``ninja``
(measured here: 37 s once per machine and torch version, then 0.1 s to load).

If the build fails (no compiler, no ninja, or ``PROOFS_CHECK_NO_COMPILE=1``), the operator
falls back to the pure-torch row solver (``_causal_ot_exact``) with one
:class:`CompiledFallbackWarning`; the two paths are tested against each other and mpmath.

Forward (per row, on the live keys, scores shifted to their row max): closed-form start
``q_j = s_j - kappa log C_j``, ``zeta`` by scalar Newton on
``e^{P - zeta} + sum_fresh e^{(1-rho)(s_f - zeta)} = 1`` with ``P = logsumexp(q)``,
``x_j = min(q_j - zeta, (1-rho)(s_j - zeta))`` (an upper bound of each key's root); then the
joint Newton step on ``(x, zeta)``

    g_j = 1 + kappa a_j/(C_j + a_j),  r_j = x_j + kappa log(C_j + a_j) + zeta - s_j,
    dzeta = (sum a - 1 - sum a_j r_j/g_j) / sum(a_j/g_j),  dx_j = -(r_j + dzeta)/g_j,

each iterate clamped to the upper bound at the new ``zeta``; stop when Newton's quadratic
error estimate ``4 step^3 / step_prev^2`` (or the step itself) is ``<= tol``. After 40 steps
without convergence a safeguarded nested iteration takes over (monotone scalar Newton per key
from its upper bound, bracketed Newton on ``zeta``); it gives up, unconverged, when the step
stalls at the dtype's resolution instead of looping to ``max_iter``.

Threads: the (batch x heads) slices run in parallel on torch's threads (``at::parallel_for``,
OpenMP, torch's own runtime). A single slice on two or more threads is solved by a team of
two workers: each row from the team's first shared row on split in two key ranges (that row
is 256 where an exchange between the workers is cheap, later where it is not: about 6 rows per
ns that one exchange costs, measured at each call; 1024 on an Intel Xeon VM at ~165 ns; the
shorter rows are worker 0's alone), the row's sums (score range, ``logsumexp``, near-key
lists, each Newton pass's sums) exchanged at a spinning two-party barrier, and every scalar
decision taken identically by both from the same numbers. The
result differs from the one-thread solve only by the order of the summations (rounding).
Every 64 shared rows the team checks its own waiting and dissolves (worker 0 goes on alone)
when that does not pay, as on cores time-shared with other work. A thread allowed on one CPU
only (its affinity mask, on Linux) forms no team: there the two workers could only take turns.
Without OpenMP (a serial build) everything runs on one thread.

Backward (exact, reverse row sweep). Differentiating row ``l``'s conditions with
``D_j = C'[l, j] = C[l-1, j] + a_j`` and ``p_j = a_j / g_j``, ``W = sum p``:

    da_j = p_j (e_j - sum_k p_k e_k / W),   e_j = ds_j - kappa dC[l-1, j] / D_j.

The map ``e -> da`` is symmetric, so for the total gradient ``abar`` on row ``l``
(upstream ``dL/da[l, j]`` plus ``G_j``, the gradient on ``C[l-1, j]`` carried back from rows
``> l``, because ``C[l'-1, j]`` sums ``a[k, j]`` over ``k < l'``):

    sbar_j = v_j - p_j sum(v) / W,   v_j = p_j abar_j,     G_j <- G_j - kappa sbar_j / D_j.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings
from pathlib import Path
from types import ModuleType

import torch

__all__ = [
    "CompiledFallbackWarning",
    "compiled_backward",
    "compiled_forward",
    "compiled_stream_row",
    "load_extension",
    "reverse_sweep_backward",
]

_SOURCE = Path(__file__).with_name("csrc") / "causal_ot_cpu.cpp"
_EXT_NAME = "proofs_check_causal_ot_cpu_v2"
_state: dict[str, object] = {}


class CompiledFallbackWarning(UserWarning):
    """The compiled causal OT kernel could not be built; the pure-torch solver is used."""


def load_extension() -> ModuleType | None:
    """The compiled module, building it on first use; None (after one warning) if unavailable.

    ``PROOFS_CHECK_NO_COMPILE=1`` forces the pure-torch fallback (used by the tests).
    """
    if "module" in _state:
        return _state["module"]  # type: ignore[return-value]
    module = None
    reason = None
    if os.environ.get("PROOFS_CHECK_NO_COMPILE", "") not in ("", "0"):
        reason = "PROOFS_CHECK_NO_COMPILE is set"
    else:
        try:
            from torch.utils import cpp_extension

            _note_first_build(cpp_extension)
            module = _build(cpp_extension)
        except Exception as exc:  # any build or load failure: fall back, say why once
            reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1:]}"
            module = None
    if module is None:
        warnings.warn(
            "proofs_check: the compiled causal OT kernel is unavailable "
            f"({reason}); using the pure-torch row solver (same results, slower)",
            CompiledFallbackWarning,
            stacklevel=3,
        )
    _state["module"] = module
    return module


# -mprefer-vector-width=512 (x86-64 only): where the CPU has AVX-512, loops in 512-bit vectors
# (GCC's tuning for recent Intel cores picks 256); measured on an Intel Xeon VM (2026-12-02),
# 8-22% faster for one head and for eight, float64 and float32. No effect without AVX-512.
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
                    name=_EXT_NAME + ("" if extra else "_serial"), sources=[str(_SOURCE)],
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


def compiled_forward(
    s: torch.Tensor, rho: float, tol: float, max_iter: int
) -> tuple[torch.Tensor, int, float, bool, int]:
    """Weights of ``(B, n, n)`` CPU scores (``-inf`` masked; the upper triangle is not read).

    Returns (weights, max Newton iterations over rows, max error estimate, all rows
    converged, invalid-row code: 0, or the key of ``SCORE_VALUE_ERRORS`` of the first bad
    row found). Requires :func:`load_extension` to have returned the module.
    """
    mod = load_extension()
    if mod is None:
        raise RuntimeError("compiled kernel unavailable")
    w, stats = mod.forward(s.contiguous(), float(rho), float(tol), int(max_iter))
    stats = stats.tolist()
    iters = int(max(r[0] for r in stats))
    resid = float(max(r[1] for r in stats))
    ok = all(r[2] > 0 for r in stats)
    bad = next((int(r[4]) for r in stats if r[4]), 0)
    return w, iters, resid, ok, bad


def compiled_stream_row(srow, col, lcol, rho, tol, max_iter):
    """One row of the stream through the compiled kernel (``col``, ``lcol`` updated in place)."""
    mod = load_extension()
    if mod is None:
        return None
    return mod.stream_row(srow, col, lcol, float(rho), float(tol), int(max_iter))


def compiled_backward(a: torch.Tensor, g: torch.Tensor, rho: float) -> torch.Tensor | None:
    """``dL/ds`` from weights ``a`` and ``g = dL/da`` (both ``(B, n, n)``), compiled."""
    mod = load_extension()
    if mod is None:
        return None
    return mod.backward(a.contiguous(), g.contiguous(), float(rho))


def reverse_sweep_backward(a: torch.Tensor, g: torch.Tensor, rho: float) -> torch.Tensor:
    """Pure-torch version of the exact reverse row sweep (any device; see the module doc)."""
    kappa = rho / (1.0 - rho)
    n = a.shape[-1]
    cp = torch.cumsum(a, dim=-2)
    pos = a > 0
    dsafe = torch.where(pos, cp, torch.ones((), dtype=a.dtype, device=a.device))
    p = torch.where(pos, a / (1.0 + kappa * a / dsafe), torch.zeros((), dtype=a.dtype,
                                                                     device=a.device))
    ginc = torch.zeros_like(a[..., 0, :])
    out = torch.zeros_like(a)
    for i in range(n - 1, -1, -1):
        pr = p[..., i, : i + 1]
        v = pr * (g[..., i, : i + 1] + ginc[..., : i + 1])
        w_sum = pr.sum(-1, keepdim=True)
        sbar = v - pr * (v.sum(-1, keepdim=True) / w_sum)
        out[..., i, : i + 1] = sbar
        ginc[..., : i + 1] -= kappa * sbar / dsafe[..., i, : i + 1]
    return out

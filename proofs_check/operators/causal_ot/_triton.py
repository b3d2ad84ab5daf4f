"""The GPU solver of the causal OT operator: loads the Triton kernels and launches them.

``causal_ot_attention`` sends CUDA scores here (``method="newton"``), and ``stream_causal_ot``
its CUDA rows; the kernels are in ``_triton_kernels`` (forward: the row-by-row Newton solve of
Lemma 2.1, one program per ``(batch, head)`` slice, the row held in registers up to
:data:`RESIDENT_KEYS` keys and read in chunks beyond; backward: the exact reverse row sweep).
Where triton is not installed, the operator runs the pure-torch solver on the same device
instead, after one :class:`TritonFallbackWarning`.

The kernels also run on CPU tensors when triton was imported with ``TRITON_INTERPRET=1``
(triton's interpreter, which reads that variable when triton is first imported); the test
suite checks them that way on machines without a GPU.
"""

from __future__ import annotations

import contextlib
import warnings
from types import ModuleType

import torch

from ._common import SliceStats

__all__ = [
    "CHUNK_KEYS",
    "FAST_STEPS",
    "RESIDENT_KEYS",
    "TritonFallbackWarning",
    "backward",
    "forward",
    "interpreting",
    "load_kernels",
    "stream_row",
    "usable",
]

#: Joint Newton steps a row takes before the safeguarded nested iteration finishes it (as in
#: the compiled CPU kernel; a row needs 3 to 7).
FAST_STEPS = 40
#: Longest row a program holds in registers with its slice's column masses (16 keys a thread
#: at 32 warps, where some spill to local memory); longer rows are read in chunks.
RESIDENT_KEYS = 16384
#: Keys a chunk of a longer row holds (4 a thread at 32 warps).
CHUNK_KEYS = 4096

_state: dict[str, object] = {}


class TritonFallbackWarning(UserWarning):
    """The Triton kernels cannot take these CUDA scores; the pure-torch solver runs instead."""


def load_kernels() -> ModuleType | None:
    """The kernel module, imported on first use; None (after one warning) without triton."""
    if "module" not in _state:
        try:
            from . import _triton_kernels as module
        except ImportError as exc:
            module = None
            warnings.warn(
                f"proofs_check: triton is not installed ({str(exc).strip()}); causal OT attention "
                "on CUDA runs the pure-torch row solver (same results, far slower). Install "
                "triton, which comes with the CUDA builds of torch.",
                TritonFallbackWarning,
                stacklevel=3,
            )
        _state["module"] = module
    return _state["module"]  # type: ignore[return-value]


def interpreting() -> bool:
    """Whether triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1`` at import)."""
    if load_kernels() is None:
        return False
    from triton import knobs

    return bool(knobs.runtime.interpret)


def usable(s: torch.Tensor) -> bool:
    """Whether ``causal_ot_attention`` runs the kernels on scores ``s``: CUDA, float32 or
    float64, and triton installed (one warning where it is not)."""
    if s.device.type != "cuda" or s.dtype not in (torch.float32, torch.float64):
        return False
    return load_kernels() is not None


def _kernels() -> ModuleType:
    mod = load_kernels()
    if mod is None:
        raise RuntimeError("the Triton kernels are unavailable (triton is not installed)")
    return mod


def _check_device(t: torch.Tensor) -> None:
    if t.device.type != "cuda" and not (t.device.type == "cpu" and interpreting()):
        raise ValueError(f"the Triton kernels take CUDA tensors (CPU tensors only under "
                         f"TRITON_INTERPRET=1), got a tensor on {t.device}")
    if t.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the Triton kernels compute in float32 or float64, got {t.dtype}")


def _block(n: int) -> int:
    """Keys a program holds: the power of two at or above ``n`` (at least 16)."""
    return max(16, 1 << (n - 1).bit_length())


def _warps(block: int) -> int:
    """Warps a program runs: 4 keys a thread up to 4096 keys (8 at 8192, 16 at 16384)."""
    return min(32, max(4, block // 128))


def _params(dtype: torch.dtype, device: torch.device, rho: float, tol: float) -> torch.Tensor:
    """The kernels' scalar parameters in the compute dtype: ``1 - rho``, ``kappa``, ``tol``
    and the dtype's epsilon (the slots ``_triton_kernels.PARAM_*``)."""
    return torch.tensor([1.0 - rho, rho / (1.0 - rho), tol, torch.finfo(dtype).eps],
                        dtype=dtype, device=device)


def _stats(mod: ModuleType, stats: torch.Tensor) -> SliceStats:
    st = stats.cpu().double()
    return SliceStats(
        newton_steps=tuple(int(v) for v in st[:, mod.STAT_ITERS.value]),
        error_estimate=tuple(float(v) for v in st[:, mod.STAT_RESID.value]),
        converged=tuple(bool(v > 0) for v in st[:, mod.STAT_OK.value]),
        invalid_row=tuple(int(v) for v in st[:, mod.STAT_BAD.value]),
    )


def forward(s: torch.Tensor, rho: float, tol: float, max_iter: int, *,
            fast_steps: int = FAST_STEPS, chunk: int | None = None,
            ) -> tuple[torch.Tensor, SliceStats]:
    """Weights of ``(B, n, n)`` scores (``-inf`` masked keys; the upper triangle is not read)
    and the kernel's statistics.

    ``fast_steps``: joint Newton steps before the safeguarded iteration. ``chunk``: read the
    rows in chunks of that many keys (a power of two, at least 8) whatever ``n``; by default
    rows of up to ``RESIDENT_KEYS`` keys are held whole and longer ones read in chunks of
    ``CHUNK_KEYS``. The tests set both to reach every path at small sizes.
    """
    mod = _kernels()
    _check_device(s)
    s = s.contiguous()
    bsz, n, _ = s.shape
    stats = torch.zeros(bsz, mod.N_STATS.value, dtype=s.dtype, device=s.device)
    params = _params(s.dtype, s.device, rho, tol)
    if chunk is None and n <= RESIDENT_KEYS:
        w = torch.empty_like(s)  # every row is written whole, zeros above the diagonal included
        block = _block(n)
        with _on_device(s):
            mod._forward_kernel[(bsz,)](
                s, w, stats, params, n, n * n, n, int(max_iter), int(fast_steps),
                BLOCK=block, num_warps=_warps(block), enable_fp_fusion=True,
            )
        return w, _stats(mod, stats)
    block = _check_chunk(chunk) if chunk is not None else CHUNK_KEYS
    w = torch.zeros_like(s)  # a chunked row writes its keys only
    col = torch.zeros(bsz, n, dtype=s.dtype, device=s.device)
    scratch = torch.empty(bsz, 3, n, dtype=s.dtype, device=s.device)
    with _on_device(s):
        mod._forward_chunked_kernel[(bsz,)](
            s, w, stats, params, col, scratch, n, n * n, n, int(max_iter), int(fast_steps),
            BLOCK=block, num_warps=_warps(block), enable_fp_fusion=True,
        )
    return w, _stats(mod, stats)


def stream_row(s: torch.Tensor, col: torch.Tensor, scratch: torch.Tensor, rho: float,
               tol: float, max_iter: int, *, chunk: int | None = None,
               ) -> tuple[torch.Tensor, SliceStats]:
    """Row ``m = len(s)`` of the stream: its weights, solved on the column masses ``col[:m]``,
    which it then adds to ``col`` in place. ``scratch`` holds at least ``3 m`` entries."""
    mod = _kernels()
    _check_device(s)
    m = s.shape[-1]
    stats = torch.zeros(1, mod.N_STATS.value, dtype=s.dtype, device=s.device)
    w = torch.empty(m, dtype=s.dtype, device=s.device)
    block = _check_chunk(chunk) if chunk is not None else min(CHUNK_KEYS, _block(m))
    with _on_device(s):
        mod._stream_row_kernel[(1,)](
            s.contiguous(), w, stats, _params(s.dtype, s.device, rho, tol), col, scratch, m,
            int(max_iter), FAST_STEPS, BLOCK=block, num_warps=_warps(block),
            enable_fp_fusion=True,
        )
    return w, _stats(mod, stats)


def _on_device(t: torch.Tensor):
    """A context that makes ``t``'s GPU current (triton launches on the current one)."""
    return torch.cuda.device(t.device) if t.device.type == "cuda" else contextlib.nullcontext()


def _check_chunk(chunk: int) -> int:
    if chunk < 8 or chunk & (chunk - 1):
        raise ValueError(f"chunk must be a power of two of at least 8, got {chunk!r}")
    return chunk


def backward(a: torch.Tensor, g: torch.Tensor, rho: float, *,
             chunk: int | None = None) -> torch.Tensor:
    """``dL/ds`` from weights ``a`` and ``g = dL/da`` (both ``(B, n, n)``): the reverse sweep.
    ``chunk`` as in :func:`forward` (rows held whole up to ``RESIDENT_KEYS`` keys)."""
    mod = _kernels()
    _check_device(a)
    a = a.contiguous()
    g = g.to(a.dtype).contiguous()
    bsz, n, _ = a.shape
    cp = torch.cumsum(a, dim=-2)  # (B, n, n): C'[l, j], the column masses after row l
    out = torch.empty_like(a)  # every row is written whole, zeros above the diagonal included
    params = _params(a.dtype, a.device, rho, 1.0)
    if chunk is None and n <= RESIDENT_KEYS:
        block = _block(n)
        with _on_device(a):
            mod._backward_kernel[(bsz,)](
                a, cp, g, out, params, n, n * n, n,
                BLOCK=block, num_warps=_warps(block), enable_fp_fusion=True,
            )
        return out
    block = _check_chunk(chunk) if chunk is not None else CHUNK_KEYS
    carried = torch.zeros(bsz, n, dtype=a.dtype, device=a.device)
    with _on_device(a):
        mod._backward_chunked_kernel[(bsz,)](
            a, cp, g, out, params, carried, n, n * n, n,
            BLOCK=block, num_warps=_warps(block), enable_fp_fusion=True,
        )
    return out

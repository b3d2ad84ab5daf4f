"""Streaming O(n)-memory solver of the causal OT operator (docs/theory.md §2, Lemma 2.1; §4 study).

Rows are produced in order ``l = 1, 2, ..., n`` by the row solver of Lemma 2.1; only the
column masses ``C[l-1, :]`` (one vector of length ``n``) and the current row are kept, so the
memory is O(n) whatever ``n`` (the dense operator would need ``n^2`` entries).
"""

from __future__ import annotations

import numbers
import sys
import time
import warnings
from collections.abc import Callable, Iterator

import torch

from . import _compiled, _triton
from ._common import (
    ConvergenceWarning,
    default_tol,
    validate_max_iter,
    validate_rho,
    validate_tol,
)
from ._newton import solve_row

__all__ = ["stream_causal_ot"]


def stream_causal_ot(
    n: int,
    rho: float,
    *,
    score_fn: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
    tol: float | None = None,
    max_iter: int = 100,
    progress: bool | Callable[[int, int], None] | None = None,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield the operator's rows ``(l, a[l, 1..l])`` for ``l = 1..n`` with O(n) memory.

    Row ``l`` solves ``a_j (C[l-1,j] + a_j)^kappa = e^{s(l,j)} / Z_l``, ``sum_j a_j = 1``
    (Lemma 2.1), ``C[l-1,j] = sum_{k=j}^{l-1} a[k,j]``; the solver keeps only ``C``.

    Parameters
    ----------
    n : number of rows (queries), ``n >= 1``.
    rho : balancing strength in ``[0, 1)``.
    score_fn : callable ``(l, j) -> s`` with ``l`` the 1-based row and ``j`` the 1-based key
        indices ``1..l`` (an int64 tensor on ``device``); returns the ``l`` real scores of
        row ``l`` (a tensor, array or list; ``-inf`` = masked key; complex or boolean
        values: ValueError). ``None`` means constant scores (the prior of §4).
    dtype : float32 or float64 (the compute dtype).
    device : where the vectors live (a device that holds values, not ``meta``, and that this
        machine has).
    tol, max_iter : Newton tolerance (dtype default) and cap per row (a Python or numpy
        integer in ``[1, 2**31 - 1]``); a row that misses it issues a
        :class:`ConvergenceWarning`.
    progress : ``True`` prints ``row l/n`` lines to stderr (at most one per 5 s, and the last
        row); a callable ``progress(l, n)`` is called before each row; False or None
        (default): silent.

    On CPU (``rho > 0``) each row runs through the compiled row kernel (``_compiled``, the one
    the dense operator uses), on CUDA through the Triton row kernel (``_triton``, one launch a
    row), elsewhere through the pure-torch row solver (``_newton``).

    Yields
    ------
    ``(l, row)`` with ``row`` a tensor of length ``l`` (index ``j-1``); the tensor is new for
    each row (safe to keep).

    Examples
    --------
    The first two rows with constant scores at ``rho = 1/2`` (``kappa = 1``): row 2 solves
    ``a_1 (1 + a_1) = a_2^2`` with ``a_1 + a_2 = 1``, i.e. ``a_1 = 1/3``:

    >>> rows = dict(stream_causal_ot(2, 0.5))
    >>> [round(v, 12) for v in rows[2].tolist()]
    [0.333333333333, 0.666666666667]
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    n = int(n)
    rho = validate_rho(rho)
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    max_iter = validate_max_iter(max_iter)
    tol_v = validate_tol(tol)
    tol_v = default_tol(dtype) if tol_v is None else tol_v
    device = _validate_device(device)
    if progress is True:
        progress = _stderr_progress()
    elif progress is not None and progress is not False and not callable(progress):
        raise ValueError(f"progress must be None, a bool or a callable, got {progress!r}")
    progress = progress or None
    return _stream(n, rho, score_fn, dtype, device, tol_v, max_iter, progress)


def _validate_device(device: object) -> torch.device:
    """``device`` as a torch.device that holds values (not ``meta``) and is present on
    this machine (``cuda`` without a CUDA device is refused here, not at the first row);
    else ValueError naming ``device``."""
    try:
        dev = torch.device(device)  # type: ignore[arg-type]
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must name a torch device, got {device!r}") from exc
    if dev.type == "meta":
        raise ValueError("device is 'meta' (it holds no values to stream rows into)")
    try:
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError) as exc:  # torch's "not compiled with CUDA" asserts
        raise ValueError(f"device {str(dev)!r} is not available on this machine "
                         f"({type(exc).__name__}: {str(exc).strip().splitlines()[0]})") from None
    return dev


def _row_scores(score_fn: Callable[[int, torch.Tensor], torch.Tensor], l_row: int,
                j: torch.Tensor, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``score_fn(l_row, j)`` as a ``(1, l_row)`` tensor of real scores in ``dtype``;
    ValueError when it returns something else (complex or boolean values included: a
    cast would drop the imaginary part or read True as a score of 1)."""
    value = score_fn(l_row, j)  # its own exceptions propagate as they are
    try:
        raw = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"score_fn({l_row}, j) returned something that is not a tensor of "
                         f"real scores ({exc})") from None
    if raw.is_complex() or raw.dtype == torch.bool:
        raise ValueError(f"score_fn({l_row}, j) returned {raw.dtype} values, not real scores")
    s = raw.to(dtype=dtype, device=device).reshape(1, -1)
    if s.shape[-1] != l_row:
        raise ValueError(f"score_fn({l_row}, j) returned {s.shape[-1]} scores, not {l_row}")
    return s


def _stderr_progress(every_s: float = 5.0) -> Callable[[int, int], None]:
    """A progress callback printing ``row l/n`` to stderr at most every ``every_s`` seconds."""
    start = time.monotonic()
    last = [start]

    def report(l_row: int, n: int) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s or l_row == n:
            last[0] = now
            print(f"stream_causal_ot: row {l_row}/{n} ({now - start:.0f} s)",
                  file=sys.stderr, flush=True)

    return report


def _stream(n, rho, score_fn, dtype, device, tol, max_iter, progress=None):
    col = torch.zeros(n, dtype=dtype, device=device)  # C[l-1, :]
    lcol = torch.zeros(n, dtype=dtype, device=device)  # log C[l-1, :] (compiled kernel)
    idx = torch.arange(1, n + 1, device=device)
    compiled = device.type == "cpu" and rho > 0 and _compiled.load_extension() is not None
    gpu = device.type == "cuda" and rho > 0 and _triton.usable(col)
    scratch = torch.empty(3 * n, dtype=dtype, device=device) if gpu else None
    # constant scores: every row reads a prefix of one zero row (read-only below), not a fresh
    # zero tensor per row (n^2 / 2 entries of memset in all)
    zeros = torch.zeros(1, n, dtype=dtype, device=device) if score_fn is None else None
    for l_row in range(1, n + 1):
        if progress is not None:
            progress(l_row, n)
        j = idx[:l_row]
        if score_fn is None:
            s = zeros[:, :l_row]
            live = None
        else:
            s = _row_scores(score_fn, l_row, j, dtype, device)
            if torch.isnan(s).any() or (s == float("inf")).any():
                raise ValueError(f"score_fn({l_row}, j) returned NaN or +inf")
            live = torch.isfinite(s)
            if not live.any():
                raise ValueError(f"score_fn({l_row}, j) masked every key of row {l_row}")
            if bool(live.all()):
                live = None
        if gpu:
            row, st = _triton.stream_row(s.reshape(-1), col, scratch, rho, tol, max_iter)
            if not st.all_converged:
                warnings.warn(
                    f"stream_causal_ot: row {l_row} stopped with Newton error estimate "
                    f"{st.max_error_estimate:.3e} > {tol:g}",
                    ConvergenceWarning,
                    stacklevel=2,
                )
            yield l_row, row
            continue
        if compiled:
            row, st = _compiled.stream_row(s.reshape(-1), col, lcol, rho, tol, max_iter)
            if not st.converged:
                warnings.warn(
                    f"stream_causal_ot: row {l_row} stopped with Newton error estimate "
                    f"{st.error_estimate:.3e} > {tol:g}",
                    ConvergenceWarning,
                    stacklevel=2,
                )
            yield l_row, row
            continue
        if live is None:
            s = s - s.max()
        else:  # row shift (Proposition 2.4); a difference that overflows is a dead key
            s = s - s.masked_fill(~live, float("-inf")).max()
            live = live & torch.isfinite(s)
        if rho == 0.0:
            row = torch.softmax(s if live is None else s.masked_fill(~live, float("-inf")), -1)
        else:
            log_c = torch.log(col[:l_row]).unsqueeze(0)
            row, _, _, step = solve_row(s, log_c, live, rho, tol, max_iter)
            if step > tol:
                warnings.warn(
                    f"stream_causal_ot: row {l_row} stopped with Newton step {step:.3e} > {tol:g}",
                    ConvergenceWarning,
                    stacklevel=2,
                )
        row = row.reshape(-1)
        col[:l_row] += row
        yield l_row, row

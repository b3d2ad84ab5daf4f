"""The cases on which the Triton kernels are checked without a GPU, and their runner.

``python tests/proofs_check/triton_interpret_cases.py OUT`` (with ``TRITON_INTERPRET=1`` in
its environment, which triton reads when it is first imported) runs every case through the
kernels in triton's CPU interpreter and saves the outputs to ``OUT`` (``torch.save``). The
test module builds the same inputs from :func:`inputs` and compares the outputs with
references computed by other methods (the compiled CPU kernel, the pure-torch solver, mpmath,
finite differences). The sizes are small because the interpreter runs each program's
operations one by one in numpy.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

F64, F32 = torch.float64, torch.float32


@dataclass(frozen=True)
class Case:
    """One kernel launch: scores of ``shape`` (leading dims flattened), their dtype and kind."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    rho: float
    kind: str = "randn"  # how the scores are made: see inputs()
    scale: float = 1.0
    tol: float | None = None  # None: the dtype's default (1e-10 / 1e-5)
    max_iter: int = 100
    fast_steps: int = 40
    chunk: int | None = None  # rows read in chunks of this many keys (the long-row kernels)
    backward: bool = False
    stream: bool = False  # row by row through the stream's kernel (one slice)


CASES = (
    Case("one_key", (1, 1), F64, 0.5),
    Case("batch_2x2_f64_rho0.3", (2, 2, 5, 5), F64, 0.3, scale=2.0, tol=1e-12),
    Case("masked_f64_rho0.9", (1, 16, 16), F64, 0.9, kind="masked", scale=2.0, tol=1e-12),
    Case("f64_rho0.99", (1, 14, 14), F64, 0.99, scale=3.0, tol=1e-12),
    Case("f64_rho0.3_n24", (24, 24), F64, 0.3, tol=1e-12),
    Case("f32_rho0.9", (2, 12, 12), F32, 0.9, kind="masked", scale=2.0),
    Case("f32_rho0.99", (1, 12, 12), F32, 0.99, scale=2.0),
    Case("f32_shift_1e7", (1, 10, 10), F32, 0.8, kind="shift"),
    Case("f64_overflowing_difference", (1, 6, 6), F64, 0.7, kind="overflow"),
    Case("safeguarded_f64", (1, 10, 10), F64, 0.9, scale=2.0, tol=1e-12, fast_steps=1),
    Case("safeguarded_f32", (1, 8, 8), F32, 0.99, scale=2.0, fast_steps=0),
    Case("unconverged_max_iter_1", (1, 8, 8), F64, 0.99, scale=3.0, max_iter=1),
    Case("nan_below_diagonal", (1, 5, 5), F64, 0.5, kind="nan"),
    Case("pinf_below_diagonal", (1, 5, 5), F64, 0.5, kind="pinf"),
    Case("row_fully_masked", (1, 5, 5), F64, 0.5, kind="dead_row"),
    Case("garbage_above_diagonal", (1, 6, 6), F64, 0.6, kind="upper_garbage", tol=1e-12),
    Case("chunked_f64_rho0.9", (1, 24, 24), F64, 0.9, kind="masked", scale=2.0, tol=1e-12,
         chunk=16),
    Case("chunked_safeguarded_f32", (1, 20, 20), F32, 0.9, scale=2.0, fast_steps=0, chunk=16),
    Case("stream_f64_rho0.9", (24, 24), F64, 0.9, kind="masked", scale=2.0, tol=1e-12,
         chunk=16, stream=True),
    Case("backward_f64_rho0.9", (2, 12, 12), F64, 0.9, kind="masked", scale=2.0,
         backward=True),
    Case("backward_f32_rho0.99", (1, 16, 16), F32, 0.99, scale=2.0, backward=True),
)


def inputs(case: Case) -> dict[str, torch.Tensor]:
    """The scores (and for a backward case the upstream gradient) of ``case``, from a seed."""
    seed = sum(map(ord, case.name))
    g = torch.Generator().manual_seed(seed)
    n = case.shape[-1]
    s = case.scale * torch.randn(*case.shape, generator=g, dtype=F64)
    flat = s.reshape(-1, n, n)
    if case.kind == "masked":
        flat[:, 5:, 2] = float("-inf")  # a key masked from row 6 on: its column keeps its mass
        flat[:, 7, 7] = float("-inf")  # a masked diagonal: the key is fresh at row 9
        if n > 9:
            flat[:, :, 9] = float("-inf")  # a key masked in every row
    elif case.kind == "shift":
        flat += 1e7  # float32 ulp 1 at 1e7: the row shift must keep the solve accurate
    elif case.kind == "overflow":
        flat[:, 4, 0] = 9e307
        flat[:, 4, 1] = -9e307  # its difference to the row max overflows: weight exactly 0
    elif case.kind == "nan":
        flat[:, 3, 1] = float("nan")
    elif case.kind == "pinf":
        flat[:, 2, 0] = float("inf")
    elif case.kind == "dead_row":
        flat[:, 3, :4] = float("-inf")
    elif case.kind == "upper_garbage":
        upper = torch.ones(n, n, dtype=torch.bool).triu(1)
        flat[:, upper] = float("nan")
        flat[:, 0, 3] = float("inf")
    out = {"scores": s.to(case.dtype)}
    if case.backward:
        out["grad"] = torch.randn(*case.shape, generator=g, dtype=F64).to(case.dtype)
    return out


def _run_stream(case: Case, s: torch.Tensor, tol: float) -> dict[str, object]:
    from proofs_check.operators.causal_ot._triton import stream_row

    n = s.shape[-1]
    col = torch.zeros(n, dtype=s.dtype)
    scratch = torch.empty(3 * n, dtype=s.dtype)
    w = torch.zeros(n, n, dtype=s.dtype)
    steps, ok = 0, True
    for i in range(n):
        row, stats = stream_row(s[i, : i + 1], col, scratch, case.rho, tol, case.max_iter,
                                chunk=case.chunk)
        w[i, : i + 1] = row
        steps, ok = max(steps, stats.max_newton_steps), ok and stats.all_converged
    return {"weights": w, "iters": steps, "resid": 0.0, "ok": ok, "bad": 0}


def _run(case: Case) -> dict[str, object]:
    from proofs_check.operators.causal_ot._common import default_tol
    from proofs_check.operators.causal_ot._triton import backward, forward

    x = inputs(case)
    n = case.shape[-1]
    s = x["scores"].reshape(-1, n, n)
    tol = case.tol if case.tol is not None else default_tol(case.dtype)
    if case.stream:
        return _run_stream(case, s[0], tol)
    w, stats = forward(s, case.rho, tol, case.max_iter, fast_steps=case.fast_steps,
                       chunk=case.chunk)
    out: dict[str, object] = {"weights": w.reshape(case.shape), "iters": stats.max_newton_steps,
                              "resid": stats.max_error_estimate, "ok": stats.all_converged,
                              "bad": stats.first_invalid_row}
    if case.backward:
        grad = x["grad"].reshape(-1, n, n)
        out["grad_scores"] = backward(w, grad, case.rho).reshape(case.shape)
        out["grad_scores_chunked"] = backward(w, grad, case.rho, chunk=8).reshape(case.shape)
    return out


def main(path: str) -> int:
    from proofs_check.operators.causal_ot._triton import interpreting

    if not interpreting():
        print("triton is not in interpreter mode (TRITON_INTERPRET=1 must be set before it is "
              "imported)", file=sys.stderr)
        return 1
    torch.save({case.name: _run(case) for case in CASES}, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

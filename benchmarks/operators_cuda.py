"""Benchmark of the causal OT operator on a CUDA GPU against masked softmax (docs/theory.md §2).

``python -m benchmarks.operators_cuda [--quick] [--json]`` (also the ``operators_cuda`` area of
``python -m benchmarks``); it needs a CUDA device and says so otherwise.

Each row times ``causal_ot_attention(s, rho)`` (the Triton kernels) and the masked softmax
``torch.softmax(s.masked_fill(upper, -inf), -1)`` of the same scores, shape, dtype and device,
interleaved in one process after warm-up calls, each call followed by
``torch.cuda.synchronize()``; the ratio is the median of the operator's times over the median
of the softmax's. Scores are i.i.d. N(0, 1); ``rho`` in {0.3, 0.9, 0.99}. Rows:

* float32 forward: batch x heads = 64 at n = 4096, 8 heads at n = 8192, 8 heads at n = 512 and
  1024;
* float32 forward + backward (``(w * g).sum().backward()``) at 64 x 4096 against the softmax's;
* float64 forward at 8 x 2048;
* accuracy: the float32 weights of 8 heads at n = 2048 against the compiled CPU kernel in
  float64 (largest absolute difference, largest row-sum error), and the float64 weights.

``--quick`` runs n <= 1024 and one repeat of each call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

RHOS = (0.3, 0.9, 0.99)


def _median_times(fns, repeats: int, warmup: int = 2) -> list[float]:
    """Median wall time of each function (synchronised), run round-robin after warm-ups."""
    import torch

    for _ in range(warmup):
        for f in fns:
            f()
        torch.cuda.synchronize()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, f in enumerate(fns):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            f()
            torch.cuda.synchronize()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def _scores(batch: int, n: int, dtype, seed: int = 0):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(batch, n, n, generator=g, device="cuda", dtype=dtype)


def _forward_shape(batch: int, n: int, dtype_name: str, repeats: int) -> list[dict]:
    """The rows of one shape: operator and softmax times, and their ratio, per ``rho``."""
    import torch

    from proofs_check.operators import causal_ot_attention

    s = _scores(batch, n, getattr(torch, dtype_name))
    upper = torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1)

    def softmax():
        return torch.softmax(s.masked_fill(upper, -torch.inf), -1)

    rows = []
    for rho in RHOS:
        t_ot, t_sm = _median_times([lambda r=rho: causal_ot_attention(s, r), softmax], repeats)
        info = causal_ot_attention(s, rho).info
        rows.append({"case": f"forward {dtype_name}", "batch_heads": batch, "n": n, "rho": rho,
                     "ot_ms": 1e3 * t_ot, "softmax_ms": 1e3 * t_sm, "ratio": t_ot / t_sm,
                     "newton_steps": info.sweeps})
    return rows


def forward_rows(shapes, dtype_name: str, repeats: int) -> list[dict]:
    """One row per (shape, rho), shapes ``(batch x heads, n)``."""
    import torch

    rows = []
    for batch, n in shapes:
        rows += _forward_shape(batch, n, dtype_name, repeats)
        torch.cuda.empty_cache()
    return rows


def backward_rows(batch: int, n: int, repeats: int) -> list[dict]:
    """Forward + backward of the operator against the masked softmax's, float32."""
    import torch

    from proofs_check.operators import causal_ot_attention

    s = _scores(batch, n, torch.float32).requires_grad_(True)
    g = _scores(batch, n, torch.float32, seed=1)
    upper = torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1)

    def softmax_fb():
        w = torch.softmax(s.masked_fill(upper, -torch.inf), -1)
        (w * g).sum().backward()
        s.grad = None

    rows = []
    for rho in RHOS:
        def ot_fb(r=rho):
            (causal_ot_attention(s, r).weights * g).sum().backward()
            s.grad = None

        t_ot, t_sm = _median_times([ot_fb, softmax_fb], repeats)
        rows.append({"case": "forward+backward float32", "batch_heads": batch, "n": n,
                     "rho": rho, "ot_ms": 1e3 * t_ot, "softmax_ms": 1e3 * t_sm,
                     "ratio": t_ot / t_sm})
    return rows


def accuracy_rows(batch: int, n: int) -> list[dict]:
    """GPU weights against the compiled CPU kernel in float64 (same scores)."""
    import torch

    from proofs_check.operators import causal_ot_attention

    rows = []
    s = _scores(batch, n, torch.float64)
    for rho in RHOS:
        ref = causal_ot_attention(s.cpu(), rho, tol=1e-13).weights
        for dtype in (torch.float32, torch.float64):
            w = causal_ot_attention(s.to(dtype), rho).weights.cpu().double()
            rows.append({"case": f"accuracy {str(dtype)[6:]}", "batch_heads": batch, "n": n,
                         "rho": rho, "max_abs_error": (w - ref).abs().max().item(),
                         "max_row_sum_error": (w.sum(-1) - 1).abs().max().item()})
    return rows


def run(quick: bool = False) -> list[dict]:
    """Every row of the module docstring, each naming the device and the versions; raises
    RuntimeError without a CUDA device."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: the CUDA operator benchmark needs one")
    import triton

    device = {"device": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
              "triton": triton.__version__}
    rep = 1 if quick else 5
    if quick:
        rows = forward_rows([(8, 512), (8, 1024)], "float32", rep)
        rows += accuracy_rows(2, 512)
    else:
        rows = forward_rows([(8, 512), (8, 1024), (64, 4096), (8, 8192)], "float32", rep)
        rows += backward_rows(64, 4096, rep)
        rows += forward_rows([(8, 2048)], "float64", rep)
        rows += accuracy_rows(8, 2048)
    return [{**row, **device} for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.operators_cuda")
    parser.add_argument("--quick", action="store_true", help="n <= 1024, one repeat")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        result = run(args.quick)
    except RuntimeError as exc:
        print(f"python -m benchmarks.operators_cuda: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for row in result:
            print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                            for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

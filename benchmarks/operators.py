"""Benchmark of the causal OT operator (issue 4 "Speed and memory"; THEORY §2).

``python -m benchmarks.operators [--quick] [--json] [--stream-n N] [--skip-stream]``

Dense part: at ``n in {512, 2048}``, ``rho in {0.3, 0.6, 0.9, 0.99}``, float32 and float64, each
method's iterations (sweeps, or Newton steps per row for ``exact``) and wall time to the dtype's
default tolerance (``1e-10`` float64, ``1e-5`` float32), and the ratio to one masked softmax at
the same ``n`` and dtype (best of 5). Plain sweeps are capped (``--sinkhorn-cap``); a capped run
is reported with ``converged: false``.

Streaming part: the constant-score operator's rows up to ``n = 65536`` in a child process
(one torch thread), wall time and peak resident memory above the child's baseline, against the
dense ``n^2`` float64 footprint. Timings on a shared 2-core machine are noisy: treat them as
upper bounds.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings


def _softmax_time(n: int, dtype, repeats: int = 5) -> float:
    import torch

    s = torch.randn(n, n, dtype=dtype)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        best = min(best, time.perf_counter() - t0)
    return best


def dense_rows(ns, rhos, dtypes, methods, sinkhorn_cap: int) -> list[dict]:
    import torch

    from proofs_check.operators import ConvergenceWarning, causal_ot_attention

    out = []
    for n in ns:
        g = torch.Generator().manual_seed(n)
        base = torch.randn(n, n, generator=g, dtype=torch.float64)
        for dtype in dtypes:
            sm = _softmax_time(n, dtype)
            s = base.to(dtype)
            for rho in rhos:
                for method in methods:
                    cap = sinkhorn_cap if method == "sinkhorn" else None
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        res = causal_ot_attention(s, rho, method=method, max_iter=cap)
                    wall = time.perf_counter() - t0
                    row = {
                        "n": n,
                        "dtype": str(dtype).replace("torch.", ""),
                        "rho": rho,
                        "method": method,
                        "iterations": res.info.sweeps,
                        "converged": res.info.converged,
                        "residual": res.info.residual,
                        "tol": res.info.tol,
                        "wall_s": wall,
                        "softmax_s": sm,
                        "ratio_to_softmax": wall / sm,
                    }
                    out.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def _stream_child(n: int) -> None:
    import torch

    torch.set_num_threads(1)
    from proofs_check.operators import stream_causal_ot

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    last = None
    for _, row in stream_causal_ot(n, 1 / 3):
        last = row
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "n": n, "rho": 1 / 3, "wall_s": wall,
        # ru_maxrss is KiB on Linux and a high-water mark: 0 above the baseline means the
        # solver never exceeded the peak reached while importing torch (its own buffers are
        # O(n): a few vectors of n floats)
        "peak_rss_above_baseline_bytes": (peak - base) * 1024,
        "baseline_peak_rss_bytes": base * 1024,
        "solver_state_bytes": 8 * n,  # the column masses C[l-1, :], float64
        "dense_float64_bytes": 8 * n * n,
        "last_row_sum": float(last.sum()),
    }))


def stream_row(n: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.operators", "--stream-child", str(n)],
        capture_output=True, text=True, check=True,
    )
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["memory_ratio_to_dense"] = row["peak_rss_above_baseline_bytes"] / row["dense_float64_bytes"]
    return row


def run(quick: bool = False, *, stream_n: int | None = None, skip_stream: bool = False,
        sinkhorn_cap: int = 400) -> list[dict]:
    """Run the benchmark; returns one dict per measurement (dense rows, then the stream row)."""
    import torch

    if quick:
        ns, rhos = [128, 256], [0.3, 0.9, 0.99]
    else:
        ns, rhos = [512, 2048], [0.3, 0.6, 0.9, 0.99]
    rows = dense_rows(ns, rhos, [torch.float64, torch.float32],
                      ["sinkhorn", "anderson", "exact"], sinkhorn_cap)
    if not skip_stream:
        rows.append(stream_row(stream_n or (2048 if quick else 65536)))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.operators", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes (seconds, not minutes)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.add_argument("--stream-n", type=int, default=None)
    p.add_argument("--skip-stream", action="store_true")
    p.add_argument("--sinkhorn-cap", type=int, default=400)
    p.add_argument("--stream-child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.stream_child is not None:
        _stream_child(args.stream_child)
        return 0
    rows = run(args.quick, stream_n=args.stream_n, skip_stream=args.skip_stream,
               sinkhorn_cap=args.sinkhorn_cap)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        if "method" in r:
            print(f"n={r['n']:5d} {r['dtype']:7s} rho={r['rho']:<4} {r['method']:8s} "
                  f"iters={r['iterations']:5d} conv={r['converged']!s:5s} "
                  f"wall={r['wall_s']:8.3f}s ({r['ratio_to_softmax']:9.1f}x softmax)")
        else:
            print(f"stream n={r['n']} rho=1/3: {r['wall_s']:.1f} s, peak RSS +"
                  f"{r['peak_rss_above_baseline_bytes'] / 2**20:.1f} MiB vs dense "
                  f"{r['dense_float64_bytes'] / 2**30:.1f} GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark of the causal OT operator against masked softmax (docs/theory.md §2).

``python -m benchmarks.operators [--quick] [--json] [--skip-stream] [--stream-n N]
[--stream-rhos R,R,...] [--methods M,M,...]``

Dense part: ``causal_ot_attention`` (default ``method="newton"``: the compiled row solver on
CPU) at ``n in {512, 1024, 2048}`` (1 and 8 heads) and ``4096`` (1 head),
``rho in {0.3, 0.9, 0.99}``, float64
(tol ``1e-10``) and float32 (tol ``1e-5``), i.i.d. N(0, 1) scores; the ratio is the median of
5 calls over the median of 5 masked softmaxes (``torch.softmax(s.masked_fill(upper, -inf))``)
of the same shape and dtype, timed interleaved in the same process after three warm-up calls
each, and after eight untimed masked softmaxes of each shape and dtype and three untimed
rounds of both.

The allocator is held warm (:func:`warm_allocator`): with glibc's default, dynamic mmap
threshold a freshly allocated output of a few MB is sometimes served by ``mmap`` and pays a
page fault per 4 KiB page, sometimes from the heap, depending on what ran before, which makes
the softmax baseline move by several times. Both sides run with a fixed threshold of 1 GiB and
no trimming: each is timed as the arithmetic and memory traffic it does, not its page faults.
Newton rows also record ``team_rows``: in one more, untimed call, the rows the kernel's team of
two shared (one head on two or more threads: ``n - team_from + 1`` if it held, fewer if it
dissolved), with ``team_from``, the first row it shared, and ``exchange_ns``, the cost of one
exchange between its workers that the kernel measured in that call and chose ``team_from`` by
(256 where exchanges are cheap, later where they are not; ``team_start_row`` in
``proofs_check/operators/causal_ot/csrc/team.h``).
Forward plus backward: the same ratio for ``(w * g).sum().backward()`` at ``n = 2048``, 8 heads
(after three untimed rounds of both).
Other methods (``sinkhorn``, ``anderson``: Lemma 2.2 sweeps) at ``n = 512`` for comparison.

Streaming part: the constant-score operator's rows up to ``n = 65536`` in a child process
(one torch thread), wall time and peak resident memory above the child's baseline, against the
dense ``n^2`` float64 footprint. On a shared 2-core machine read each ratio as +-30%.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import warnings


def warm_allocator() -> str:
    """Serve allocations up to 1 GiB from glibc's heap and never trim it; what was done.

    ``mallopt(M_MMAP_THRESHOLD, 2^30)`` (which also switches off the dynamic threshold) and
    ``mallopt(M_TRIM_THRESHOLD, 2^31 - 1)``: after a warm-up, an output buffer is memory the
    process already has, for the operator and the softmax alike. Not glibc: nothing is done.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return "default (no glibc mallopt)"
    m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's malloc.h
    ok = mallopt(m_mmap_threshold, 1 << 30) == 1 and mallopt(m_trim_threshold, (1 << 31) - 1) == 1
    return "warm (glibc mmap threshold 1 GiB, no trim)" if ok else "default (mallopt refused)"


def _median_interleaved(fns, repeats: int = 5, warmup: int = 3) -> list[float]:
    """Median wall time of each function, run round-robin ``repeats`` times after warm-ups."""
    for _ in range(warmup):
        for f in fns:
            f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def _masked_softmax_fn(s, mask):
    import torch

    return lambda: torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)


def _team_rows(s, rho: float, tol: float, team_options=None) -> dict:
    """What the compiled kernel's team of two did in one more (untimed) call.

    ``team_rows``: the rows it solved together, non-zero only for one head on two or more
    threads; fewer than ``n - team_from + 1`` means the team dissolved on the way (its workers
    waited too long at their exchanges: a busy machine). ``team_from``: its first shared row
    (at most ``n``), ``exchange_ns``: the exchange's cost it was chosen from (both 0 without a
    team). All None without the compiled kernel. ``team_options``: the kernel's
    ``KernelOptions`` for this call (default: the operator's).
    """
    from proofs_check.operators.causal_ot import _compiled

    if _compiled.load_extension() is None:
        return {"team_rows": None, "team_from": None, "exchange_ns": None}
    _, stats = _compiled.forward(s, rho, tol, 100, team_options or _compiled.DEFAULT_OPTIONS)
    return {"team_rows": sum(stats.team_rows), "team_from": max(stats.team_from),
            "exchange_ns": max(stats.exchange_ns)}


def dense_rows(ns, rhos, dtypes, methods, sinkhorn_cap: int = 400, heads=(1,),
               repeats: int = 5, team_options=None) -> list[dict]:
    """One row per (n, heads, dtype, rho, method): iterations, wall time, ratio to softmax.

    ``team_options``: the kernel options of the untimed call that reports the team
    (:func:`_team_rows`; tests pin the team's rules with it).
    """
    import torch

    from proofs_check.operators import ConvergenceWarning, causal_ot_attention

    allocator = warm_allocator()
    out = []
    for n in ns:
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        # untimed: a new size's first masked softmaxes run at about half speed for about eight
        # calls even with the warm allocator, so that is paid here, not by the first timed row
        big = torch.randn(max(heads), n, n, dtype=torch.float64)
        for _ in range(8):
            _masked_softmax_fn(big, mask)()
        del big
        for h in heads:
            g = torch.Generator().manual_seed(n + h)
            base = torch.randn(h, n, n, generator=g, dtype=torch.float64)
            for dtype in dtypes:
                s = base.to(dtype)
                # untimed, again for each shape and dtype, softmaxes and then both sides in
                # turn: after the rows of another shape the first row's softmax (and the
                # operator) can run up to twice slower, which would flatter the first ratio
                for _ in range(8):
                    _masked_softmax_fn(s, mask)()
                for _ in range(3):
                    _masked_softmax_fn(s, mask)()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        causal_ot_attention(s, rhos[0], method=methods[0], max_iter=sinkhorn_cap
                                            if methods[0] in ("sinkhorn", "anderson") else None)
                for rho in rhos:
                    for method in methods:
                        cap = sinkhorn_cap if method in ("sinkhorn", "anderson") else None
                        holder = {}

                        def op(s=s, rho=rho, method=method, cap=cap, holder=holder):
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore", ConvergenceWarning)
                                holder["res"] = causal_ot_attention(s, rho, method=method,
                                                                    max_iter=cap)

                        reps = repeats if method not in ("sinkhorn", "anderson") else 1
                        sm, wall = _median_interleaved([_masked_softmax_fn(s, mask), op], reps)
                        res = holder["res"]
                        row = {
                            "n": n, "heads": h, "dtype": str(dtype).replace("torch.", ""),
                            "rho": rho, "method": method,
                            "iterations": res.info.sweeps, "converged": res.info.converged,
                            "residual": res.info.residual, "tol": res.info.tol,
                            "wall_s": wall, "softmax_s": sm, "ratio_to_softmax": wall / sm,
                            "threads": torch.get_num_threads(), "allocator": allocator,
                        }
                        if method == "newton":
                            row.update(_team_rows(s, rho, res.info.tol, team_options))
                        out.append(row)
                        print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def backward_rows(n: int, heads: int, rhos, dtype_name: str = "float64",
                  repeats: int = 5) -> list[dict]:
    """Forward + backward of ``(w * g).sum()`` against the same for masked softmax."""
    import torch

    from proofs_check.operators import causal_ot_attention

    allocator = warm_allocator()
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(7)
    base = torch.randn(heads, n, n, generator=gen, dtype=dtype)
    upstream = torch.randn(heads, n, n, generator=gen, dtype=dtype)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    out = []

    def sm_fb():
        s = base.clone().requires_grad_(True)
        (torch.softmax(s.masked_fill(mask, float("-inf")), -1) * upstream).sum().backward()

    def ot_fb(rho):
        s = base.clone().requires_grad_(True)
        (causal_ot_attention(s, rho).weights * upstream).sum().backward()

    # untimed, as in dense_rows: run after the dense rows, the first softmax forward plus
    # backward can take several times the next ones, which would make the first ratio wrong
    for _ in range(3):
        sm_fb()
        ot_fb(rhos[0])
    for rho in rhos:
        sm, wall = _median_interleaved([sm_fb, lambda rho=rho: ot_fb(rho)], repeats)
        row = {"n": n, "heads": heads, "dtype": dtype_name, "rho": rho,
               "method": "newton fwd+bwd", "wall_s": wall, "softmax_s": sm,
               "ratio_to_softmax": wall / sm, "threads": torch.get_num_threads(),
               "allocator": allocator}
        out.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def _rss_now_and_peak() -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of this process in bytes from ``/proc/self/status``; None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        return (int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024)
    except (OSError, KeyError, ValueError):
        return None


def _reset_peak_rss() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux ``clear_refs`` 5); whether it did."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _stream_child(n: int, rho: float) -> None:
    import torch

    torch.set_num_threads(1)
    from proofs_check.operators import stream_causal_ot
    from proofs_check.operators.causal_ot._compiled import load_extension

    compiled = load_extension() is not None
    # The peak is this process's own high-water mark, reset here to its RSS after the imports
    # (Linux: VmHWM after clear_refs). Not ru_maxrss: Linux carries it across fork and exec,
    # so a child of the benchmark (a parent at ~5 GB after the dense rows) started at the
    # parent's peak and reported 0 growth whatever the stream did.
    how = "VmHWM after clear_refs" if _reset_peak_rss() and _rss_now_and_peak() else "ru_maxrss"
    if how == "ru_maxrss":
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    else:
        base = _rss_now_and_peak()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    last = None
    for _, row in stream_causal_ot(n, rho, progress=True):
        last = row
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if how == "ru_maxrss":
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    else:
        peak = _rss_now_and_peak()[1]
    print(json.dumps({
        # cpu_s: this process's CPU time; on a loaded machine wall_s exceeds it
        "n": n, "rho": rho, "wall_s": wall, "cpu_s": cpu, "compiled": compiled, "threads": 1,
        # the stream's peak resident memory above the RSS it started from (the solver's own
        # buffers are O(n): a few vectors of n floats, and one row)
        "peak_rss_above_baseline_bytes": peak - base,
        "baseline_peak_rss_bytes": base,
        "rss_measured_by": how,
        "solver_state_bytes": 16 * n,  # C[l-1, :] and log C[l-1, :], float64
        "dense_float64_bytes": 8 * n * n,
        "last_row_sum": float(last.sum()),
    }))


def stream_row(n: int, rho: float = 1 / 3) -> dict:
    """The stream in a child process with one torch thread (its progress goes to stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.operators", "--stream-child", str(n),
         "--stream-rhos", repr(rho)],
        stdout=subprocess.PIPE, text=True, check=True,
    )
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["memory_ratio_to_dense"] = row["peak_rss_above_baseline_bytes"] / row["dense_float64_bytes"]
    return row


def run(quick: bool = False, *, stream_n: int | None = None, skip_stream: bool = False,
        sinkhorn_cap: int = 400, stream_rhos=(1 / 3, 0.9, 0.99), methods=None) -> list[dict]:
    """Run the benchmark; returns one dict per measurement (dense, backward, then stream)."""
    import torch

    f64, f32 = torch.float64, torch.float32
    if quick:
        rows = dense_rows([128, 256], [0.3, 0.99], [f64, f32], ["newton"], sinkhorn_cap,
                          heads=(1, 2))
        rows += dense_rows([128], [0.9], [f64], ["sinkhorn", "anderson"], sinkhorn_cap)
        rows += backward_rows(256, 2, [0.9])
    else:
        rows = dense_rows([512, 1024, 2048], [0.3, 0.9, 0.99], [f64, f32],
                          methods or ["newton"], sinkhorn_cap, heads=(1, 8))
        # 8 heads at n = 4096 would hold ~4 GB of float64 scores, weights and softmax copies
        rows += dense_rows([4096], [0.3, 0.9, 0.99], [f64, f32], methods or ["newton"],
                           sinkhorn_cap, heads=(1,))
        if methods is None:
            rows += dense_rows([512], [0.3, 0.9, 0.99], [f64], ["sinkhorn", "anderson"],
                               sinkhorn_cap)
        rows += backward_rows(2048, 8, [0.3, 0.9, 0.99])
    if not skip_stream:
        for rho in stream_rhos if not quick else (1 / 3,):
            rows.append(stream_row(stream_n or (2048 if quick else 65536), rho))
    return rows


def _rhos(text: str) -> list[float]:
    """A comma list of ``rho`` in ``[0, 1)`` (the stream's balancing strengths)."""
    from priors.cli import real

    out = [real(r.strip()) for r in text.split(",") if r.strip()]
    if not out or any(not 0.0 <= r < 1.0 for r in out):
        raise ValueError(f"must be a comma list of numbers in [0, 1), got {text!r}")
    return out


def _methods(text: str) -> list[str]:
    """A comma list of the operator's methods."""
    from proofs_check.operators.causal_ot import METHODS

    out = [m.strip() for m in text.split(",")]
    if any(m not in METHODS for m in out):
        raise ValueError(f"must be a comma list from {', '.join(METHODS)}, got {text!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    """The command (module docstring); bad arguments: one line, exit 2 (``priors.cli``)."""
    from priors.cli import run

    return run("python -m benchmarks.operators", _main, argv)


def _main(argv: list[str] | None) -> int:
    from priors.cli import Parser, UsageError, argtype, count

    positive = argtype(lambda t: count(t, minimum=1, maximum=2**31 - 1))
    p = Parser(prog="python -m benchmarks.operators", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes (seconds, not minutes)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.add_argument("--stream-n", type=positive, default=None)
    p.add_argument("--stream-rhos", type=argtype(_rhos), default=None,
                   help="comma list of rho in [0, 1) (default 1/3,0.9,0.99; --quick: 1/3)")
    p.add_argument("--skip-stream", action="store_true")
    p.add_argument("--only-stream", action="store_true", help="only the streaming runs")
    p.add_argument("--methods", type=argtype(_methods), default=None,
                   help="comma list (default: newton; not with --quick)")
    p.add_argument("--sinkhorn-cap", type=positive, default=400)
    p.add_argument("--stream-child", type=positive, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.only_stream and args.skip_stream:
        raise UsageError("--only-stream and --skip-stream contradict each other")
    if args.quick and (args.methods is not None or args.stream_rhos is not None):
        raise UsageError("--quick runs its own methods and stream rho; drop --methods and "
                         "--stream-rhos, or --quick")
    rhos = args.stream_rhos or [1 / 3, 0.9, 0.99]
    if args.stream_child is not None:
        _stream_child(args.stream_child, rhos[0])
        return 0
    if args.only_stream:
        rows = [stream_row(args.stream_n or 65536, rho) for rho in rhos]
    else:
        rows = run(args.quick, stream_n=args.stream_n, skip_stream=args.skip_stream,
                   sinkhorn_cap=args.sinkhorn_cap, stream_rhos=rhos, methods=args.methods)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        if "method" in r:
            extra = (f"iters={r['iterations']:5d} conv={r['converged']!s:5s} "
                     if "iterations" in r else "")
            if r.get("team_rows"):
                extra += (f"team rows={r['team_rows']:5d} from {r['team_from']} "
                          f"({r['exchange_ns']:.0f} ns/exchange) ")
            print(f"n={r['n']:5d} h={r['heads']} {r['dtype']:7s} rho={r['rho']:<4} "
                  f"{r['method']:14s} {extra}wall={r['wall_s']:8.4f}s "
                  f"({r['ratio_to_softmax']:6.2f}x masked softmax)")
        else:
            print(f"stream n={r['n']} rho={r['rho']:.4g}: {r['wall_s']:.1f} s wall, "
                  f"{r.get('cpu_s', float('nan')):.1f} s CPU (1 thread), "
                  f"peak RSS +{r['peak_rss_above_baseline_bytes'] / 2**20:.1f} MiB vs dense "
                  f"{r['dense_float64_bytes'] / 2**30:.1f} GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

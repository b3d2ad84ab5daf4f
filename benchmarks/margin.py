"""Benchmark of ``python -m priors.margin`` against a naive direct-summation search.

What is measured (wall clock, whole process from start to exit, ``subprocess.run``):

* ``margin``: ``python -m priors.margin --window 512 --lmax L1 --tol 0.1 --json`` at
  ``L1 = 65536`` and ``1e15``;
* ``margin-table``: one process printing a 100-setting table (5 windows x 5 lengths x
  4 tolerances, lengths up to 1e15);
* ``naive``: a process that imports numpy, sums the partial sums directly in float64
  (``S_m = sum_{k<=m} k^-alpha`` as an array of ``L1`` terms) and bisects
  ``G(1 + delta) - tol`` on ``[0, 4]`` to relative width 1e-9 (assuming ``G`` monotone,
  ``B = 0``, ``L0 = W``), at ``L1 = 65536`` and ``1e7`` (beyond, the ``L1``-term arrays
  make it impractical: its cost grows linearly with ``L1``).

Each timing is the median of ``repeats`` runs after one warm-up run, with min and max.
The machine is shared: treat the numbers as noisy. Run alone with
``python -m benchmarks.margin [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_NAIVE = """
import sys, numpy as np
w, l1, tol = int(sys.argv[1]), int(float(sys.argv[2])), float(sys.argv[3])
k = np.arange(1, l1 + 1, dtype=np.float64)
def growth(delta):
    t = k ** -(1.0 + delta)
    s_w = t[:w].sum()
    tail = t[w:].sum()
    return tail / (s_w + tail)
lo, hi = 0.0, 4.0
if growth(lo) <= tol:
    print(0.0); sys.exit(0)
while hi - lo > 1e-9 * hi:
    mid = 0.5 * (lo + hi)
    if growth(mid) > tol:
        lo = mid
    else:
        hi = mid
print(repr(hi))
"""


def _time_process(argv: list[str], repeats: int) -> tuple[list[float], list[float], str]:
    """Wall and CPU (user + sys of the child) times of ``repeats`` runs after one warm-up."""
    out = ""
    walls, cpus = [], []
    for i in range(repeats + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True)
        elapsed = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = proc.stdout
        if i > 0:
            walls.append(elapsed)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus, out


def _row(
    name: str, setting: str, timing: tuple[list[float], list[float], str], **extra: object
) -> dict[str, object]:
    walls, cpus, _ = timing
    return {
        "name": name,
        "setting": setting,
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "cpu_median_s": statistics.median(cpus),
        "repeats": len(walls),
        **extra,
    }


def run(quick: bool = False) -> list[dict]:
    """Run the benchmark; one dict per measurement (times in seconds)."""
    repeats = 5 if quick else 9
    py = sys.executable
    rows: list[dict] = []
    ours: dict[str, float] = {}
    for lmax in ("65536", "1e7", "1e15"):
        timing = _time_process(
            [py, "-m", "priors.margin", "--window", "512", "--lmax", lmax, "--tol", "0.1",
             "--json"],
            repeats,
        )
        result = json.loads(timing[2])
        ours[lmax] = result["delta"]
        rows.append(_row("margin", f"W=512 L1={lmax} tol=0.1", timing, delta=result["delta"],
                         evaluations=result["evaluations"]))
    table_args = [
        "--window", "16", "64", "256", "512", "1024",
        "--lmax", "4096", "65536", "1e6", "1e9", "1e15",
        "--tol", "0.01", "0.05", "0.1", "0.2",
    ]
    timing = _time_process(
        [py, "-m", "priors.margin", *table_args, "--json"], max(1, repeats // 3)
    )
    n_settings = len(json.loads(timing[2]))
    rows.append(_row("margin-table", f"{n_settings} settings, L1 up to 1e15", timing))
    naive_sizes = ("65536",) if quick else ("65536", "1e7")
    for lmax in naive_sizes:
        timing = _time_process(
            [py, "-c", _NAIVE, "512", lmax, "0.1"], 1 if lmax == "1e7" else repeats
        )
        delta = float(timing[2])
        reference = ours.get(lmax)
        extra: dict[str, object] = {"delta": delta}
        if reference is not None:
            extra["abs_diff_vs_margin"] = abs(delta - reference)
        rows.append(_row("naive", f"W=512 L1={lmax} tol=0.1", timing, **extra))
    return rows


def _print(rows: list[dict]) -> None:
    print(f"{'name':14s} {'setting':38s} {'median s':>9s} {'min s':>8s} {'max s':>8s} "
          f"{'cpu s':>7s} {'runs':>4s}  delta*")
    for r in rows:
        delta = r.get("delta")
        delta_text = "" if delta is None else f"{delta:.12g}"
        print(f"{r['name']:14s} {r['setting']:38s} {r['median_s']:9.3f} {r['min_s']:8.3f} "
              f"{r['max_s']:8.3f} {r['cpu_median_s']:7.3f} {r['repeats']:>4d}  {delta_text}")
    print("(seconds, whole process, 3 decimals; median/min/max are wall clock, cpu s the "
          "median user+sys of the child; shared machine: wall times are noisy; "
          "delta* to 12 significant digits)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.margin")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no 1e7 baseline")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run(quick=args.quick)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        _print(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

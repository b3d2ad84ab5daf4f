"""``python -m benchmarks``: measure what a user pays, beside the naive alternative.

Collects ``run(quick)`` from ``benchmarks.margin``, ``benchmarks.masses`` and
``benchmarks.operators``, times ``python -m proofs_check`` and ``python paper_figs.py`` end to
end, prints one table per area and writes ``benchmarks/results.json`` (atomically) with the
machine description. Timings are medians of at least 5 runs after a warm-up (each area's own
module states its repeats), with min and max beside them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AREAS = ("margin", "masses", "operators", "end_to_end", "diagnose")


def describe_machine() -> dict[str, Any]:
    """CPU, cores, library versions and BLAS threads of this run."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for name in ("numpy", "scipy", "mpmath", "flint", "torch"):
        try:
            module = importlib.import_module(name)
            info[name] = getattr(module, "__version__", "?")
        except ImportError:
            info[name] = None
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            {k: d.get(k) for k in ("internal_api", "num_threads", "version")}
            for d in threadpool_info()
        ]
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    for var in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if var in os.environ:
            info[var] = os.environ[var]
    return info


def _time_command(argv: list[str], repeats: int) -> dict[str, Any]:
    """Wall time of a whole command (start to exit), median of ``repeats`` after no warm-up."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": repeats,
    }


def run_end_to_end(quick: bool) -> list[dict[str, Any]]:
    """``python -m proofs_check`` and ``python paper_figs.py`` end to end (one run each)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("proofs_check", [sys.executable, "-m", "proofs_check", "--json"]),
            ("paper_figs", [sys.executable, "paper_figs.py", "--out", tmp]
             + (["--quick"] if quick else [])),
        ]
        if quick:
            cases[0][1].extend(["--only", "§2"])
        for name, argv in cases:
            row = {"benchmark": "end_to_end", "case": name, "command": " ".join(argv[1:])}
            row.update(_time_command(argv, repeats=1))
            rows.append(row)
    return rows


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def print_table(area: str, rows: list[dict[str, Any]]) -> None:
    """One plain-text table per area, columns = union of the rows' keys (floats at 4 digits)."""
    print(f"\n== {area} ==")
    if not rows:
        print("(no rows)")
        return
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    cells = [[_format_value(row.get(k, "")) for k in keys] for row in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))


class _BadArguments(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line (raised, turned into exit 2)."""

    def error(self, message: str):  # type: ignore[override]
        raise _BadArguments(message)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run (small sizes, few repeats)")
    parser.add_argument("--only", default=",".join(AREAS), help=f"comma list from {AREAS}")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results.json"))
    try:
        args = parser.parse_args(argv)
    except _BadArguments as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    areas = [a.strip() for a in args.only.split(",") if a.strip()]
    unknown = [a for a in areas if a not in AREAS]
    if unknown:
        print(f"error: --only: unknown area(s) {unknown}; choose from {AREAS}", file=sys.stderr)
        return 2
    results: dict[str, Any] = {"machine": describe_machine(), "quick": args.quick, "areas": {}}
    for area in areas:
        print(f"[benchmarks] {area} ...", file=sys.stderr, flush=True)
        if area == "end_to_end":
            rows = run_end_to_end(args.quick)
        else:
            rows = importlib.import_module(f"benchmarks.{area}").run(quick=args.quick)
        results["areas"][area] = rows
        print_table(area, rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp") as fh:
        json.dump(results, fh, indent=2, default=str)
        tmp_name = fh.name
    os.replace(tmp_name, out)
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

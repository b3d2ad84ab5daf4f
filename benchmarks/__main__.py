"""``python -m benchmarks``: measure what a user pays, beside the naive alternative.

Collects ``run(quick)`` from ``benchmarks.margin``, ``benchmarks.masses``,
``benchmarks.operators``, ``benchmarks.diagnose`` and, where a CUDA device is present,
``benchmarks.operators_cuda`` (named in ``--only`` without one: refused), times
``python -m proofs_check`` and ``python paper_figs.py`` end to end, prints one table per
area and writes the results file with the machine description
(``machine``: this run's; ``machine_by_area``: each area's, since ``--only`` keeps the areas
measured in earlier runs, possibly on another machine). Timings are medians of at least 5
runs after a warm-up (each area's own module states its repeats), with min and max beside
them.

The results file (``--out``) follows the file policy of ``priors.cli``, checked before any
benchmark runs: a regular ``.json`` file (or none yet) in a writable directory; a previous
file is read with a size cap (``RESULTS_LIMIT``) and its form checked (``RESULTS_SHAPE``), so
a device, a FIFO, a directory or a file this command did not write is refused by name, and
the new file replaces it atomically. A file holds the numbers of one kind of run only
(``"quick"``): a full run goes to ``benchmarks/results.json`` by default, a ``--quick`` run to
``benchmarks/results_quick.json``, and a run whose kind differs from the file's is refused,
so a quick run never overwrites or mixes into full-run numbers.
"""

from __future__ import annotations

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

from priors.cli import (
    ListOf,
    MapOf,
    OutputError,
    Parser,
    PathError,
    Record,
    UsageError,
    check_output_file,
    echo,
    emit,
    progress,
    read_json_file,
    run,
    write_atomic,
)

ROOT = Path(__file__).resolve().parent.parent
AREAS = ("margin", "masses", "operators", "end_to_end", "diagnose", "operators_cuda")
#: Areas that need a CUDA device: left out of a run without one, refused when named in --only.
CUDA_AREAS = ("operators_cuda",)
#: Where a full run and a ``--quick`` run write by default (never the same file).
DEFAULT_OUT = {False: ROOT / "benchmarks" / "results.json",
               True: ROOT / "benchmarks" / "results_quick.json"}
#: Largest previous results file read (bytes; the full file is about 50 KB).
RESULTS_LIMIT = 1 << 24
#: The form of a results file this command writes (what a previous one must have).
RESULTS_SHAPE = Record(
    required={"quick": bool, "areas": MapOf(ListOf(dict))},
    optional={"machine": (dict, type(None)), "machine_by_area": MapOf((dict, type(None))),
              "notes": MapOf(str), "recorded_runs": ListOf(dict)},
)


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
    lines = [f"\n== {area} =="]
    if not rows:
        emit("\n".join([*lines, "(no rows)"]))
        return
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    cells = [[_format_value(row.get(k, "")) for k in keys] for row in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines.append("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    for c in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))
    emit("\n".join(lines))


PROG = "benchmarks"


def _previous_results(out: Path, quick: bool) -> dict[str, Any]:
    """What ``out`` already holds (``{}`` if nothing): read with the size cap and form
    check of ``read_json_file`` and refused (``PathError``) if it holds the other kind of
    run (module docstring)."""
    data = read_json_file(out, "--out", limit=RESULTS_LIMIT, shape=RESULTS_SHAPE)
    if data is None:
        return {}
    if data["quick"] != quick:
        held, this = ("--quick", "a full") if data["quick"] else ("full-run", "a --quick")
        raise PathError("--out", (
            f"{echo(str(out), 200)} holds {held} results and {this} run does not replace or "
            f"mix into them; name another --out (a --quick run writes "
            f"{DEFAULT_OUT[True]} by default)"
        ))
    return data


def _print_readme(out: Path) -> int:
    """``--readme``: the README block of ``benchmarks.readme`` from the results in ``out``."""
    from benchmarks.readme import readme_block

    results = read_json_file(out, "--out", limit=RESULTS_LIMIT, shape=RESULTS_SHAPE)
    if not results:
        raise UsageError(f"--readme: no benchmark results in {echo(str(out))}")
    try:
        block = readme_block(results)
    except ValueError as exc:
        raise UsageError(f"--readme: {echo(str(out))}: {exc}") from None
    emit(block)
    return 0


def _areas(only: str | None) -> list[str]:
    """The areas to run: ``--only``'s, checked (a CUDA area without a device refused), or
    every area, the CUDA ones only where a CUDA device is present."""
    import torch

    if only is None:
        return [a for a in AREAS if a not in CUDA_AREAS or torch.cuda.is_available()]
    items = [a.strip() for a in only.split(",")]
    if not only.strip() or any(not a for a in items):
        raise UsageError(f"--only: empty area in {echo(only)}; choose from {AREAS}")
    unknown = [a for a in items if a not in AREAS]
    if unknown:
        raise UsageError(f"--only: unknown area(s) {echo(unknown)}; choose from {AREAS}")
    if not torch.cuda.is_available() and any(a in CUDA_AREAS for a in items):
        raise UsageError(f"--only: {', '.join(a for a in items if a in CUDA_AREAS)} needs a "
                         "CUDA device and this machine has none")
    return list(dict.fromkeys(items))


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run (small sizes, few repeats)")
    parser.add_argument("--only", default=None,
                        help=f"comma list from {AREAS} (default: all; the CUDA areas "
                             "where a CUDA device is present)")
    parser.add_argument(
        "--out", default=None,
        help="results file (.json; default benchmarks/results.json, with --quick "
        "benchmarks/results_quick.json); a file of the other kind of run is refused",
    )
    parser.add_argument("--readme", action="store_true",
                        help="print the README's performance tables from the results file "
                             "(--out) and exit; nothing is run or written")
    args = parser.parse_args(argv)
    if args.readme:
        return _print_readme(Path(DEFAULT_OUT[False] if args.out is None else args.out))
    areas = _areas(args.only)
    # before minutes of benchmarks, not after
    out = check_output_file(
        DEFAULT_OUT[args.quick] if args.out is None else args.out, "--out", suffixes=(".json",)
    )
    # --only updates its areas in --out and keeps the others (and any recorded runs and notes);
    # "machine" is this run's, "machine_by_area" where each kept area was measured (areas
    # from a file without it are taken to be the file's "machine")
    results: dict[str, Any] = _previous_results(out, args.quick)
    by_area = results.setdefault("machine_by_area", {})
    for kept in results.get("areas", {}):
        by_area.setdefault(kept, results.get("machine"))
    machine = describe_machine()
    results.update({"machine": machine, "quick": args.quick})
    results.setdefault("areas", {})
    for i, area in enumerate(areas, 1):
        progress(PROG, f"[{i}/{len(areas)}] {area}: running")
        start = time.perf_counter()
        if area == "end_to_end":
            rows = run_end_to_end(args.quick)
        else:
            rows = importlib.import_module(f"benchmarks.{area}").run(quick=args.quick)
        results["areas"][area] = rows
        by_area[area] = machine
        progress(PROG, f"[{i}/{len(areas)}] {area}: done ({time.perf_counter() - start:.1f} s)")
        print_table(area, rows)
    try:
        write_atomic(out, json.dumps(results, indent=2, default=str), "--out")
    except OSError as exc:
        raise OutputError(f"cannot write {echo(str(out), 200)}: {exc.strerror}") from None
    progress(PROG, f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; exit status 0, 2 on bad arguments (one line, nothing run or
    written), 1 when the results cannot be written (``priors.cli`` contract)."""
    return run(PROG, _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())

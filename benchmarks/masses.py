"""Benchmark: exact log-distance window masses cost O(1) in the length n.

What is measured (wall clock of one call, in-process, ``time.perf_counter``):

* ``exact``: ``priors.encodings.LogDistance(alpha).window_mass(W, n)`` at ``dps = 30``;
* ``arb``: the certified ball ``harmonic_number_arb(W)/harmonic_number_arb(n)`` at 128 bits;
* ``brackets``: ``priors.brackets.window_mass_brackets`` (integral and Euler–Maclaurin, Arb);
* ``numpy``: direct float64 summation of ``k^-alpha`` (chunked, 1e7 terms at a time) where
  feasible (n <= 1e6 quick, <= 1e8 full); its cost grows linearly with n.

at ``W = 512``, ``n = 1e3, 1e6, 1e9, 1e15``, for ``alpha = 1.1`` and ``alpha = 1 + 1e-8``
(the cancellation-recovery path). Each timing is the median of ``repeats`` calls after one
warm-up call, with min and max. ``flatness`` rows give ``t(1e15)/t(1e3)`` per method (target:
within 3x). The machine is shared: treat the numbers as noisy. Run alone with
``python -m benchmarks.masses [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import mpmath
import numpy as np

WINDOW = 512
LENGTHS = (10**3, 10**6, 10**9, 10**15)
ALPHAS = (("1.1", 1.1), ("1+1e-8", 1.00000001))
_CHUNK = 10**7


def _timed(fn: Callable[[], object], repeats: int) -> tuple[list[float], object]:
    value = fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return times, value


def _exact_fn(alpha: float) -> Callable[[int, int], mpmath.mpf]:
    from priors.encodings import LogDistance

    enc = LogDistance(alpha=alpha)
    return lambda w, n: enc.window_mass(w, n, dps=30)


def _arb_fn(alpha: float) -> Callable[[int, int], object]:
    from priors.harmonic import harmonic_number_arb

    return lambda w, n: harmonic_number_arb(w, alpha) / harmonic_number_arb(n, alpha)


def _brackets_fn(alpha: float) -> Callable[[int, int], object]:
    from priors.brackets import window_mass_brackets

    return lambda w, n: window_mass_brackets(w, n, alpha)["euler_maclaurin"]


def _numpy_mass(w: int, n: int, alpha: float) -> float:
    """Direct float64 summation, chunked so memory stays bounded."""
    s_w = float(np.sum(np.arange(1, w + 1, dtype=np.float64) ** -alpha))
    total = 0.0
    for start in range(1, n + 1, _CHUNK):
        k = np.arange(start, min(start + _CHUNK, n + 1), dtype=np.float64)
        total += float(np.sum(k**-alpha))
    return s_w / total


def _row(method: str, label: str, n: int, times: list[float], **extra: object) -> dict:
    return {
        "name": method,
        "setting": f"W={WINDOW} n={n:.0e} alpha={label}",
        "n": n,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "repeats": len(times),
        **extra,
    }


def run(quick: bool = False) -> list[dict]:
    """Run the benchmark; one dict per measurement (times in seconds)."""
    repeats = 5 if quick else 9
    numpy_max = 10**6 if quick else 10**8
    rows: list[dict] = []
    for label, alpha in ALPHAS:
        exact_values: dict[int, mpmath.mpf] = {}
        medians: dict[str, dict[int, float]] = {}
        for method, make in (("exact", _exact_fn), ("arb", _arb_fn), ("brackets", _brackets_fn)):
            fn = make(alpha)
            medians[method] = {}
            for n in LENGTHS:
                times, value = _timed(lambda fn=fn, n=n: fn(WINDOW, n), repeats)
                extra: dict[str, object] = {}
                if method == "exact":
                    exact_values[n] = value
                    extra["value"] = mpmath.nstr(value, 15)
                rows.append(_row(method, label, n, times, **extra))
                medians[method][n] = statistics.median(times)
        for n in LENGTHS:
            if n > numpy_max:
                continue
            times, value = _timed(
                lambda n=n, a=alpha: _numpy_mass(WINDOW, n, a), 1 if n >= 10**8 else repeats
            )
            with mpmath.workdps(30):
                rel = abs(mpmath.mpf(value) / exact_values[n] - 1)
            rows.append(_row("numpy", label, n, times, rel_err=float(rel)))
        for method, by_n in medians.items():
            rows.append(
                {
                    "name": "flatness",
                    "setting": f"{method} alpha={label}: t(1e15)/t(1e3)",
                    "ratio": by_n[LENGTHS[-1]] / by_n[LENGTHS[0]],
                    "within_3x": by_n[LENGTHS[-1]] / by_n[LENGTHS[0]] <= 3,
                }
            )
    return rows


def _print(rows: list[dict]) -> None:
    print(f"{'name':9s} {'setting':34s} {'median ms':>10s} {'min ms':>9s} {'max ms':>9s} "
          f"{'runs':>4s}  note")
    for r in rows:
        if r["name"] == "flatness":
            ok = "yes" if r["within_3x"] else "NO"
            print(f"{'flatness':9s} {r['setting']:34s} ratio {r['ratio']:.2f} (within 3x: {ok})")
            continue
        note = r.get("value", "")
        if "rel_err" in r:
            note = f"rel err vs exact {r['rel_err']:.1e}"
        print(f"{r['name']:9s} {r['setting']:34s} {1e3 * r['median_s']:10.3f} "
              f"{1e3 * r['min_s']:9.3f} {1e3 * r['max_s']:9.3f} {r['repeats']:>4d}  {note}")
    print("(milliseconds per call, 3 decimals, wall clock; values to 15 significant digits; "
          "ratios to 2 decimals; relative errors to 2 significant digits; shared machine: "
          "timings are noisy)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.masses")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, numpy to 1e6 only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run(quick=args.quick)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        _print(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Summaries across seeds, the results file (written atomically) and the text table.

For a variant with seeds ``s = 1..S`` and windows ``i = 1..N``, the paired change in bits
per byte from the training length ``L0`` to length ``L`` is ``d[s, i] = bpb_L - bpb_L0``.
Two standard errors are reported and the larger one is used as ``se``:

* ``se_windows``: of the seed-averaged paired differences ``mean_s d[s, i]`` over the
  windows (``std / sqrt(N)``): the held-out sampling error of the paired design;
* ``se_seeds``: of the per-seed means ``mean_i d[s, i]`` over seeds (``std / sqrt(S)``,
  0 for one seed): the training variability.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

__all__ = [
    "format_details",
    "format_table",
    "summarize_variant",
    "write_json_atomic",
]


def _se(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else 0.0


def summarize_variant(evals: list[dict[str, Any]], *, tol: float | None = None) -> dict[str, Any]:
    """Aggregate the ``evaluate_model`` outputs of one variant over its seeds."""
    lengths = evals[0]["lengths"]
    bpb = np.asarray([[e["bpb"] for e in ev["per_length"]] for ev in evals])  # (S, nL, N)
    l0 = lengths[0]
    per_length = []
    for k, length in enumerate(lengths):
        d = bpb[:, k, :] - bpb[:, 0, :]  # (S, N) paired changes
        se_w, se_s = _se(d.mean(0)), _se(d.mean(1))
        wm = np.asarray([ev["per_length"][k]["window_mass"] for ev in evals])  # (S, layers, H)
        dm = np.asarray([ev["per_length"][k]["distant_mass"] for ev in evals])
        ex = np.asarray([ev["per_length"][k]["exact_window_mass"] for ev in evals])  # (S, H)
        exd = np.asarray([ev["per_length"][k]["exact_distant_mass"] for ev in evals])
        entry: dict[str, Any] = {
            "length": length,
            "bpb": float(bpb[:, k, :].mean()),
            "change": float(d.mean()),
            "se_windows": se_w,
            "se_seeds": se_s,
            "se": max(se_w, se_s),
            "window_mass_per_head": wm.mean(0).tolist(),  # (layers, H)
            "distant_mass_per_head": dm.mean(0).tolist(),
            "exact_window_mass_per_head": ex.mean(0).tolist(),  # (H,)
            "exact_distant_mass_per_head": exd.mean(0).tolist(),
            "window_mass": float(wm.mean()),
            "exact_window_mass": float(ex.mean()),
            "distant_mass": float(dm.mean()),
            "exact_distant_mass": float(exd.mean()),
            "window_mass_se_seeds": _se(wm.mean((1, 2))),
            "content_shift": float(np.abs(wm - ex[:, None, :]).mean()),
        }
        for tag in ("full", "trim"):
            key = f"bracket_{tag}"
            if key in evals[0]["per_length"][k]:
                vals = [ev["per_length"][k][key] for ev in evals]
                entry[key] = {
                    f: float(np.mean([v[f] for v in vals]))
                    for f in ("holds_fraction", "mean_width", "mean_B")
                }
        per_length.append(entry)
    first, last = per_length[0], per_length[-1]
    out: dict[str, Any] = {
        "seeds": len(evals),
        "train_length": l0,
        "per_length": per_length,
        "priors": evals[0]["priors"],
        "classes": sorted({p["class"] for ev in evals for p in ev["priors"]}),
        "distant_growth_measured": last["distant_mass"] - first["distant_mass"],
        "distant_growth_exact": last["exact_distant_mass"] - first["exact_distant_mass"],
        "distant_growth_se_seeds": _se(
            np.asarray([np.mean(ev["per_length"][-1]["distant_mass"])
                        - np.mean(ev["per_length"][0]["distant_mass"]) for ev in evals])
        ),
    }
    if tol is not None:
        out["tol"] = tol
    return out


def write_json_atomic(obj: Any, path: str | os.PathLike[str], name: str = "path") -> None:
    """Write ``obj`` as JSON (sorted keys, one-space indent) to ``path`` atomically, only
    ever over a regular file (``priors.cli.write_atomic``; ``name``: the argument named
    in a refusal)."""
    from priors.cli import write_atomic

    write_atomic(os.fspath(path), json.dumps(obj, indent=1, sort_keys=True) + "\n", name)


def format_table(results: dict[str, Any]) -> str:
    """Plain-text table: per variant class, bpb at ``L0``, change at ``Lmax`` +- se, window
    mass measured (mean over layers and heads) against exact at ``L0`` and ``Lmax``."""
    cfg = results["config"]
    rows = [
        f"window W = {cfg['window']}, training length {cfg['train_length']}, "
        f"longest {cfg['lengths'][-1]}; bpb in bits per byte (float64 sums of float32 "
        f"log-probs, 3 decimals); se = max(paired over windows, over seeds)",
        f"{'variant':<12} {'class':<9} {'bpb@L0':>7} {'change@Lmax':>15} "
        f"{'M meas L0->Lmax':>17} {'M exact L0->Lmax':>17} {'dD meas/exact':>14}",
    ]
    for name, v in results["variants"].items():
        f, last = v["per_length"][0], v["per_length"][-1]
        cls = "/".join(v["classes"])
        rows.append(
            f"{name:<12} {cls:<9} {f['bpb']:7.3f} {last['change']:+8.3f} ± {last['se']:.3f} "
            f"{f['window_mass']:7.3f} -> {last['window_mass']:.3f} "
            f"{f['exact_window_mass']:7.3f} -> {last['exact_window_mass']:.3f} "
            f"{v['distant_growth_measured']:6.3f}/{v['distant_growth_exact']:.3f}"
        )
        rows[-1] += f"  seeds={v['seeds']}"
        if "alpha" in v:
            rows[-1] += f" alpha={v['alpha']:.4f}"
            if "tol" in v:
                rows[-1] += f" tol={v['tol']}"
    return "\n".join(rows)


def format_details(results: dict[str, Any]) -> str:
    """Per variant and length: measured/exact window mass per layer and head, the
    content-score bracket (fraction of rows where it holds, mean width) for the full and
    the trimmed spread, and the mean |measured - exact| (content shift). 3 decimals."""
    rows = []
    for name, v in results["variants"].items():
        rows.append(f"{name} (priors: {', '.join(p['name'] for p in v['priors'])}; "
                    f"class {'/'.join(v['classes'])})")
        for e in v["per_length"]:
            exact = e["exact_window_mass_per_head"]
            heads = " | ".join(
                " ".join(f"{m:.3f}/{x:.3f}" for m, x in zip(layer, exact, strict=True))
                for layer in e["window_mass_per_head"]
            )
            line = f"  L={e['length']:<5} M meas/exact per head (layers split by |): {heads}"
            for tag in ("full", "trim"):
                b = e.get(f"bracket_{tag}")
                if b is not None:
                    line += (f"; bracket {tag}: holds {100 * b['holds_fraction']:.1f}%, "
                             f"width {b['mean_width']:.3f}, B {b['mean_B']:.2f}")
            rows.append(line + f"; content shift {e['content_shift']:.3f}")
    return "\n".join(rows)

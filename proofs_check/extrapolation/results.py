"""Summaries across seeds with bootstrap errors, the results file, and the text tables.

For a variant with seeds ``s = 1..S`` and held-out windows ``i = 1..N`` (window ``i`` in
file ``f(i)``), the paired change in bits per byte at length ``L`` is
``d[s, i] = bpb_L[s, i] - base[s, i]``, ``base`` the sliding ``L0`` baseline of the same
targets (``evaluate``). Reported: the baseline, the mean change, every seed's mean change
and the per-(seed, window) values themselves.

Uncertainty: a two-way bootstrap (:func:`bootstrap_mean`, ``B = 2000`` replicates, fixed
generator) that resamples the seeds with replacement and, independently, the held-out
files with replacement (a drawn file brings all its windows), and recomputes the mean
change. ``se`` is the standard deviation of the replicates (one combined error for
training variability and held-out sampling, windows of one file kept together) and
``ci95`` their 2.5% and 97.5% quantiles. With ``S = 3`` seeds the resampling of seeds
understates their variance by about ``sqrt(2/3)``; the full preset uses more seeds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "BOOTSTRAP_REPLICATES",
    "bootstrap_mean",
    "format_details",
    "format_table",
    "summarize_variant",
    "write_json_atomic",
]

BOOTSTRAP_REPLICATES = 2000
_BOOTSTRAP_SEED = 20261204


def bootstrap_mean(values: np.ndarray, files: Sequence[int], *,
                   replicates: int = BOOTSTRAP_REPLICATES) -> dict[str, Any]:
    """Mean of ``values (S, N)`` and its two-way bootstrap ``se`` and ``ci95`` (module
    docstring); ``files[i]`` is window ``i``'s file."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != len(files) or v.size == 0:
        raise ValueError(f"values must be (seeds, windows) with windows = len(files), got "
                         f"{v.shape} and {len(files)}")
    n_seeds = v.shape[0]
    uniq, inverse = np.unique(np.asarray(files), return_inverse=True)
    rng = np.random.default_rng(_BOOTSTRAP_SEED)
    if n_seeds > 1:
        ws = rng.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), size=replicates)
    else:
        ws = np.ones((replicates, 1))
    cf = rng.multinomial(uniq.size, np.full(uniq.size, 1 / uniq.size), size=replicates)
    u = cf[:, inverse]  # (B, N) weight of each window: how often its file was drawn
    means = np.einsum("bs,sn,bn->b", ws, v, u) / (ws.sum(1) * u.sum(1))
    lo, hi = np.quantile(means, [0.025, 0.975])
    return {"mean": float(v.mean()), "se": float(means.std(ddof=1)),
            "ci95": [float(lo), float(hi)]}


def _mean_over_seeds(evals: list[dict[str, Any]], get: Any) -> list[Any]:
    return np.mean(np.asarray([get(ev) for ev in evals], dtype=np.float64), axis=0).tolist()


def _length_entry(evals: list[dict[str, Any]], k: int, base: np.ndarray,
                  files: Sequence[int]) -> dict[str, Any]:
    ents = [ev["per_length"][k] for ev in evals]
    bpb = np.asarray([e["bpb"] for e in ents])  # (S, N)
    d = bpb - base
    boot = bootstrap_mean(d, files)
    wm = np.asarray([e["window_mass"] for e in ents])  # (S, layers, H)
    ex = np.asarray([e["exact_window_mass"] for e in ents])  # (S, H)
    dil = [e["dilution_per_head"] for e in ents]
    entry: dict[str, Any] = {
        "length": ents[0]["length"],
        "bpb": float(bpb.mean()),
        "bpb_by_seed": bpb.mean(1).tolist(),
        "change": boot["mean"],
        "change_by_seed": d.mean(1).tolist(),
        "se": boot["se"],
        "ci95": boot["ci95"],
        "bpb_by_seed_window": bpb.tolist(),
        "window_mass_per_head": wm.mean(0).tolist(),  # (layers, H)
        "distant_mass_per_head": _mean_over_seeds(
            evals, lambda ev: ev["per_length"][k]["distant_mass"]),
        "exact_window_mass_per_head": ex.mean(0).tolist(),  # (H,)
        "exact_distant_mass_per_head": _mean_over_seeds(
            evals, lambda ev: ev["per_length"][k]["exact_distant_mass"]),
        "window_mass": float(wm.mean()),
        "exact_window_mass": float(ex.mean()),
        "window_mass_windows_by_seed": [e["window_mass_windows"] for e in ents],
        "content_shift": float(np.abs(wm - ex[:, None, :]).mean()),
        "dilution_per_head": None if dil[0] is None else np.mean(dil, axis=0).tolist(),
        "dilution": None if dil[0] is None else float(np.mean(np.min(dil, axis=1))),
    }
    for tag in ("full", "trim"):
        key = f"bracket_{tag}"
        if key in ents[0]:
            entry[key] = {f: float(np.mean([e[key][f] for e in ents]))
                          for f in ("holds_fraction", "mean_width", "mean_B")}
    return entry


def _probe_entry(evals: list[dict[str, Any]], j: int, files: Sequence[int]) -> dict[str, Any]:
    ents = [ev["probe"][j] for ev in evals]
    correct = np.asarray([e["correct"] for e in ents])  # (S, D, N)
    bits = np.asarray([e["bits"] for e in ents])
    dist = np.asarray([e["prior"]["distant_mass"] for e in ents]).mean(0)  # (H, D)
    logw = np.asarray([e["prior"]["log_weight"] for e in ents]).mean(0)
    acc = [bootstrap_mean(correct[:, k, :], files) for k in range(correct.shape[1])]
    return {
        "length": ents[0]["length"],
        "distances": ents[0]["distances"],
        "accuracy": [a["mean"] for a in acc],
        "accuracy_se": [a["se"] for a in acc],
        "accuracy_by_seed": correct.mean(2).tolist(),  # (S, D)
        "bits": bits.mean((0, 2)).tolist(),
        "prior_distant_mass_per_head": dist.tolist(),
        "prior_log_weight_per_head": logw.tolist(),
        "prior_distant_mass_best_head": dist.max(0).tolist(),
        "prior_log_weight_best_head": logw.max(0).tolist(),
    }


def summarize_variant(evals: list[dict[str, Any]], files: Sequence[int],
                      probe_files: Sequence[int] | None = None) -> dict[str, Any]:
    """Aggregate the evaluations of one variant over its seeds (module docstring);
    ``files[i]``: the held-out file of window ``i``; ``probe_files``: those of the probe's
    windows (default ``files``)."""
    probe_files = files if probe_files is None else probe_files
    base = np.asarray([ev["baseline"]["bpb"] for ev in evals])  # (S, N)
    per_length = [_length_entry(evals, k, base, files) for k in range(len(evals[0]["per_length"]))]
    first, last = per_length[0], per_length[-1]
    mass_change = np.asarray(last["window_mass_windows_by_seed"]) - np.asarray(
        first["window_mass_windows_by_seed"])  # (S, N): M(Lmax) - M(L0), per window
    lost = bootstrap_mean(-mass_change, files)
    return {
        "seeds": len(evals),
        "train_length": first["length"],
        "baseline_bpb": float(base.mean()),
        "baseline_bpb_by_seed": base.mean(1).tolist(),
        "baseline_bpb_by_seed_window": base.tolist(),
        "per_length": per_length,
        "probe": [_probe_entry(evals, j, probe_files)
                  for j in range(len(evals[0].get("probe", [])))],
        "priors": evals[0]["priors"],
        "classes": sorted({p["class"] for ev in evals for p in ev["priors"]}),
        "window_mass_lost": lost["mean"],
        "window_mass_lost_se": lost["se"],
        "distant_growth_measured": lost["mean"],
        "distant_growth_exact": first["exact_window_mass"] - last["exact_window_mass"],
        "final_train_loss_bits": float(np.mean([ev["final_train_loss_bits"] for ev in evals])),
    }


def write_json_atomic(obj: Any, path: str | os.PathLike[str], name: str = "path") -> None:
    """Write ``obj`` as JSON (sorted keys, one-space indent; NaN and infinities are not
    JSON and raise ``ValueError``) to ``path`` atomically, only ever over a regular file
    (``priors.cli.write_atomic``; ``name``: the argument named in a refusal)."""
    from priors.cli import write_atomic

    text = json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n"
    write_atomic(os.fspath(path), text, name)


def format_table(results: dict[str, Any]) -> str:
    """Plain-text table: per variant its class, the sliding baseline at ``L0``, the change
    at ``Lmax`` with its bootstrap se, the dilution ``Lambda`` at ``Lmax``, and the window
    mass measured (mean over layers and heads) against exact at ``L0`` and ``Lmax``."""
    cfg = results["config"]
    rows = [
        f"window W = {cfg['window']}, training length {cfg['train_length']}, longest "
        f"{cfg['lengths'][-1]}; bits per byte (float64 sums of float32 log-probs, 3 "
        f"decimals); change = bpb at Lmax - sliding baseline at L0, same targets; se = "
        f"two-way bootstrap over seeds and held-out files",
        f"{'variant':<16} {'class':<9} {'base@L0':>7} {'change@Lmax':>15} {'Lambda':>7} "
        f"{'M meas L0->Lmax':>17} {'M exact L0->Lmax':>17}  seeds",
    ]
    for name, v in results["variants"].items():
        f, last = v["per_length"][0], v["per_length"][-1]
        lam = "-" if last["dilution"] is None else f"{last['dilution']:.3f}"
        rows.append(
            f"{name:<16} {'/'.join(v['classes']):<9} {v['baseline_bpb']:7.3f} "
            f"{last['change']:+8.3f} ± {last['se']:.3f} {lam:>7} "
            f"{f['window_mass']:7.3f} -> {last['window_mass']:.3f} "
            f"{f['exact_window_mass']:7.3f} -> {last['exact_window_mass']:.3f}  {v['seeds']}"
        )
        if "alpha" in v:
            rows[-1] += f" alpha={v['alpha']:.4f}"
    probes = [(n, v["probe"][-1]) for n, v in results["variants"].items() if v["probe"]]
    if probes:
        dists = probes[0][1]["distances"]
        rows.append(f"retrieval accuracy at length {probes[0][1]['length']} by distance "
                    f"(chance 1/16 among the value bytes; 3 decimals):")
        rows.append(f"{'variant':<16} " + " ".join(f"{d:>6}" for d in dists))
        for name, p in probes:
            rows.append(f"{name:<16} " + " ".join(f"{a:6.3f}" for a in p["accuracy"]))
    return "\n".join(rows)


def format_details(results: dict[str, Any]) -> str:
    """Per variant and length: the change with its 95% interval and per seed, the
    measured/exact window mass per layer and head, the content-score bracket (fraction
    of rows where it holds, mean width) for the full and the trimmed spread, and the mean
    |measured - exact| (content shift). 3 decimals."""
    rows = []
    for name, v in results["variants"].items():
        rows.append(f"{name} (priors: {', '.join(p['name'] for p in v['priors'])}; "
                    f"class {'/'.join(v['classes'])}; sliding baseline "
                    f"{v['baseline_bpb']:.3f} bits per byte)")
        for e in v["per_length"]:
            exact = e["exact_window_mass_per_head"]
            heads = " | ".join(
                " ".join(f"{m:.3f}/{x:.3f}" for m, x in zip(layer, exact, strict=True))
                for layer in e["window_mass_per_head"]
            )
            seeds = " ".join(f"{c:+.3f}" for c in e["change_by_seed"])
            line = (f"  L={e['length']:<5} change {e['change']:+.3f} [{e['ci95'][0]:+.3f}, "
                    f"{e['ci95'][1]:+.3f}] (seeds {seeds}); M meas/exact per head (layers "
                    f"split by |): {heads}")
            for tag in ("full", "trim"):
                b = e.get(f"bracket_{tag}")
                if b is not None:
                    line += (f"; bracket {tag}: holds {100 * b['holds_fraction']:.1f}%, "
                             f"width {b['mean_width']:.3f}, B {b['mean_B']:.2f}")
            rows.append(line + f"; content shift {e['content_shift']:.3f}")
    return "\n".join(rows)

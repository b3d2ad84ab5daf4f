"""Regenerate every theory figure of docs/theory.md from the toolkit's own code.

``python paper_figs.py`` writes, for each figure, a PNG and a PDF to ``figures/`` and a
``figures/manifest.json`` that records per figure the numbers plotted (arrays longer than
``_INLINE_MAX`` as a sha256 digest of their float64 bytes plus key values), the parameters
and the versions (python, numpy, torch, mpmath, flint, matplotlib, git commit) that made it.

The figures plot only what ``priors`` and ``proofs_check`` compute: every curve is a call
into the library (window masses, brackets, the margin selector, the operators); this file
adds no mathematics beyond measuring (maxima, differences, a least-squares slope) and the
one-line bounds of Theorem 1 drawn as reference lines.

=================  =======  ===================================================================
name               docs/theory.md   content
=================  =======  ===================================================================
obstruction        §1       trace(P)/n of the batch plan as rho -> 1; prefix leak beside the
                            prefix-consistent operator's (zero)
scale_invariant    §4       f_rho(y) with discrete constant-score rows; Kolmogorov distance K_l
dilution           §3       largest weight and window mass vs l, with the Theorem 1 bound
classification     §5       distant and window mass vs l up to 1e12 for the encodings
near_one           §6       exact window mass vs delta with integral / Euler–Maclaurin brackets
margin             §7       delta* vs lmax; distant-mass growth at the selected margin
=================  =======  ===================================================================

Options: ``--out DIR`` (default ``figures/``), ``--only NAME[,NAME]``, ``--quick`` (small
sizes, for the tests), ``--format png,pdf``. Progress goes to stderr; bad arguments give one
line on stderr and exit status 2, before any work: among them an ``--out`` that is not a
writable directory (a file, a device, a dangling link) or that holds, under a name the run
would write, something other than a regular file, or a ``manifest.json`` that is not a
manifest (the file policy of ``priors.cli``). Files are written to a temporary directory
inside ``DIR`` and moved into place only when every requested figure succeeded (each move an
atomic rename over a regular file only; the manifest moves last), so an interrupted or failed
run leaves the previous files untouched. With ``--only`` the manifest keeps the other
figures' entries.

Matplotlib is imported only inside the plotting functions, through ``matplotlib.figure.Figure``
with an Agg canvas (no pyplot, no global backend switch); torch and ``proofs_check`` only
inside the compute functions that need them.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from priors.cli import (
    MapOf,
    Parser,
    Record,
    UsageError,
    check_output_dir,
    check_output_file,
    echo,
    progress,
    read_json_file,
    replace_output,
)
from priors.cli import run as run_cli

__all__ = [
    "ENCODING_COLORS",
    "FIGURES",
    "RHO_COLORS",
    "FigureSpec",
    "main",
    "run",
]

# ---------------------------------------------------------------------------------------------
# Palette: Okabe & Ito (2008), colour-blind safe. Defined once, used by every figure.
# ---------------------------------------------------------------------------------------------
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}

#: One colour per encoding (figures 4 and 1: the prefix-consistent operator is "causal-ot").
ENCODING_COLORS = {
    "nope": OKABE_ITO["black"],
    "alibi": OKABE_ITO["orange"],
    "t5": OKABE_ITO["sky"],
    "kerple-log": OKABE_ITO["green"],
    "kerple-power": OKABE_ITO["purple"],
    "log-distance": OKABE_ITO["blue"],
    "causal-ot": OKABE_ITO["vermillion"],
    "batch-uot": OKABE_ITO["grey"],
}

#: One colour per balancing strength rho, the same in figures 2 and 3 (and any other).
RHO_COLORS = {
    0.0: OKABE_ITO["black"],
    1 / 3: OKABE_ITO["sky"],
    0.5: OKABE_ITO["green"],
    0.8: OKABE_ITO["orange"],
    0.9: OKABE_ITO["blue"],
    0.99: OKABE_ITO["purple"],
}

#: Colours for the secondary parameters (sequence length n, window W), disjoint roles.
LENGTH_COLORS = {10**4: OKABE_ITO["sky"], 10**8: OKABE_ITO["orange"], 10**12: OKABE_ITO["blue"]}
WINDOW_COLORS = {64: OKABE_ITO["orange"], 512: OKABE_ITO["blue"], 4096: OKABE_ITO["green"]}
TOL_STYLES = {0.1: "-", 0.05: "-.", 0.01: "--"}

#: Paper-column width in inches and the type sizes (>= 7 pt everywhere).
COLUMN_WIDTH = 3.5
RC = {
    "font.size": 7.5,
    "axes.titlesize": 8,
    "axes.labelsize": 7.5,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.framealpha": 0.9,
    "lines.linewidth": 1.1,
    "axes.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "savefig.dpi": 300,
    "axes.grid": True,
    "grid.linewidth": 0.3,
    "grid.alpha": 0.5,
}

#: Arrays with more elements than this are recorded in the manifest as a digest + key values.
_INLINE_MAX = 256
FORMATS = ("png", "pdf", "svg")
PROG = "paper_figs"


def rho_color(rho: float) -> str:
    """The palette colour of ``rho`` (``ValueError`` if the value has none)."""
    for key, colour in RHO_COLORS.items():
        if abs(key - rho) < 1e-12:
            return colour
    raise ValueError(f"rho={rho!r} has no colour in RHO_COLORS")


def rho_label(rho: float) -> str:
    """``rho`` for a legend: ``1/3`` for one third, else the shortest float form."""
    return "1/3" if abs(rho - 1 / 3) < 1e-12 else f"{rho:g}"


def _progress(message: str) -> None:
    progress(PROG, message)  # never raises, even on a closed stderr


def _log_grid(lo: float, hi: float, per_decade: float) -> np.ndarray:
    """Log-spaced grid from ``lo`` to ``hi`` inclusive with ``per_decade`` points per decade."""
    count = max(2, round(math.log10(hi / lo) * per_decade) + 1)
    return np.logspace(math.log10(lo), math.log10(hi), count)


def _int_log_grid(lo: int, hi: int, per_decade: float) -> list[int]:
    """Distinct integers on a log grid from ``lo`` to ``hi`` inclusive."""
    values = sorted({round(float(v)) for v in _log_grid(lo, hi, per_decade)} | {lo, hi})
    return [v for v in values if lo <= v <= hi]


def _loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``ln y`` against ``ln x`` (a measurement, not a model)."""
    coeffs = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return float(coeffs[0])


# ---------------------------------------------------------------------------------------------
# Figure 1 (docs/theory.md §1): the causal obstruction.
# ---------------------------------------------------------------------------------------------
def compute_obstruction(quick: bool = False) -> dict[str, Any]:
    """Diagonal mass of the batch unbalanced plan vs rho, and the prefix leak
    (docs/theory.md §1, §2.3).

    Panel (a): ``trace(P)/n`` of ``batch_unbalanced_sinkhorn`` on constant scores ``S = 0`` at
    ``n = 32`` (docs/theory.md §1: 0.16933, 0.31476, 0.60784, 0.86515 at rho = 0.5, 0.9, 0.99,
    0.999), beside ``trace(A)/n`` of the prefix-consistent operator ``causal_ot_attention``.
    Panel (b): the leak ``max_{m, l, j <= m} |P_n[l,j] - P_m[l,j]|`` between the plan on the
    whole random-score sequence and the plan on its prefixes of length ``m``, for both
    constructions (the operator's is 0 up to round-off, Proposition 2.3), measured by
    ``proofs_check.measurements.prefix_leak`` and the diagonal masses by
    ``proofs_check.measurements.diagonal_mass`` (the functions the checks use).
    """
    import torch

    from proofs_check.measurements import diagonal_mass, prefix_leak
    from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn
    from proofs_check.operators.causal_ot import causal_ot_attention

    n = 32
    if quick:
        rhos = [0.5, 0.9, 0.99]
        leak_rhos = [0.3, 0.9]
    else:
        rhos = [0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999]
        leak_rhos = [0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99]
    prefixes = [1, 2, n // 4, n // 2, 3 * n // 4, n - 1]
    dtype = torch.float64
    zeros = torch.zeros(n, n, dtype=dtype)
    batch_trace, batch_sweeps, op_trace = [], [], []
    for rho in rhos:
        res = batch_unbalanced_sinkhorn(zeros, rho)
        batch_trace.append(float(diagonal_mass(res.weights)))
        batch_sweeps.append(int(res.info.sweeps))
        op = causal_ot_attention(zeros, rho)
        op_trace.append(float(diagonal_mass(op.weights)))
    gen = torch.Generator().manual_seed(1)
    scores = torch.randn(n, n, generator=gen, dtype=dtype)  # standard normal scores, seed 1
    batch_leak = [float(prefix_leak(scores, rho, "batch", prefixes)) for rho in leak_rhos]
    op_leak = [float(prefix_leak(scores, rho, "causal_ot", prefixes)) for rho in leak_rhos]
    key = {f"batch_trace_over_n@rho={r}": t for r, t in zip(rhos, batch_trace, strict=True)}
    key.update({f"batch_leak@rho={r}": v for r, v in zip(leak_rhos, batch_leak, strict=True)})
    key["operator_leak_max"] = max(op_leak)
    return {
        "params": {
            "n": n,
            "scores_trace": "constant 0",
            "scores_leak": "standard normal, torch.Generator seed 1, float64",
            "prefix_lengths": prefixes,
            "omitted": "rho = 0.9999 (docs/theory.md: 0.97169) needs ~2.6e5 sweeps, "
                       "about 10 s here",
            "dtype": "float64",
            "device": "cpu",
        },
        "rho": rhos,
        "batch_trace": batch_trace,
        "batch_sweeps": batch_sweeps,
        "operator_trace": op_trace,
        "leak_rho": leak_rhos,
        "batch_leak": batch_leak,
        "operator_leak": op_leak,
        "key_values": key,
    }


def plot_obstruction(data: Mapping[str, Any], fig: Any) -> None:
    axes = fig.subplots(2, 1, sharex=True)
    rho = np.asarray(data["rho"])
    ax = axes[0]
    ax.plot(1 - rho, data["batch_trace"], "o-", ms=3, color=ENCODING_COLORS["batch-uot"],
            label="batch unbalanced plan $P$")
    ax.plot(1 - rho, data["operator_trace"], "s-", ms=3, color=ENCODING_COLORS["causal-ot"],
            label="prefix-consistent operator $A$")
    ax.axhline(1.0, color="k", lw=0.6, ls=":")
    ax.text(0.02, 0.975, "identity matrix", fontsize=7, va="top", ha="left",
            transform=ax.get_yaxis_transform())
    ax.set_ylabel("diagonal mass tr$(\\cdot)/n$")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"(a) diagonal mass → 1 as $\\rho\\to 1$ ($n={data['params']['n']}$, $S=0$)",
                 loc="left")
    ax.legend(loc="lower right")
    ax = axes[1]
    lr = np.asarray(data["leak_rho"])
    ax.plot(1 - lr, data["batch_leak"], "o-", ms=3, color=ENCODING_COLORS["batch-uot"],
            label="batch plan")
    floor = 1e-17
    op = np.maximum(np.asarray(data["operator_leak"], float), floor)
    exact_zero = bool(np.all(np.asarray(data["operator_leak"]) == 0.0))
    ax.plot(1 - lr, op, "s-", ms=3, color=ENCODING_COLORS["causal-ot"],
            label="operator (exactly 0, drawn at $10^{-17}$)" if exact_zero
            else "operator (0 up to round-off; zeros at $10^{-17}$)")
    ax.set_yscale("log")
    ax.set_ylim(floor / 3, 3)
    ax.set_ylabel("prefix leak $\\max|P_n - P_m|$")
    ax.set_title("(b) future-token leak, random scores", loc="left")
    ax.legend(loc="center left")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("$1-\\rho$ (balancing strength $\\rho \\to 1$ to the right)")


# ---------------------------------------------------------------------------------------------
# Figure 2 (docs/theory.md §4): the exact scale-invariant prior.
# ---------------------------------------------------------------------------------------------
def compute_scale_invariant(quick: bool = False) -> dict[str, Any]:
    """``f_rho(y)`` with the discrete constant-score rows, and ``K_l`` against ``l`` (§4).

    The discrete rows come from ``stream_causal_ot(lmax, rho)`` (constant scores); row ``l``
    is drawn as ``l * a[l, j]`` at ``y = j / l`` (the per-key density) over
    ``priors.scale_invariant.density``. The Kolmogorov distance on the grid,
    ``K_l = max_j |sum_{i<=j} a[l,i] - Q(1-rho, ln(l/j))|``, and the sup over all real ``y``
    (dominated by the diagonal atom; docs/theory.md asks for it beside ``K_l``) are measured by
    ``proofs_check.measurements.grid_distances``, the function the check uses; the log-log
    slope of ``K_l`` is fitted by least squares.
    """
    import torch

    from priors.scale_invariant import density
    from proofs_check.measurements import grid_distances
    from proofs_check.operators.causal_ot import stream_causal_ot

    rhos = [1 / 3, 0.5, 0.9] if quick else [1 / 3, 0.5, 0.8, 0.9]
    row_length = 256 if quick else 1024
    k_lengths = [32, 64, 128, 256] if quick else [32, 64, 128, 256, 512, 1024]
    lmax = max(row_length, max(k_lengths))
    y = np.concatenate([_log_grid(1e-6, 0.5, 12), 1 - _log_grid(1e-6, 0.5, 12)[::-1][1:]])
    out_density: dict[str, list[float]] = {}
    rows: dict[str, np.ndarray] = {}
    kolmogorov: dict[str, list[float]] = {}
    sup_y: dict[str, list[float]] = {}
    slopes: dict[str, float] = {}
    wanted = set(k_lengths) | {row_length}
    for rho in rhos:
        out_density[str(rho)] = [float(density(rho, float(v), dps=15)) for v in y]
        kept: dict[int, Any] = {}
        for l, row in stream_causal_ot(lmax, rho, dtype=torch.float64):  # noqa: E741
            if l in wanted:
                kept[l] = row.detach().cpu()
        rows[str(rho)] = kept[row_length].numpy().astype(np.float64)
        dists = [grid_distances(kept[l], rho) for l in k_lengths]  # noqa: E741
        kolmogorov[str(rho)] = [d["K"] for d in dists]
        sup_y[str(rho)] = [d["sup_y"] for d in dists]
        slopes[str(rho)] = _loglog_slope(k_lengths, kolmogorov[str(rho)])
        _progress(f"  scale_invariant: rho={rho_label(rho)} K_l={dists[-1]['K']:.3g} "
                  f"at l={k_lengths[-1]}")
    key = {f"K_l@rho={rho_label(r)},l={k_lengths[-1]}": kolmogorov[str(r)][-1] for r in rhos}
    key.update({f"sup_y@rho={rho_label(r)},l={k_lengths[-1]}": sup_y[str(r)][-1]
                for r in rhos})
    key.update({f"slope@rho={rho_label(r)}": slopes[str(r)] for r in rhos})
    return {
        "params": {
            "rho": rhos,
            "row_length": row_length,
            "kolmogorov_lengths": k_lengths,
            "scores": "constant",
            "operator": "proofs_check.operators.causal_ot.stream_causal_ot, float64, cpu",
            "density_dps": 15,
        },
        "y": y,
        "density": out_density,
        "rows": rows,
        "kolmogorov": kolmogorov,
        "sup_y": sup_y,
        "slopes": slopes,
        "key_values": key,
    }


def plot_scale_invariant(data: Mapping[str, Any], fig: Any) -> None:
    axes = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1.4, 1]})
    ax = axes[0]
    length = data["params"]["row_length"]
    y = np.asarray(data["y"])
    for rho_s, dens in data["density"].items():
        rho = float(rho_s)
        c = rho_color(rho)
        row = np.asarray(data["rows"][rho_s])
        j = np.arange(1, length + 1)
        step = max(1, length // 96)
        ax.plot(y, dens, "-", color=c, lw=1.0, label=f"$\\rho={rho_label(rho)}$")
        ax.plot(j[step - 1 :: step] / length, length * row[step - 1 :: step], "o", ms=1.8,
                mfc="none", mew=0.5, color=c)
    ax.plot([], [], "o", ms=2.5, mfc="none", mew=0.6, color="0.3",
            label=f"$l\\,a[l,j]$, $l={length}$")
    ax.set_yscale("log")
    ax.set_xlim(0, 1)
    ax.set_ylim(0.1, 30)
    ax.set_xlabel("$y = j/l$ (relative key position)")
    ax.set_ylabel("density $f_\\rho(y)$")
    ax.set_title("(a) continuum prior (lines) and discrete rows (dots)", loc="left")
    ax.legend(loc="upper left", ncol=2)
    ax = axes[1]
    ls = data["params"]["kolmogorov_lengths"]
    label_y: dict[str, float] = {}
    for rho_s, ks in sorted(data["kolmogorov"].items(), key=lambda kv: kv[1][-1]):
        # slope labels at the line ends, pushed apart to at least 0.13 decades
        y_label = math.log10(ks[-1])
        if label_y:
            y_label = max(y_label, max(label_y.values()) + 0.13)
        label_y[rho_s] = y_label
    for rho_s, ks in data["kolmogorov"].items():
        c = rho_color(float(rho_s))
        ax.plot(ls, data["sup_y"][rho_s], ":", lw=0.9, color=c)
        ax.plot(ls, ks, "o-", ms=3, color=c)
        ax.annotate(f"slope {data['slopes'][rho_s]:.2f}", (ls[-1] * 1.15, 10 ** label_y[rho_s]),
                    va="center", fontsize=7, color=c)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ls)
    ax.set_xlim(ls[0] / 1.3, ls[-1] * 4.5)
    ax.set_yscale("log")
    ax.set_xlabel("query position $l$")
    ax.set_ylabel("distance to continuum CDF")

    ax.set_title("(b) $K_l$ on the grid $y=j/l$ (solid), sup over all $y$ (dotted)",
                 loc="left")


# ---------------------------------------------------------------------------------------------
# Figure 3 (docs/theory.md §3): dilution under bounded scores (Theorem 1).
# ---------------------------------------------------------------------------------------------
def compute_dilution(quick: bool = False) -> dict[str, Any]:
    """Largest weight and window mass against ``l`` with the Theorem 1 bound (docs/theory.md §3).

    Scores with ``|s| <= B``: uniform random on ``[-B, B]`` (seed 2) and adversarial (``+B`` on
    the first ``W`` keys, ``-B`` elsewhere: a fixed early window favoured by every query).
    Measured from ``causal_ot_attention``: ``max_j a[l, j]`` and the mass on the ``W`` favoured
    keys (adversarial) / on the ``W`` most recent keys (random). Drawn bounds (Theorem 1):
    ``a[l,j] <= e^{2B(1-rho)} l^{-(1-rho)}`` (``priors.dilution_bounds.weight_bound``, the
    function the check uses); any ``W`` keys get at most ``W`` times that (``window_bound``,
    drawn clipped at 1).
    """
    import torch

    from priors.dilution_bounds import weight_bound, window_bound
    from proofs_check.operators.causal_ot import causal_ot_attention

    n = 128 if quick else 1024
    window = 8
    bound_b = 1.0
    rhos = [0.0, 0.5, 0.9]
    dtype = torch.float64
    gen = torch.Generator().manual_seed(2)
    random_scores = (2 * torch.rand(n, n, generator=gen, dtype=dtype) - 1) * bound_b
    adversarial = torch.full((n, n), -bound_b, dtype=dtype)
    adversarial[:, :window] = bound_b
    ls = np.arange(1, n + 1)
    out: dict[str, Any] = {"max_weight": {}, "window_mass": {}, "bound_weight": {},
                           "bound_window": {}}
    worst_ratio = 0.0
    for rho in rhos:
        bound = weight_bound(ls.astype(float), rho, bound_b)
        window_max = window_bound(window, ls.astype(float), rho, bound_b)
        out["bound_weight"][str(rho)] = bound
        out["bound_window"][str(rho)] = np.minimum(window_max, 1.0)
        for case, scores in (("random", random_scores), ("adversarial", adversarial)):
            a = causal_ot_attention(scores, rho).weights.detach().numpy()
            max_w = a.max(axis=1)
            if case == "adversarial":
                mass = a[:, :window].sum(axis=1)
            else:
                mass = np.array([a[i, max(0, i + 1 - window) : i + 1].sum() for i in range(n)])
            out["max_weight"][f"{case}@{rho}"] = max_w
            out["window_mass"][f"{case}@{rho}"] = mass
            worst_ratio = max(worst_ratio, float(np.max(max_w / bound)))
            worst_ratio = max(worst_ratio, float(np.max(mass / window_max)))
        _progress(f"  dilution: rho={rho} done")
    key = {"max_ratio_measured_over_bound": worst_ratio}
    for k, v in out["window_mass"].items():
        key[f"window_mass@l={n},{k}"] = float(v[-1])
    return {
        "params": {
            "n": n,
            "window": window,
            "score_bound": bound_b,
            "rho": rhos,
            "scores": {
                "random": "uniform on [-B, B], torch.Generator seed 2, float64",
                "adversarial": "+B on keys j <= W, -B elsewhere",
            },
            "dtype": "float64",
            "device": "cpu",
        },
        "l": ls,
        **out,
        "key_values": key,
    }


def plot_dilution(data: Mapping[str, Any], fig: Any) -> None:
    axes = fig.subplots(2, 1, sharex=True)
    ls = np.asarray(data["l"])
    styles = {"random": "-", "adversarial": "--"}
    for idx, (name, bound_name) in enumerate((("max_weight", "bound_weight"),
                                              ("window_mass", "bound_window"))):
        ax = axes[idx]
        for rho in data["params"]["rho"]:
            c = rho_color(rho)
            ax.plot(ls, data[bound_name][str(rho)], ":", color=c, lw=1.4)
            for case, st in styles.items():
                ax.plot(ls, data[name][f"{case}@{rho}"], st, color=c, lw=0.9)
        ax.set_xscale("log")
        ax.set_yscale("log")
    w = data["params"]["window"]
    b = data["params"]["score_bound"]
    axes[0].set_ylabel("largest weight $\\max_j a[l,j]$")
    axes[0].set_title(f"(a) largest attention weight, $|s|\\leq B={b:g}$", loc="left")
    axes[1].set_ylabel(f"window mass ($W={w}$ keys)")
    axes[1].set_title("(b) mass on $W$ keys; bound: $W\\times$ the bound in (a)", loc="left")
    axes[1].set_xlabel("query position $l$")
    handles = []
    for rho in data["params"]["rho"]:
        (h,) = axes[0].plot([], [], "-", color=rho_color(rho), label=f"$\\rho={rho:g}$")
        handles.append(h)
    for label, st in (("random $s$ (last $W$ keys)", "-"),
                      ("adversarial (first $W$)", "--"), ("Theorem 1 bound", ":")):
        (h,) = axes[0].plot([], [], st, color="0.3", label=label)
        handles.append(h)
    axes[0].legend(handles=handles, loc="lower left", ncol=2)


# ---------------------------------------------------------------------------------------------
# Figure 4 (docs/theory.md §5): classification of encodings by distant mass.
# ---------------------------------------------------------------------------------------------
def _classification_encodings() -> list[tuple[str, str, Any]]:
    """(colour key, short label, encoding) for figure 4; parameters stated in the labels."""
    from priors.encodings import (
        ALiBi,
        CausalOTPrior,
        KerpleLog,
        KerplePower,
        LogDistance,
        NoPE,
        T5Buckets,
    )

    t5_table = tuple(-k / 4 for k in range(32))  # a decreasing table; the tail is constant
    return [
        ("nope", "NoPE", NoPE()),
        ("alibi", "ALiBi $m=2^{-8}$", ALiBi(slope=2.0**-8)),
        ("t5", "T5 $b_k=-k/4$", T5Buckets(num_buckets=32, max_distance=128, table=t5_table)),
        ("kerple-log", "KERPLE-log (2, 0.1)", KerpleLog(r1=2.0, r2=0.1)),
        ("kerple-power", "KERPLE-pow (0.1, 0.5)", KerplePower(r1=0.1, r2=0.5)),
        ("log-distance", "log-dist. $\\alpha=0.7$", LogDistance(alpha=0.7)),
        ("log-distance", "log-dist. $\\alpha=0.9$", LogDistance(alpha=0.9)),
        ("log-distance", "log-dist. $\\alpha=1.1$", LogDistance(alpha=1.1)),
        ("log-distance", "log-dist. $\\alpha=1.5$", LogDistance(alpha=1.5)),
        ("causal-ot", "causal-OT $\\rho=0.5$", CausalOTPrior(rho=0.5)),
    ]


def compute_classification(quick: bool = False) -> dict[str, Any]:
    """``D_l(W)`` and ``M_l(W)`` against ``l`` from ``W`` to ``1e12`` (docs/theory.md §5).

    Every value is ``enc.distant_mass(W, l)`` / ``enc.window_mass(W, l)`` (exact, ``B = 0``,
    30 digits, plotted in float64); the class is ``enc.classify().label``. KERPLE-log is
    ``-r1 ln(1 + r2 d)`` with ``(r1, r2)``, KERPLE-power ``-r1 d^r2`` with ``(r1, r2)``.
    """
    window = 64
    lmax = 10**12
    lengths = _int_log_grid(window, lmax, 0.5 if quick else 4)
    curves = []
    for colour, label, enc in _classification_encodings():
        t0 = time.perf_counter()
        dist = [float(enc.distant_mass(window, n, dps=30)) for n in lengths]
        mass = [float(enc.window_mass(window, n, dps=30)) for n in lengths]
        limit = float(enc.limit_window_mass(window, dps=30))
        scalars = ",".join(f"{k}={v:g}" for k, v in dict(enc.params).items()
                           if isinstance(v, (int, float)))
        curves.append({
            "id": f"{enc.name}({scalars})",
            "colour_key": colour,
            "label": label,
            "encoding": enc.name,
            "params": {k: (float(v) if isinstance(v, (int, float)) else list(v)
                           if isinstance(v, tuple) else str(v))
                       for k, v in dict(enc.params).items()},
            "class": enc.classify().label,
            "distant_mass": dist,
            "window_mass": mass,
            "limit_window_mass": limit,
        })
        _progress(f"  classification: {enc.name} {label} ({time.perf_counter() - t0:.1f} s)")
    key = {f"D@W={window},l={lengths[-1]},{c['id']}": c["distant_mass"][-1] for c in curves}
    return {
        "params": {"window": window, "lmin": window, "lmax": lmax, "score_bound": 0.0,
                   "dps": 30},
        "lengths": lengths,
        "curves": curves,
        "key_values": key,
    }


def plot_classification(data: Mapping[str, Any], fig: Any) -> None:
    axes = fig.subplots(2, 1, sharex=True)
    ls = np.asarray(data["lengths"], float)
    log_styles = {"0.7": (0, (1, 1)), "0.9": "--", "1.1": "-.", "1.5": "-"}
    groups: dict[str, list[Any]] = {"summable": [], "dilutes": []}
    for c in data["curves"]:
        st: Any = "-"
        if c["encoding"] == "log-distance":
            st = log_styles.get(f"{c['params'].get('alpha'):g}", "-")
        kw = {"color": ENCODING_COLORS[c["colour_key"]], "ls": st, "label": c["label"]}
        (h,) = axes[0].plot(ls, c["distant_mass"], **kw)
        axes[1].plot(ls, c["window_mass"], **kw)
        groups.setdefault(c["class"], []).append(h)
    w = data["params"]["window"]
    axes[0].set_ylabel(f"distant mass $D_l(W)$, $W={w}$")
    axes[0].set_ylim(0, 1.02)
    axes[0].set_title("(a) distant mass: summable priors level off", loc="left")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("window mass $M_l(W)=1-D_l(W)$")
    axes[1].set_title("(b) window mass: diluting priors decay to 0", loc="left")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("sequence length $l$")
    axes[1].set_xlim(ls[0], ls[-1])
    # Legend below the axes, one column per class, each headed by the class name.
    handles: list[Any] = []
    labels: list[str] = []
    rows = max(len(v) for v in groups.values())
    for name, hs in groups.items():
        if not hs:
            continue
        blank = axes[0].plot([], [], ls="none")[0]
        handles += [blank, *hs] + [blank] * (rows - len(hs))
        labels += [f"{name}:", *(h.get_label() for h in hs)] + [""] * (rows - len(hs))
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False,
               handlelength=2.0, columnspacing=1.2, handletextpad=0.5)


# ---------------------------------------------------------------------------------------------
# Figure 5 (docs/theory.md §6): window mass near exponent one.
# ---------------------------------------------------------------------------------------------
def compute_near_one(quick: bool = False) -> dict[str, Any]:
    """Exact ``M_n(W)`` against ``delta = alpha - 1`` with its brackets (docs/theory.md §6).

    ``LogDistance(1 + delta).window_mass(W, n)`` (exact, 30 digits), the integral and
    Euler–Maclaurin brackets of ``priors.brackets.window_mass_brackets``, the ``delta ln n -> 0``
    limit ``near_one_limit(W, n) = H_W / H_n`` and the summable limit ``M_inf(W)``.
    """
    import mpmath

    from priors.brackets import near_one_limit, window_mass_brackets
    from priors.encodings import LogDistance

    window = 512
    lengths = [10**4, 10**8, 10**12]
    deltas = _log_grid(1e-8, 1.0, 1 if quick else 5)
    series = {}
    for n in lengths:
        exact, ilo, ihi, elo, ehi, iwidth, ewidth = [], [], [], [], [], [], []
        for delta in deltas:
            alpha = 1.0 + float(delta)
            mass = LogDistance(alpha=alpha).window_mass(window, n, dps=30)
            br = window_mass_brackets(window, n, alpha, dps=30)
            exact.append(float(mass))
            ilo.append(float(br["integral"][0]))
            ihi.append(float(br["integral"][1]))
            elo.append(float(br["euler_maclaurin"][0]))
            ehi.append(float(br["euler_maclaurin"][1]))
            with mpmath.workdps(40):  # widths from the 30-digit ends, before rounding to float
                iwidth.append(float((br["integral"][1] - br["integral"][0]) / mass))
                ewidth.append(float((br["euler_maclaurin"][1] - br["euler_maclaurin"][0]) / mass))
        series[str(n)] = {
            "window_mass": exact,
            "integral": [ilo, ihi],
            "euler_maclaurin": [elo, ehi],
            "integral_rel_width": iwidth,
            "euler_maclaurin_rel_width": ewidth,
            "near_one_limit": float(near_one_limit(window, n, dps=30)),
        }
        _progress(f"  near_one: n={n:.0e} done")
    limit = [float(LogDistance(alpha=1.0 + float(d)).limit_window_mass(window, dps=30))
             for d in deltas]
    key = {f"near_one_limit@W={window},n={n}": series[str(n)]["near_one_limit"]
           for n in lengths}
    key.update({f"M@W={window},n={n},delta={deltas[0]:.0e}": series[str(n)]["window_mass"][0]
                for n in lengths})
    return {
        "params": {"window": window, "lengths": lengths, "dps": 30,
                   "alpha": "1 + delta, delta given as float64"},
        "delta": deltas,
        "series": series,
        "limit_window_mass": limit,
        "key_values": key,
    }


def plot_near_one(data: Mapping[str, Any], fig: Any) -> None:
    axes = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1.6, 1]})
    delta = np.asarray(data["delta"])
    ax = axes[0]
    for n_s, s in data["series"].items():
        c = LENGTH_COLORS[int(n_s)]
        ilo, ihi = (np.clip(np.asarray(v), 0, 1) for v in s["integral"])
        ax.fill_between(delta, ilo, ihi, color=c, alpha=0.12, lw=0)
        for edge in (ilo, ihi):
            ax.plot(delta, edge, "-", color=c, lw=0.4, alpha=0.8)
        ax.plot(delta, s["window_mass"], "-", color=c, lw=1.1)
        ax.axhline(s["near_one_limit"], color=c, ls=":", lw=1.0)
        ax.annotate(f"$n=10^{{{round(math.log10(int(n_s)))}}}$",
                    (delta[0], float(np.asarray(s["integral"][1])[0])), xytext=(2, 2),
                    textcoords="offset points", va="bottom", ha="left", color=c, fontsize=7)
    ax.plot(delta, data["limit_window_mass"], "-", color="0.45", lw=0.8,
            label="$M_\\infty(W)$, summable limit")
    ax.plot([], [], ":", color="0.3", label="$H_W/H_n$, limit $\\delta\\ln n\\to 0$")
    ax.fill_between([], [], [], color="0.3", alpha=0.12, lw=0.4, edgecolor="0.3",
                    label="integral bracket")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(f"window mass $M_n(W)$, $W={data['params']['window']}$")
    ax.set_title("(a) exact mass (lines) inside the integral bracket", loc="left")
    ax = axes[1]
    markers = {10**4: "o", 10**8: "s", 10**12: "^"}
    for n_s, s in data["series"].items():
        c = LENGTH_COLORS[int(n_s)]
        every = max(1, len(delta) // 8)
        ax.plot(delta, s["integral_rel_width"], "-", color=c, marker=markers[int(n_s)], ms=2.5,
                markevery=every)
        ax.plot(delta, s["euler_maclaurin_rel_width"], "--", color=c, marker=markers[int(n_s)],
                ms=2.5, markevery=every)
    ax.set_ylim(1e-34, 30)
    ax.text(0.02, 0.86, "integral bracket (solid)", transform=ax.transAxes, va="top",
            fontsize=7)
    ax.text(0.02, 0.17, "Euler–Maclaurin, certified (dashed)", transform=ax.transAxes,
            va="bottom", fontsize=7)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False,
               columnspacing=1.0, handlelength=1.8)
    ax.set_yscale("log")
    ax.set_xscale("log")
    ax.set_xlabel("exponent margin $\\delta=\\alpha-1$")
    ax.set_ylabel("width $(\\mathrm{hi}-\\mathrm{lo})/M_n(W)$")
    ax.set_title("(b) relative bracket widths (the three $n$ overlap)", loc="left")


# ---------------------------------------------------------------------------------------------
# Figure 6 (docs/theory.md §7): margin selection.
# ---------------------------------------------------------------------------------------------
def compute_margin(quick: bool = False) -> dict[str, Any]:
    """``delta*`` against ``lmax`` (``select_margin``) and the growth curve (docs/theory.md §7).

    Panel (b) draws ``D_l(W)`` of ``LogDistance(1 + delta*)`` for ``l`` in ``[W, lmax]``: by
    construction it rises by at most ``tau`` over the range (and touches ``tau`` at ``lmax``).
    """
    from priors.encodings import LogDistance
    from priors.margin import select_margin

    configs = [(64, 0.1), (512, 0.1), (512, 0.01)]
    if not quick:
        configs.append((4096, 0.1))
    top = 10**6 if quick else 10**15
    sweep = {}
    for window, tol in configs:
        lmaxes = _int_log_grid(4 * window, top, 1 if quick else 2)
        deltas = []
        for lmax in lmaxes:
            res = select_margin(window, lmax, tol)
            deltas.append(float(res.delta))
        sweep[f"W={window},tol={tol}"] = {"window": window, "tol": tol, "lmax": lmaxes,
                                         "delta": deltas}
        _progress(f"  margin: W={window} tol={tol} done")
    growth_cases = [(512, 65536, 0.1), (512, 65536, 0.01), (64, 4096, 0.1)]
    growth = []
    for window, lmax, tol in growth_cases:
        res = select_margin(window, lmax, tol)
        enc = LogDistance(alpha=res.alpha)
        ls = _int_log_grid(window, lmax, 4 if quick else 12)
        growth.append({
            "window": window, "lmax": lmax, "tol": tol, "delta": float(res.delta),
            "alpha": float(res.alpha), "l": ls,
            "distant_mass": [float(enc.distant_mass(window, n, dps=30)) for n in ls],
        })
    key = {f"delta*@W={g['window']},lmax={g['lmax']},tol={g['tol']}": g["delta"]
           for g in growth}
    return {
        "params": {"lmin": "W", "score_bound": 0.0, "dps": 30, "configs": configs},
        "sweep": sweep,
        "growth": growth,
        "key_values": key,
    }


def plot_margin(data: Mapping[str, Any], fig: Any) -> None:
    axes = fig.subplots(2, 1)
    ax = axes[0]
    for s in data["sweep"].values():
        ax.plot(s["lmax"], s["delta"], TOL_STYLES.get(s["tol"], "-"), marker="o", ms=2,
                color=WINDOW_COLORS[s["window"]],
                label=f"$W={s['window']}$, $\\tau={s['tol']:g}$")
    ax.set_xscale("log")
    ax.set_xlabel("longest length $L_1$ (with $L_0=W$)")
    ax.set_ylabel("selected margin $\\delta^*$")
    ax.set_title("(a) margin keeping the growth of $D_l(W)$ below $\\tau$", loc="left")
    top = max(max(s["delta"]) for s in data["sweep"].values())
    ax.set_ylim(0, top * 1.45)
    ax.legend(loc="upper left", ncol=2, columnspacing=1.0)
    ax = axes[1]
    for g in data["growth"]:
        ax.plot(g["l"], np.asarray(g["distant_mass"]) / g["tol"], TOL_STYLES.get(g["tol"], "-"),
                color=WINDOW_COLORS[g["window"]],
                label=f"$W={g['window']}$, $L_1={g['lmax']}$, $\\tau={g['tol']:g}$: "
                f"$\\delta^*={g['delta']:.4f}$")
    ax.axhline(1.0, color="0.4", lw=0.7, ls=":")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.6)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel("sequence length $l$")
    ax.set_ylabel("$D_l(W)/\\tau$ at $\\alpha=1+\\delta^*$")
    ax.set_title("(b) growth at the selected margin reaches $\\tau$ at $L_1$", loc="left")
    ax.legend(loc="upper left")


def compute_extrapolation(quick: bool = False) -> dict[str, Any]:
    """Fig. 7 from the committed experiment results (docs/extrapolation.md): the quick
    preset's fitting run ``benchmarks/extrapolation_quick.json``, its held-out run
    ``benchmarks/extrapolation_quick_heldout.json`` and the loss model fitted on the first
    ``benchmarks/extrapolation_lossmodel_quick.json`` (each of the last two when present).
    Training takes minutes to hours, so the figure reads results; ``quick`` changes
    nothing."""
    del quick
    from proofs_check.extrapolation.figure import fig7_caption, fig7_data, load_results

    bench = Path(__file__).resolve().parent / "benchmarks"
    paths = {"results": bench / "extrapolation_quick.json",
             "heldout": bench / "extrapolation_quick_heldout.json",
             "loss_model": bench / "extrapolation_lossmodel_quick.json"}
    found = {k: load_results(p) for k, p in paths.items() if p.exists()}
    data = fig7_data(found["results"], found.get("loss_model"), found.get("heldout"))
    key = {  # at the design length: change in bits per byte, its interval, the dilution
        name: {"role": v["role"], "class": v["class"], "dilution": v["dilution"],
               "change_bpb": v["change"], "ci95": v["ci95"],
               "window_mass_longest": v["window_mass"][-1],
               "exact_window_mass_longest": v["exact_window_mass"][-1]}
        for name, v in data["variants"].items()
    }
    return {**data, "caption": fig7_caption(data),
            "sources": [f"benchmarks/{paths[k].name}" for k in found], "key_values": key}


def plot_extrapolation(data: Mapping[str, Any], fig: Any) -> None:
    from proofs_check.extrapolation.figure import plot_fig7

    plot_fig7(data, fig)


# ---------------------------------------------------------------------------------------------
# Registry, manifest, atomic writing, command line.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FigureSpec:
    """One figure: its number, name, docs/theory.md section, compute and plot functions, height."""

    number: int
    name: str
    section: str
    title: str
    compute: Callable[[bool], dict[str, Any]]
    plot: Callable[[Mapping[str, Any], Any], None]
    height: float

    @property
    def stem(self) -> str:
        return f"fig{self.number}_{self.name}"


FIGURES: dict[str, FigureSpec] = {
    spec.name: spec
    for spec in (
        FigureSpec(1, "obstruction", "§1", "The causal obstruction",
                   compute_obstruction, plot_obstruction, 4.4),
        FigureSpec(2, "scale_invariant", "§4", "The scale-invariant prior",
                   compute_scale_invariant, plot_scale_invariant, 4.6),
        FigureSpec(3, "dilution", "§3", "Dilution under bounded scores (Theorem 1)",
                   compute_dilution, plot_dilution, 4.6),
        FigureSpec(4, "classification", "§5", "Classification of encodings by distant mass",
                   compute_classification, plot_classification, 6.0),
        FigureSpec(5, "near_one", "§6", "Window mass near exponent one",
                   compute_near_one, plot_near_one, 5.0),
        FigureSpec(6, "margin", "§7", "Margin selection",
                   compute_margin, plot_margin, 4.6),
        FigureSpec(7, "extrapolation", "§5, §7", "Length extrapolation of trained models",
                   compute_extrapolation, plot_extrapolation, 5.2),
    )
}


def _jsonable(value: Any) -> Any:
    """Manifest form of computed data: numbers as floats, long arrays as digests."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = None
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.size > _INLINE_MAX:
            flat = np.ascontiguousarray(arr.ravel(), dtype="<f8")
            return {
                "sha256": hashlib.sha256(flat.tobytes()).hexdigest(),
                "shape": list(arr.shape),
                "dtype": "float64 (little-endian bytes hashed)",
                "min": _number(np.min(flat)),
                "max": _number(np.max(flat)),
                "first": _number(flat[0]),
                "last": _number(flat[-1]),
            }
        if isinstance(value, np.ndarray):
            return [_jsonable(v) for v in value.tolist()]
        return [_jsonable(v) for v in value]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return _number(number)


def _number(value: Any) -> float | str:
    """A float for the manifest: finite as itself, ``nan``/``inf``/``-inf`` as that text
    (``NaN`` and ``Infinity`` are not JSON; ``priors.cli.read_json_file`` refuses them)."""
    number = float(value)
    return number if math.isfinite(number) else repr(number)


def _module_version(name: str) -> str | None:
    try:
        module = __import__(name)
    except ImportError:
        return None
    return str(getattr(module, "__version__", "unknown"))


def versions() -> dict[str, Any]:
    """Versions of everything that produced the numbers, and the git commit if available."""
    out: dict[str, Any] = {"python": platform.python_version()}
    for name in ("numpy", "scipy", "torch", "mpmath", "flint", "matplotlib"):
        out[name] = _module_version(name)
    root = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=10,
                               check=True).stdout.strip()
        out["git_commit"] = commit
        out["git_dirty"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = None
    return out


def render(spec: FigureSpec, data: Mapping[str, Any], directory: Path,
           formats: Sequence[str]) -> list[str]:
    """Draw ``spec`` from ``data`` into ``directory`` in each format; return the file names."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = []
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(COLUMN_WIDTH, spec.height), layout="constrained")
        FigureCanvasAgg(fig)
        spec.plot(data, fig)
        for i, fmt in enumerate(formats):
            if i == 1:
                # the layout is fixed in inches: computed once by the first save, then frozen
                # (saves a second constrained-layout pass; the positions do not change)
                fig.set_layout_engine("none")
            name = f"{spec.stem}.{fmt}"
            meta = {"CreationDate": None} if fmt == "pdf" else None
            if fmt == "svg":
                meta = {"Date": None}
            fig.savefig(directory / name, format=fmt, metadata=meta)
            names.append(name)
    return names


#: Largest previous manifest read (bytes; the full one is about 1 MB).
MANIFEST_LIMIT = 1 << 26
#: The form of ``manifest.json`` (what a previous one must have to be kept).
MANIFEST_SHAPE = Record(required={"figures": MapOf(dict)})


def _file_names(names: Sequence[str], formats: Sequence[str]) -> list[str]:
    return [f"{FIGURES[n].stem}.{fmt}" for n in names for fmt in formats] + ["manifest.json"]


def check_destination(out: object, names: Sequence[str], formats: Sequence[str],
                      argument: str = "out") -> tuple[Path, dict[str, Any]]:
    """Before any work: ``out`` is an output directory (``priors.cli.check_output_dir``),
    every file the run would replace in it is a regular file or absent, and a previous
    ``manifest.json`` is a manifest (size cap, form check). Returns ``(out, the previous
    manifest's figures)``; ``PathError`` naming ``argument`` otherwise."""
    directory = check_output_dir(out, argument)
    if not directory.is_dir():
        return directory, {}
    for name in _file_names(names, formats):
        check_output_file(directory / name, argument)
    old = read_json_file(directory / "manifest.json", argument, limit=MANIFEST_LIMIT,
                         shape=MANIFEST_SHAPE)
    figures = {} if old is None else {k: v for k, v in old["figures"].items() if k in FIGURES}
    return directory, figures


def run(names: Sequence[str], out: Path, *, quick: bool = False,
        formats: Sequence[str] = ("png", "pdf")) -> dict[str, Any]:
    """Compute and draw the figures ``names`` into ``out`` atomically; return the manifest.

    ``out`` is checked first (``check_destination``: ``PathError`` if it or a file it would
    replace is not a regular file or directory, or its manifest is malformed). Everything
    is written to a temporary directory inside ``out`` and moved into place
    (``priors.cli.replace_output``, manifest last) only after every figure succeeded; an
    output linked to a file outside ``out`` is first copied beside its target
    (``_stage_beside_target``), so no move crosses a file system.
    """
    out, kept = check_destination(out, names, formats)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"figures": kept}
    vers = versions()
    tmp = Path(tempfile.mkdtemp(prefix=".paper_figs-", dir=out))
    try:
        written: list[str] = []
        for name in names:
            spec = FIGURES[name]
            _progress(f"fig{spec.number} {name} ({spec.section}): computing"
                      f"{' (quick)' if quick else ''}")
            t0 = time.perf_counter()
            data = spec.compute(quick)
            t1 = time.perf_counter()
            files = render(spec, data, tmp, formats)
            t2 = time.perf_counter()
            _progress(f"fig{spec.number} {name}: compute {t1 - t0:.1f} s, plot {t2 - t1:.1f} s")
            written.extend(files)
            manifest["figures"][name] = {
                "number": spec.number,
                "title": spec.title,
                "theory_section": spec.section,
                "files": files,
                "quick": quick,
                "params": _jsonable(data.get("params", {})),
                "key_values": _jsonable(data.get("key_values", {})),
                "data": _jsonable({k: v for k, v in data.items()
                                   if k not in ("params", "key_values")}),
                "seconds": {"compute": round(t1 - t0, 2), "plot": round(t2 - t1, 2)},
                "versions": vers,
            }
        manifest["figures"] = dict(sorted(manifest["figures"].items(),
                                          key=lambda kv: FIGURES[kv[0]].number))
        manifest["versions"] = vers
        manifest["generator"] = "python paper_figs.py" + (" --quick" if quick else "")
        manifest["precision"] = ("numbers are float64 roundings of the library's results "
                                 "(mpmath values computed at the dps stated in params)")
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, allow_nan=False)
                                           + "\n")
        staged: list[Path] = []
        try:
            for name in [*written, "manifest.json"]:
                staged.append(_stage_beside_target(tmp / name, out / name, out))
            for name, source in zip([*written, "manifest.json"], staged, strict=True):
                replace_output(source, out / name, "out")
        finally:
            for source in staged:
                source.unlink(missing_ok=True)  # a copy not renamed into place
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _stage_beside_target(source: Path, path: Path, out: Path) -> Path:
    """``source``, or a copy of it in the directory of the file ``path`` finally names.

    An output that is a link to a regular file has its target replaced
    (``priors.cli.replace_output``); a target outside ``out`` may lie on another file
    system, where a rename from ``out`` fails (EXDEV) after the earlier files were
    already moved. Every file is therefore first copied beside its final target, so
    that each move is a rename within one directory and a failure to stage (before any
    move) leaves every output as it was."""
    target_dir = Path(os.path.realpath(path)).parent
    if target_dir == Path(os.path.realpath(out)):
        return source
    fd, name = tempfile.mkstemp(prefix=".paper_figs-", suffix=source.suffix, dir=target_dir)
    os.close(fd)
    shutil.copyfile(source, name)
    return Path(name)


def _parse_list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise UsageError(f"{what} must be a comma-separated list, got {echo(text)}")
    bad = [t for t in items if t not in allowed]
    if bad:
        raise UsageError(f"unknown {what} {echo(bad[0])} (choose from {', '.join(allowed)})")
    return list(dict.fromkeys(items))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="paper_figs.py", description=(
        "Regenerate the theory figures (docs/theory.md §1-§7) from the toolkit's code: PNG and "
        "PDF per figure and manifest.json with the numbers plotted."))
    parser.add_argument("--out", default="figures", help="output directory (default figures/)")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated figure names: {', '.join(FIGURES)}")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (smoke test; about 30 s for all figures)")
    parser.add_argument("--format", default="png,pdf",
                        help=f"comma-separated formats from {', '.join(FORMATS)} (default png,pdf)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python paper_figs.py [--out DIR] [--only NAME,...] [--quick] [--format]``.

    Returns 0 on success, 2 on bad arguments (one line on stderr, nothing computed or
    written; an ``--out`` that is not a writable directory, or holds a file the run would
    replace that is not a regular file, or a malformed manifest, included), 1 if a figure
    failed (one line on stderr; nothing is written); a closed pipe as in ``priors.cli``.
    """
    return run_cli(PROG, _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    names = (list(FIGURES) if args.only is None
             else _parse_list(args.only, list(FIGURES), "figure"))
    formats = _parse_list(args.format, FORMATS, "format")
    out, _ = check_destination(args.out, names, formats, "--out")
    missing = [m for m in ("torch", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(f"{' and '.join(missing)} not installed; pip install -e '.[torch,plot]'")
    t0 = time.perf_counter()
    try:
        run(names, out, quick=args.quick, formats=formats)
    except Exception as exc:  # report one line; a figure failing must not look like success
        print(f"{PROG}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    _progress(f"wrote {len(names)} figure(s) to {out}/ in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

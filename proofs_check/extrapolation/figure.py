"""``fig7``: what the prior predicts about a trained model's extrapolation, and what it buys.

(a) The loss change at the longest length (bits per byte against the sliding baseline,
    same targets) against the prior's dilution ``Lambda`` (``lossmodel``), one point
    per variant with its 95% bootstrap interval; variants used to fit the loss model
    filled, held-out ones open; the fitted model and its 90% prediction band drawn; the
    variants outside the model's domain (NoPE, RoPE, the causal OT operator, learned
    biases) in a separate strip at the right, since they have no ``Lambda``.
(b) Window mass against length, one panel column per family (log-distance and margin,
    ALiBi, KERPLE and T5, no positional bias): measured (solid) and the exact prior
    (dashed, same colour).
(c) Retrieval accuracy at the design length against the probe distance, beside the
    best head's prior distant mass at that distance (dotted).

Colours are fixed by variant name (:func:`variant_colour`), the same in every figure
and whatever order the results file lists the variants in; within a family they run
along a colour map by the variant's parameter. :func:`fig7_data` computes,
:func:`plot_fig7` draws into a given ``matplotlib.figure.Figure`` (no pyplot, no global
backend switch); matplotlib is imported only inside the drawing functions.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from priors.cli import atomic_output
from proofs_check.extrapolation.variants import parse_variant

__all__ = [
    "FIGURE_SUFFIXES",
    "family",
    "fig7",
    "fig7_caption",
    "fig7_data",
    "load_results",
    "plain_label",
    "plot_fig7",
    "variant_colour",
]

#: Formats fig7 is written in (the suffix of the path).
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")

_FAMILIES = ("log-distance", "ALiBi", "KERPLE / T5", "no positional bias")


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A results file written by ``python -m proofs_check.extrapolation run --out``."""
    return json.loads(Path(path).read_text())


def family(name: str) -> str:
    """The panel family of a variant name (``variants`` table)."""
    if name.startswith(("logd", "margin")):
        return "log-distance"
    if name.startswith("alibi"):
        return "ALiBi"
    if name.startswith(("kerple", "t5")):
        return "KERPLE / T5"
    if name.startswith("ot-"):
        return "causal OT"
    return "no positional bias"


def variant_colour(name: str) -> tuple[float, ...]:
    """A colour that depends only on the variant's name (RGBA in [0, 1]): within a family a
    sequential colour map read at the variant's parameter, so that order shows (log-distance
    by its exponent, margin by its tolerance, ALiBi by its slope scale, fixed KERPLE by
    ``r1``, fixed T5 by ``A``, the causal OT operator by ``rho``); fixed colours for the rest."""
    from matplotlib import colormaps

    v = parse_variant(name)
    fixed = {"nope": "#b2182b", "rope": "#e7298a", "t5": "#8c6d31", "kerple-log": "#1b7837"}
    if name in fixed:
        from matplotlib.colors import to_rgba

        return to_rgba(fixed[name])
    if v.kind == "logd":  # exponents 0.7 .. 2.1: the plasma map from purple to orange-red
        return colormaps["plasma"](0.72 * min(max((v.value - 0.7) / 1.4, 0.0), 1.0))
    if v.kind == "margin":  # tolerances 1e-3 .. 0.5: teal, darker for smaller tolerances
        t = min(max(-math.log10(v.value) / 3, 0.0), 1.0)
        return colormaps["PuBuGn"](0.6 + 0.35 * t)
    if v.kind == "alibi":  # slope scales 1 .. 1/64: blue, darker for flatter slopes
        f = v.params[0] if v.params else 1.0
        return colormaps["Blues"](0.45 + 0.5 * min(max(-math.log2(f) / 6, 0.0), 1.0))
    if v.kind == "kerple":
        return colormaps["Greens"](0.45 + 0.5 * min(max((v.params[0] - 1) / 3, 0.0), 1.0))
    if v.kind == "t5":
        return colormaps["copper"](0.2 + 0.6 * min(max((v.value - 1) / 2, 0.0), 1.0))
    return colormaps["RdPu"](0.5 + 0.4 * v.value)  # ot


def plain_label(name: str, alpha: float | None = None) -> str:
    """A reader's label for a variant name (``logd-1.4`` -> ``log-distance 1.4``)."""
    kind, _, rest = name.partition("-")
    if name == "nope":
        return "no position (NoPE)"
    if name == "rope":
        return "rotary (RoPE)"
    if name == "alibi":
        return "ALiBi"
    if name == "t5":
        return "T5 buckets, learned"
    if name == "kerple-log":
        return "KERPLE-log, learned"
    if kind == "alibi":
        return f"ALiBi, slopes x{rest[1:]}"
    if kind == "logd":
        return f"log-distance {rest}"
    if kind == "margin":
        return f"margin tol {rest}" + (f" (exponent {alpha:.3f})" if alpha else "")
    if kind == "ot":
        return f"causal OT, rho {rest}"
    if kind == "t5":
        return f"T5 table -{rest} ln(1+d)"
    if kind == "kerple":
        r1, _, r2 = rest.partition("-")
        return f"KERPLE r1 {r1}, r2 {r2}"
    return name


def fig7_data(results: Mapping[str, Any], loss_model: Mapping[str, Any] | None = None,
              heldout: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What fig7 plots, from a results dict (and optionally a second, held-out results
    dict and the fitted loss model's dict)."""
    cfg = results["config"]
    fitted = set(loss_model.get("fitted_on", {}).get("variants", [])) if loss_model else set()
    variants = {}
    for source, res in (("fit", results), ("heldout", heldout)):
        if res is None:
            continue
        design = res["config"]["design_length"]
        for name, v in res["variants"].items():
            if name in variants:
                continue
            last = next((e for e in v["per_length"] if e["length"] == design),
                        v["per_length"][-1])
            probe = v["probe"][-1] if v.get("probe") else None
            variants[name] = {
                "label": plain_label(name, v.get("alpha")),
                "family": family(name),
                "colour": variant_colour(name),
                "role": ("held out" if source == "heldout" else "fitted" if name in fitted
                         else "in sample"),
                "domain": parse_variant(name).fixed_bias,
                "class": "/".join(v["classes"]),
                "length": [e["length"] for e in v["per_length"]],
                "window_mass": [e["window_mass"] for e in v["per_length"]],
                "exact_window_mass": [e["exact_window_mass"] for e in v["per_length"]],
                "change": last["change"],
                "ci95": last["ci95"],
                "dilution": last["dilution"],
                "probe_distances": probe["distances"] if probe else [],
                "probe_accuracy": probe["accuracy"] if probe else [],
                "probe_prior_distant_mass": probe["prior_distant_mass_best_head"] if probe else [],
            }
    return {
        "window": cfg["window"],
        "train_length": cfg["train_length"],
        "design_length": cfg["design_length"],
        "preset": cfg["preset"],
        "seeds": list(cfg["seeds"]),
        "variants": dict(sorted(variants.items())),
        "loss_model": dict(loss_model) if loss_model else None,
    }


def fig7_caption(data: Mapping[str, Any]) -> str:
    """The caption: what is drawn, the seed count and what the error bars mean."""
    n = len(data["seeds"])
    return (f"Length extrapolation, {data['preset']} preset: trained at {data['train_length']} "
            f"bytes, {n} seed{'s' if n != 1 else ''} per variant. (a) loss change at "
            f"{data['design_length']} bytes against the prior's dilution; bars: 95% bootstrap "
            f"intervals over seeds and held-out files; band: the loss model's 90% prediction "
            f"interval. (b) window mass W = {data['window']}, measured (solid) and exact prior "
            f"(dashed). (c) retrieval accuracy by distance (solid) and the prior's distant "
            f"mass of the best head (dotted).")


def plot_fig7(data: Mapping[str, Any], fig: Any) -> None:
    """Draw fig7 from :func:`fig7_data` into the matplotlib ``Figure`` ``fig``: on a narrow
    figure (a paper column) the panels are stacked, (a) on top, the four window-mass
    panels in a 2 x 2 block, (c) below; on a wide one (a) and (c) share the top row. One
    legend below the panels names every variant in plain words."""
    narrow = fig.get_figwidth() < 6
    if narrow:
        grid = fig.add_gridspec(4, 2, height_ratios=[1.9, 1, 1, 1.2])
        top, probe = grid[0, :], grid[3, :]
        mass = [grid[1, 0], grid[1, 1], grid[2, 0], grid[2, 1]]
    else:
        grid = fig.add_gridspec(2, 4, height_ratios=[1.3, 1])
        top, probe = grid[0, :3], grid[0, 3]
        mass = [grid[1, k] for k in range(4)]
    inner = top.subgridspec(1, 2, width_ratios=[4, 1], wspace=0.05)
    _plot_loss(data, fig.add_subplot(inner[0, 0]), fig.add_subplot(inner[0, 1]))
    _plot_masses(data, [fig.add_subplot(m) for m in mass])
    _plot_probe(data, fig.add_subplot(probe))
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=d["colour"], marker="o", ms=3, lw=1, label=d["label"])
               for d in data["variants"].values()]
    handles += [
        Line2D([], [], color="0.3", marker="o", ls="none", ms=3, label="fitted on (in sample)"),
        Line2D([], [], color="0.3", marker="s", mfc="white", ls="none", ms=3,
               label="held out (registered before training)"),
        Line2D([], [], color="0.3", ls="--", lw=0.7, label="exact prior (window mass)"),
        Line2D([], [], color="0.3", ls=":", lw=0.7, label="prior distant mass at d"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=2 if narrow else 5,
               fontsize=4.5 if narrow else 6, frameon=False)


def _errorbar(ax: Any, x: float, d: Mapping[str, Any], marker: str, filled: bool) -> None:
    lo, hi = d["ci95"]
    ax.errorbar(x, d["change"], yerr=[[d["change"] - lo], [hi - d["change"]]], fmt=marker,
                ms=3, color=d["colour"], mfc=d["colour"] if filled else "white", capsize=1.5,
                lw=0.8)


def _plot_loss(data: Mapping[str, Any], ax: Any, strip: Any) -> None:
    inside = [d for d in data["variants"].values() if d["domain"]]
    outside = [d for d in data["variants"].values() if not d["domain"]]
    lam_max = max([d["dilution"] for d in inside] + [0.1])
    model = data.get("loss_model")
    if model:
        from proofs_check.extrapolation.lossmodel import LossModel

        lm = LossModel.from_dict(model)
        grid = np.linspace(0, lam_max * 1.05, 200)
        band = np.array([lm.interval(x) for x in grid])
        ax.fill_between(grid, band[:, 0], band[:, 1], color="0.88", lw=0)
        ax.plot(grid, [lm.predict(x)[0] for x in grid], color="0.35", lw=0.8)
    for d in inside:
        held = d["role"] == "held out"
        _errorbar(ax, d["dilution"], d, "s" if held else "o", not held)
    ax.axhline(0.0, color="0.4", lw=0.5)
    ax.set_xlabel("dilution $\\Lambda$ of the least-diluted head (nats)", fontsize=6)
    ax.set_ylabel(f"$\\Delta$ bits/byte at {data['design_length']}", fontsize=6)
    ax.tick_params(labelsize=5)
    ax.set_title("(a) loss change against the dilution (grey: model, 90%)", loc="left",
                 fontsize=6)
    for k, d in enumerate(outside):
        _errorbar(strip, k, d, "D", True)
    strip.set_xlim(-0.7, max(len(outside), 1) - 0.3)
    strip.set_xticks([])
    strip.yaxis.tick_right()
    strip.axhline(0.0, color="0.4", lw=0.5)
    strip.tick_params(labelsize=5)
    strip.set_title("outside\ndomain", fontsize=5)


def _plot_masses(data: Mapping[str, Any], axes: list[Any]) -> None:
    for ax, fam in zip(axes, _FAMILIES, strict=True):
        members = [d for d in data["variants"].values() if d["family"] == fam
                   or (fam == "no positional bias" and d["family"] == "causal OT")]
        for d in members:
            ax.plot(d["length"], d["window_mass"], color=d["colour"], lw=0.9, marker="o", ms=1.5)
            ax.plot(d["length"], d["exact_window_mass"], color=d["colour"], lw=0.6, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1)
        ax.set_title(f"(b) window mass, {fam}" if members else f"(b) {fam}: none run",
                     loc="left", fontsize=5)
        ax.tick_params(labelsize=5)
    for ax in axes:
        ax.set_xlabel("context length (bytes)", fontsize=5)
    axes[0].set_ylabel(f"mass on the last {data['window']} keys", fontsize=5)


def _plot_probe(data: Mapping[str, Any], ax: Any) -> None:
    for d in data["variants"].values():
        if not d["probe_distances"]:
            continue
        ax.plot(d["probe_distances"], d["probe_accuracy"], color=d["colour"], lw=0.9,
                marker="o", ms=1.5)
        ax.plot(d["probe_distances"], d["probe_prior_distant_mass"], color=d["colour"],
                lw=0.6, ls=":", alpha=0.7)
    ax.axvline(data["train_length"], color="0.5", lw=0.5, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("distance of the planted byte from the query (bytes; dashed: training "
                  "length)", fontsize=5)
    ax.set_ylabel("retrieval accuracy", fontsize=5)
    ax.tick_params(labelsize=5)
    ax.set_title(f"(c) recalling a planted byte in {data['design_length']} bytes of context",
                 loc="left", fontsize=6)


def fig7(results: Mapping[str, Any], path: str | os.PathLike[str], name: str = "path", *,
         loss_model: Mapping[str, Any] | None = None,
         heldout: Mapping[str, Any] | None = None) -> Path:
    """Draw fig7 to ``path`` (format from the suffix, one of ``FIGURE_SUFFIXES``),
    atomically and only over a regular file; return it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 7.5), layout="constrained")
    FigureCanvasAgg(fig)
    data = fig7_data(results, loss_model, heldout)
    plot_fig7(data, fig)
    fig.suptitle(fig7_caption(data), fontsize=7, wrap=True)
    with atomic_output(os.fspath(path), name, suffixes=FIGURE_SUFFIXES) as tmp:
        fig.savefig(tmp)
    return Path(path)

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
and whatever order the results file lists the variants in. :func:`fig7_data` computes,
:func:`plot_fig7` draws into a given ``matplotlib.figure.Figure`` (no pyplot, no global
backend switch); matplotlib is imported only inside the drawing functions.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from priors.cli import atomic_output

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
# Hue ranges per family (HSV degrees), so that related variants share a hue family.
_HUES = {"log-distance": (200, 280), "ALiBi": (20, 50), "KERPLE / T5": (90, 160),
         "no positional bias": (330, 360), "causal OT": (0, 15)}


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


def variant_colour(name: str) -> tuple[float, float, float]:
    """A colour that depends only on the variant's name: a hue inside its family's range
    picked by a hash of the name, lightness from a second hash (RGB in [0, 1])."""
    import colorsys

    h = hashlib.sha256(name.encode()).digest()
    lo, hi = _HUES[family(name)]
    hue = (lo + (hi - lo) * h[0] / 255) / 360
    light = 0.32 + 0.25 * h[1] / 255
    return colorsys.hls_to_rgb(hue, light, 0.75)


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
                "role": ("fitted" if name in fitted else "held out" if source == "heldout"
                         or loss_model else "in sample"),
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
    """Draw fig7 from :func:`fig7_data` into the matplotlib ``Figure`` ``fig``."""
    narrow = fig.get_figwidth() < 6
    grid = fig.add_gridspec(3, 4) if narrow else fig.add_gridspec(2, 4)
    ax_loss = fig.add_subplot(grid[0, :]) if narrow else fig.add_subplot(grid[0, :3])
    ax_probe = fig.add_subplot(grid[2, :]) if narrow else fig.add_subplot(grid[0, 3])
    row = 1
    ax_mass = [fig.add_subplot(grid[row, k]) for k in range(4)]
    _plot_loss(data, ax_loss)
    _plot_masses(data, ax_mass)
    _plot_probe(data, ax_probe)


def _plot_loss(data: Mapping[str, Any], ax: Any) -> None:
    inside = {n: d for n, d in data["variants"].items() if d["dilution"] is not None
              and d["family"] in ("log-distance", "ALiBi", "KERPLE / T5")
              and "learned" not in d["label"]}
    outside = {n: d for n, d in data["variants"].items() if n not in inside}
    lam_max = max([d["dilution"] for d in inside.values()] + [0.1])
    model = data.get("loss_model")
    if model:
        from proofs_check.extrapolation.lossmodel import LossModel

        lm = LossModel.from_dict(model)
        grid = np.linspace(0, lam_max * 1.05, 200)
        mean = np.array([lm.predict(x)[0] for x in grid])
        band = np.array([lm.interval(x) for x in grid])
        ax.fill_between(grid, band[:, 0], band[:, 1], color="0.85", lw=0)
        ax.plot(grid, mean, color="0.3", lw=1, label="loss model (fitted), 90% band")
    for d in inside.values():
        filled = d["role"] != "held out"
        lo, hi = d["ci95"]
        ax.errorbar(d["dilution"], d["change"], yerr=[[d["change"] - lo], [hi - d["change"]]],
                    fmt="o" if filled else "s", ms=4, color=d["colour"],
                    mfc=d["colour"] if filled else "white", capsize=2, lw=1)
        ax.annotate(d["label"], (d["dilution"], d["change"]), fontsize=5,
                    xytext=(3, 2), textcoords="offset points")
    x0 = lam_max * 1.15
    for k, d in enumerate(outside.values()):
        x = x0 + 0.06 * lam_max * k
        lo, hi = d["ci95"]
        ax.errorbar(x, d["change"], yerr=[[d["change"] - lo], [hi - d["change"]]], fmt="D",
                    ms=3, color=d["colour"], capsize=2, lw=1)
        ax.annotate(d["label"], (x, d["change"]), fontsize=5, rotation=60,
                    xytext=(2, 2), textcoords="offset points")
    if outside:
        ax.axvline(lam_max * 1.1, color="0.6", lw=0.5, ls=":")
    ax.axhline(0.0, color="0.4", lw=0.5)
    ax.set_xlabel("dilution of the least-diluted head, $\\Lambda$ (nats; right of the "
                  "dotted line: outside the model's domain)")
    ax.set_ylabel(f"loss change at {data['design_length']} (bits/byte)")
    ax.set_title("(a) loss change against the prior's dilution (filled: fitted; open: "
                 "held out)", loc="left", fontsize=8)


def _plot_masses(data: Mapping[str, Any], axes: list[Any]) -> None:
    for ax, fam in zip(axes, _FAMILIES, strict=True):
        for d in data["variants"].values():
            if d["family"] != fam and not (fam == "no positional bias"
                                           and d["family"] == "causal OT"):
                continue
            ax.plot(d["length"], d["window_mass"], color=d["colour"], lw=1, marker="o", ms=2,
                    label=d["label"])
            ax.plot(d["length"], d["exact_window_mass"], color=d["colour"], lw=0.7, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1)
        ax.set_title(f"(b) {fam}", loc="left", fontsize=7)
        ax.set_xlabel("length (bytes)", fontsize=6)
        ax.legend(fontsize=4, frameon=False, loc="lower left")
    axes[0].set_ylabel(f"window mass, W = {data['window']}")


def _plot_probe(data: Mapping[str, Any], ax: Any) -> None:
    for d in data["variants"].values():
        if not d["probe_distances"]:
            continue
        ax.plot(d["probe_distances"], d["probe_accuracy"], color=d["colour"], lw=1,
                marker="o", ms=2)
        ax.plot(d["probe_distances"], d["probe_prior_distant_mass"], color=d["colour"],
                lw=0.7, ls=":")
    ax.axvline(data["train_length"], color="0.5", lw=0.5, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("distance of the planted value (bytes)", fontsize=6)
    ax.set_ylabel("retrieval accuracy", fontsize=6)
    ax.set_title(f"(c) retrieval at {data['design_length']}", loc="left", fontsize=7)


def fig7(results: Mapping[str, Any], path: str | os.PathLike[str], name: str = "path", *,
         loss_model: Mapping[str, Any] | None = None,
         heldout: Mapping[str, Any] | None = None) -> Path:
    """Draw fig7 to ``path`` (format from the suffix, one of ``FIGURE_SUFFIXES``),
    atomically and only over a regular file; return it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 7), layout="constrained")
    FigureCanvasAgg(fig)
    data = fig7_data(results, loss_model, heldout)
    plot_fig7(data, fig)
    fig.suptitle(fig7_caption(data), fontsize=7, wrap=True)
    with atomic_output(os.fspath(path), name, suffixes=FIGURE_SUFFIXES) as tmp:
        fig.savefig(tmp)
    return Path(path)

"""``fig7``: change in loss and measured window mass against length, per prior.

(a) paired change in bits per byte from the training length (error bars: one ``se`` of
the results file, the larger of the paired-over-windows and over-seeds standard errors);
(b) measured window mass ``M_l(W)`` (mean over layers and heads, solid) beside the exact
prior mass of ``priors`` (dashed, same colour). :func:`fig7_data` computes, :func:`plot_fig7`
draws into a given ``matplotlib.figure.Figure`` (the ``paper_figs.py`` convention: no
pyplot, no global backend switch); matplotlib is imported only inside :func:`fig7`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from priors.cli import atomic_output

__all__ = ["FIGURE_SUFFIXES", "fig7", "fig7_data", "load_results", "plot_fig7"]

#: Formats fig7 is written in (the suffix of the path).
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")

_KEYS = ("length", "change", "se", "window_mass", "exact_window_mass")


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A results file written by ``python -m proofs_check.extrapolation --out``."""
    return json.loads(Path(path).read_text())


def fig7_data(results: Mapping[str, Any]) -> dict[str, Any]:
    """What fig7 plots: per variant the lengths, change, se, measured and exact window
    mass; plus the window, training length, preset and seeds."""
    cfg = results["config"]
    return {
        "window": cfg["window"],
        "train_length": cfg["train_length"],
        "preset": cfg["preset"],
        "seeds": list(cfg["seeds"]),
        "variants": {
            name: {
                **{k: [float(e[k]) for e in v["per_length"]] for k in _KEYS},
                "class": "/".join(v["classes"]),
            }
            for name, v in results["variants"].items()
        },
    }


def plot_fig7(data: Mapping[str, Any], fig: Any) -> None:
    """Draw fig7 from :func:`fig7_data` into the matplotlib ``Figure`` ``fig``: panels side
    by side on a wide figure, stacked on a narrow one (a ``paper_figs`` column), with the
    legend below the panels."""
    narrow = fig.get_figwidth() < 6
    ax_l, ax_m = fig.subplots(2, 1) if narrow else fig.subplots(1, 2)
    handles = []
    n_var = len(data["variants"])
    if n_var > 10:  # the default cycle repeats after 10: take distinct colours from tab20
        from matplotlib import colormaps

        palette = [colormaps["tab20"](k % 20) for k in range(n_var)]
    else:
        palette = [f"C{k}" for k in range(n_var)]
    for i, (name, d) in enumerate(data["variants"].items()):
        c = palette[i]
        ls = "-" if d["class"] == "summable" else "-."
        h = ax_l.errorbar(d["length"], d["change"], yerr=d["se"], marker="o", ms=2, color=c,
                          ls=ls, capsize=2, lw=1, label=f"{name} ({d['class']})")
        handles.append(h)
        ax_m.plot(d["length"], d["window_mass"], marker="o", ms=2, color=c, ls=ls, lw=1)
        ax_m.plot(d["length"], d["exact_window_mass"], ls="--", color=c, lw=0.7)
    for ax in (ax_l, ax_m):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length $l$ (bytes)")
    ax_l.axhline(0.0, color="0.4", lw=0.5)
    ax_l.set_ylabel(f"$\\Delta$ bits/byte from $l={data['train_length']}$")
    ax_l.set_title("(a) paired change in loss", loc="left")
    ax_m.set_ylabel(f"$M_l(W={data['window']})$")
    ax_m.set_title("(b) window mass: measured, exact prior (dashed)", loc="left")
    ax_m.set_ylim(0, 1)
    fig.legend(handles=handles, loc="outside lower center", ncol=2 if narrow else 3,
               fontsize=6, frameon=False)


def fig7(results: Mapping[str, Any], path: str | os.PathLike[str], name: str = "path") -> Path:
    """Draw fig7 from a results dict to ``path`` (format from the suffix, one of
    ``FIGURE_SUFFIXES``), atomically and only over a regular file; return it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(fig)
    data = fig7_data(results)
    plot_fig7(data, fig)
    n_seeds = len(data["seeds"])
    fig.suptitle(f"Length extrapolation ({data['preset']} run, {n_seeds} "
                 f"seed{'s' if n_seeds != 1 else ''})")
    with atomic_output(os.fspath(path), name, suffixes=FIGURE_SUFFIXES) as tmp:
        fig.savefig(tmp)
    return Path(path)

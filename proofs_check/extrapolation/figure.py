"""``fig7``: change in loss and measured window mass against length, per prior.

Left: paired change in bits per byte from the training length (error bars: the ``se`` of
the results, one standard error). Right: measured window mass ``M_l(W)`` (mean over layers
and heads; solid) beside the exact prior mass of ``priors`` (dashed, same colour).
Computation (:func:`fig7_data`) is apart from drawing; matplotlib is imported lazily.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["fig7", "fig7_data"]


def fig7_data(results: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Per variant: ``length``, ``change``, ``se``, ``window_mass``, ``exact_window_mass``."""
    keys = ("length", "change", "se", "window_mass", "exact_window_mass")
    return {
        name: {k: [float(e[k]) for e in v["per_length"]] for k in keys}
        for name, v in results["variants"].items()
    }


def fig7(results: dict[str, Any], path: str | os.PathLike[str] | None = None) -> Any:
    """Draw fig7 from a results dict; save to ``path`` when given; return the figure."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    data = fig7_data(results)
    cfg = results["config"]
    fig, (ax_l, ax_m) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, d) in enumerate(data.items()):
        c = colors[i % len(colors)]
        ax_l.errorbar(d["length"], d["change"], yerr=d["se"], marker="o", ms=3, color=c,
                      label=name, capsize=2)
        ax_m.plot(d["length"], d["window_mass"], marker="o", ms=3, color=c, label=name)
        ax_m.plot(d["length"], d["exact_window_mass"], ls="--", color=c, lw=1)
    for ax in (ax_l, ax_m):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length l (bytes)")
    ax_l.axhline(0.0, color="k", lw=0.5)
    ax_l.set_ylabel(f"change in bits/byte from l = {cfg['train_length']}")
    ax_m.set_ylabel(f"window mass M_l(W = {cfg['window']})  (dashed: exact prior)")
    ax_m.set_ylim(0, 1)
    ax_l.legend(fontsize=7, ncol=2)
    fig.suptitle(f"Length extrapolation ({cfg['preset']} run, {len(cfg['seeds'])} seeds)")
    if path is not None:
        fig.savefig(path)
    return fig

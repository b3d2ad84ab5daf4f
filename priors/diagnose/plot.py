"""``--plot FILE``: distant mass ``D_l(W)`` against the length ``l``, one curve per head.

matplotlib is imported here only (Agg backend, no display). Each curve is the exact distant
mass (docs/theory.md §5) at 48 log-spaced lengths from ``W`` to the longest length, plus the
requested lengths as markers; heads sharing one prior share one curve (labelled by the
group). The numbers are the ``priors.window`` values rounded to float64 for drawing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["plot_distant_mass"]


def _label(p: Any) -> str:
    layer = "all layers" if p.layer is None else f"layer {p.layer}"
    head = "all heads" if p.head is None else f"head {p.head}"
    return f"{layer}, {head}"


def plot_distant_mass(diag: Any, file: str, points: int = 48) -> None:
    """Draw ``diag`` (a ``Diagnosis``) into ``file`` (format from its extension)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from priors.mass import masses

    w, lmax = diag.window, max(diag.lengths)
    grid = sorted({int(x) for x in np.geomspace(max(w, 1), lmax, points)} | set(diag.lengths))
    grid = [g for g in grid if g >= w]
    fig, ax = plt.subplots(figsize=(8, 5))
    seen: set[Any] = set()
    curves = 0
    for r in diag.heads:
        enc = r.prior.encoding
        if enc is None or enc in seen:
            continue
        seen.add(enc)
        ys = [float(masses(enc, w, n, dps=17)[3]) for n in grid]
        line, = ax.plot(grid, ys, lw=1, label=_label(r.prior) if curves < 16 else None)
        ax.plot(diag.lengths, [float(m["distant_mass"]) for m in r.masses], "o", ms=3,
                color=line.get_color())
        curves += 1
    ax.set_xscale("log")
    ax.set_xlabel("query length l")
    ax.set_ylabel(f"distant mass D_l(W), W = {w} (B = 0, exact)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{diag.model.model_type}: {diag.model.family}, {curves} distinct priors")
    if curves:
        ax.legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    fig.savefig(file)
    plt.close(fig)

"""``--plot FILE``: distant mass ``D_l(W)`` against the length ``l``, one curve per prior.

Each curve is the exact distant mass (docs/theory.md §5, ``B = 0``) at 48 log-spaced lengths
from ``W`` to the longest length, with markers at the requested lengths; heads that share
a prior share a curve, labelled with all of them (layers and heads as ranges). Every curve
is in the legend with its own colour and line style (10 colours times 4 styles, then
markers). Up to ``MAX_CURVES`` curves go in one panel; more are split into one panel per
layer group. Encoder heads (the T5 encoder's last row) get their own panel; when the
diagnosis left them out, the title says so. ``log_scale`` draws ``D`` on a log axis (an
ALiBi head's ``D`` of 1e-187 is a flat line at 0 on a linear one). ``plot_curves`` is the
computation, ``draw`` the drawing (matplotlib imported there only, Agg backend). The
numbers are ``priors.mass.masses`` values rounded to float64 for drawing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from priors.diagnose.heads import layer_ranges

__all__ = ["MAX_CURVES", "Curve", "draw", "plot_curves"]

#: Most curves drawn in one panel before splitting by layer group.
MAX_CURVES = 40
_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("", "o", "s", "^", "v", "D")


@dataclass
class Curve:
    """One prior's distant mass on the grid, the heads it stands for, and its panel."""

    label: str
    panel: str
    lengths: list[int]
    distant: list[float]
    marks: list[tuple[int, float]]


def _label(priors: list[Any]) -> tuple[str, str]:
    if any(p.layers is None for p in priors):
        layers = "all layers"
    else:
        ls = sorted({x for p in priors for x in p.layers})
        layers = f"layer{'s' if len(ls) > 1 else ''} {layer_ranges(ls)}"
    if any(p.head is None for p in priors):
        heads = "all heads"
    else:
        hs = sorted({p.head for p in priors})
        heads = f"head{'s' if len(hs) > 1 else ''} {layer_ranges(hs)}"
    return f"{layers}, {heads}", layers


def plot_curves(diag: Any, points: int = 48) -> list[Curve]:
    """The curves of ``diag`` (a ``Diagnosis``): one per distinct (prior, stack)."""
    from priors.mass import masses

    w, lmax = diag.window, max(diag.lengths)
    grid = sorted({int(x) for x in np.geomspace(max(w, 1), lmax, points)} | set(diag.lengths))
    grid = [g for g in grid if g >= w]
    out = []
    for stack, results in (("decoder", diag.heads), ("encoder", diag.encoder_heads)):
        groups: dict[Any, list[Any]] = {}
        for r in results:
            if r.prior.encoding is not None and r.masses:
                groups.setdefault(r.prior.encoding, []).append(r)
        for enc, rs in groups.items():
            label, layers = _label([r.prior for r in rs])
            ys = [float(masses(enc, w, n, dps=17)[3]) for n in grid]
            marks = [(m["length"], float(m["distant_mass"])) for m in rs[0].masses]
            out.append(Curve(label, f"{stack}: {layers}", grid, ys, marks))
    return out


def _panels(curves: list[Curve]) -> dict[str, list[Curve]]:
    by_stack: dict[str, list[Curve]] = {}
    for c in curves:
        by_stack.setdefault(c.panel.split(":")[0], []).append(c)
    out: dict[str, list[Curve]] = {}
    for stack, cs in by_stack.items():
        if len(cs) <= MAX_CURVES:
            out[stack] = cs
        else:
            for c in cs:
                out.setdefault(c.panel, []).append(c)
    return out


def draw(diag: Any, file: str, *, log_scale: bool = False, points: int = 48) -> int:
    """Draw ``diag`` into ``file`` (format from its extension); returns the number of
    curves. ``ValueError`` (nothing written) when no head has masses to draw."""
    curves = plot_curves(diag, points)
    if not curves:
        raise ValueError("--plot: nothing to draw (no head has masses: "
                         + ("every head is refused" if all(r.prior.refusal for r in diag.heads)
                            else "the prior needs the weights") + ")")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(curves)
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(9 * cols, 4.5 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, cs) in zip(axes.flat, panels.items(), strict=False):
        for i, c in enumerate(cs):
            color = colors[i % len(colors)]
            style = _STYLES[(i // len(colors)) % len(_STYLES)]
            marker = _MARKERS[(i // (len(colors) * len(_STYLES))) % len(_MARKERS)]
            ys = np.asarray(c.distant)
            keep = ys > 0 if log_scale else np.ones(ys.shape, dtype=bool)
            ax.plot(np.asarray(c.lengths)[keep], ys[keep], style, color=color, lw=1,
                    marker=marker or None, ms=3, markevery=8, label=c.label)
            mx = [(n, y) for n, y in c.marks if y > 0 or not log_scale]
            if mx:
                ax.plot(*zip(*mx, strict=True), "o", ms=4, color=color)
        ax.set_xscale("log")
        if log_scale:
            ax.set_yscale("log")
            ax.set_ylim(top=2.0)
        else:
            ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("query length l")
        ax.set_ylabel(f"D_l(W), W = {diag.window}")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=6, ncol=max(1, -(-len(cs) // 20)), loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    m = diag.model
    left_out = "" if diag.encoder_heads or not m.encoder_note else (
        f"; encoder heads left out ({m.encoder_note.split(':')[0]})")
    refused = sum(1 for r in diag.heads if r.prior.refusal)
    fig.suptitle(f"{m.model_type}: distant mass at B = 0 (exact), {len(curves)} distinct "
                 f"priors{left_out}" + (f"; {refused} refused entries not drawn"
                                         if refused else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(file)
    plt.close(fig)
    return len(curves)

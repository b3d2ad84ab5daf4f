"""The readable report of a ``Diagnosis`` (``python -m priors.diagnose`` without ``--json``).

One header (model, weights, notes, precision), one table per stack (decoder heads, encoder
heads) with a row per entry (layers as ranges, head, mechanism, parameter, class, the
distant mass at each length, the bracket, the limit, the growth), then the growth summary,
the margin and the measurement.
"""

from __future__ import annotations

import math
import os
from typing import Any

import mpmath

__all__ = ["diagnosis_text", "short_length"]


def short_length(n: int) -> str:
    """``1e6`` for a power of ten from 1e5 on, the integer otherwise."""
    if n >= 10**5 and n == 10 ** round(math.log10(n)):
        return f"1e{round(math.log10(n))}"
    return str(n)


def _param(p: Any) -> str:
    params = p.params
    if p.refusal is not None:
        out = "-"
    elif p.mechanism == "alibi":
        out = f"m={params['slope']:.6g}"
    elif p.mechanism == "relative-buckets":
        out = f"tail={params['table'][-1]:.4g}" if "table" in params else "no table"
        if "local_radius" in params:
            out += f", radius={params['local_radius']}"
    elif "sliding_window" in params:
        out = f"window={params['sliding_window']}"
    elif "attention_chunk_size" in params:
        out = f"chunk={params['attention_chunk_size']}"
    else:
        out = "-"
    if p.temperature is not None:
        out = ("" if out == "-" else out + ", ") + "tau(l)"
    return out


def _weights_line(m: Any) -> str:
    if not m.weights:
        return "weights: none (config only)"
    names = ", ".join(os.path.basename(w) for w in m.weights)
    if m.weights_read:
        return f"weights read: {', '.join(os.path.basename(w) for w in m.weights_read)}"
    return f"weights: {names} (not read: the prior comes from the config)"


def _table(diag: Any, results: list[Any], num: Any) -> list[str]:
    header = ["layers", "head", "mechanism", "param", "class"]
    header += [f"D(l={short_length(n)})" for n in diag.lengths]
    if diag.score_bound > 0:
        header += [f"D+(l={short_length(max(diag.lengths))})"]
    header += ["M(l->inf)"]
    if diag.tol is not None:
        header += ["growth", "ok"]
    rows = []
    for r in results:
        p = r.prior
        cls = "refused" if p.classification is None else p.classification.label
        row = [p.layer_label, "all" if p.head is None else str(p.head), p.mechanism,
               _param(p), cls]
        if r.masses:
            row += [num(mm["distant_mass"]) for mm in r.masses]
            if diag.score_bound > 0:
                row.append(num(r.masses[-1]["distant_mass_bracket"][1]))
        else:
            row += ["-"] * (len(diag.lengths) + (diag.score_bound > 0))
        row.append("none" if r.masses and r.limit_window_mass is None
                   else num(r.limit_window_mass))
        if diag.tol is not None:
            row += [num(r.growth), "-" if r.within_tol is None else
                    ("yes" if r.within_tol else "NO")]
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return ["  " + fmt.format(*header)] + ["  " + fmt.format(*r).rstrip() for r in rows]


def diagnosis_text(diag: Any, digits: int = 6) -> str:
    """The report of ``diag``, numbers rounded to ``digits`` significant digits."""
    digits = min(digits, diag.dps)
    m = diag.model

    def num(x: Any) -> str:
        return "-" if x is None else mpmath.nstr(x, digits, min_fixed=-4, max_fixed=6)

    lines = [
        f"model: {diag.path}",
        f"  model_type {m.model_type}, {m.num_layers} layers x {m.num_heads} heads, "
        f"mechanism: {m.family}; {_weights_line(m)}",
    ]
    lines += [f"  note: {n}" for n in m.notes]
    lines.append(
        f"window W = {diag.window}, content-score bound B = {diag.score_bound!r}; "
        f"masses exact for the stated parameters, printed to {digits} significant digits "
        f"(computed with {diag.dps}; --json gives all {diag.dps})")
    if any(r.prior.temperature is not None for r in diag.heads) and diag.score_bound > 0:
        lines.append("  brackets (D+) use tau(l) B at each length: see the temperature notes")
    encoder_title = "encoder heads (last query row, past-side buckets)"
    for title, results in (("heads", diag.heads), (encoder_title, diag.encoder_heads)):
        if not results:
            continue
        lines.append("")
        lines.append(f"{title}:")
        lines.extend(_table(diag, results, num))
    if m.encoder_note and not diag.encoder_heads:
        lines += ["", f"encoder heads: left out ({m.encoder_note})"]
    if any(r.prior.measured_encoding is not None for r in diag.heads):
        lines.append("  (eager_prior in --json: the prior transformers' eager code applies, "
                     "which differs here; --measure checks that one)")
    if diag.tol is not None:
        lines.append("")
        fails = sum(1 for r in diag.heads if r.within_tol is False)
        lines.append(
            f"growth of the distant mass from lmin = {diag.lmin} to lmax = "
            f"{max(diag.lengths)}: {fails} of {len(diag.heads)} head entries exceed "
            f"tol = {diag.tol!r}")
        if diag.margin is not None:
            lo, hi = diag.margin.delta_bracket
            bracket = (
                f"proven bracket [{lo:.10g}, {hi:.10g}]" if diag.margin.delta_lo_proven
                else f"upper end {hi:.10g} proven; lower end not proven: "
                f"{diag.margin.delta_lo_reason}")
            lines.append(
                f"  margin: a log-distance prior -alpha ln(1+d) with alpha >= 1 + "
                f"{diag.margin.delta:.10g} keeps it within tol ({bracket}, docs/theory.md §7, "
                "priors.margin)")
        if diag.margin_note:
            lines.append(f"  {diag.margin_note}")
    if diag.measurement is not None:
        lines.append("")
        lines.extend(diag.measurement.to_text(digits))
    return "\n".join(lines)

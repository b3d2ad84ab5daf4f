"""What ``--measure`` found, and what it means: the verdict, its reasons, the warnings.

``Measurement.rows`` holds one record per (length, layer, head) from
``priors.diagnose.checks.check_layer`` (or a refusal). The verdict:

* ``fail``: a checked row lies outside Theorem 3's bracket; or the model masks keys the
  prior keeps (zero weight on them in every head of the layer: a window the diagnosis does
  not apply), or attends keys the prior masks; or the prior's exact sums disagree with its
  bias (relative ``SUM_RTOL``);
* ``inconclusive``: no row could be checked (every row trivial, underflowed or refused);
* ``pass`` otherwise.

Warnings (the verdict stays): the last row's measured masses are far from the prior (the
content would need a spread above ``FAR_SPREAD`` to move them there), or a row's content
spread exceeds ``IMPLAUSIBLE_SPREAD`` (a logit range of more than 100 nats, next to where
float32 weights underflow, ``e^-103``: the subtracted bias is almost surely not the one the
model applies). Per head and length also: the last row's entropy (nats, beside ``ln k`` of
a uniform row over its ``k`` keys) and the mean weight on the first token (an attention
sink above 0.3, the usual threshold).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from priors.diagnose.checks import RTOL, SINK_THRESHOLD, SUM_RTOL

__all__ = ["FAR_SPREAD", "IMPLAUSIBLE_SPREAD", "Measurement"]

#: Content spread (nats) beyond which measured masses count as far from the prior.
FAR_SPREAD = 10.0
#: Content spread (nats) beyond which a row's spread is implausible for trained attention.
IMPLAUSIBLE_SPREAD = 50.0


def _finite(x: Any) -> Any:
    """``x`` with every non-finite float replaced by ``None`` (strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _where(rows: list[dict[str, Any]]) -> str:
    layers = sorted({r["layer"] for r in rows})
    shown = ", ".join(map(str, layers[:6])) + (" ..." if len(layers) > 6 else "")
    return f"layer{'s' if len(layers) > 1 else ''} {shown}"


def _beyond(rows: list[dict[str, Any]], key: str,
            limit: float) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The records whose ``key`` exceeds ``limit``, and the largest of them."""
    over = [r for r in rows if (r.get(key) or 0) > limit]
    return over, max(over, key=lambda r: r[key]) if over else None


@dataclass
class Measurement:
    """Per (length, layer, head) measured numbers beside the prior's, and the verdict."""

    window: int
    lengths: list[int]
    source: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    def _total(self, key: str) -> int:
        return sum(r.get(key, 0) for r in self.rows)

    @property
    def rows_checked(self) -> int:
        return self._total("rows_checked")

    @property
    def rows_outside(self) -> int:
        return self._total("rows_outside")

    def findings(self) -> tuple[str, list[str], list[str]]:
        """``(verdict, reasons, warnings)`` (module docstring)."""
        reasons, warnings = [], []
        for key, what in (
            ("rows_outside", "rows outside Theorem 3's bracket (the weights are not a "
             "softmax of bounded content plus this prior)"),
            ("rows_masked_by_model", "rows where the model masks keys the prior keeps "
             "(zero in every head: a window the diagnosis does not apply)"),
            ("rows_attending_masked", "rows where the model attends keys the prior masks"),
        ):
            bad = [r for r in self.rows if r.get(key)]
            if bad:
                reasons.append(f"{sum(r[key] for r in bad)} {what}, {_where(bad)}")
        sums = [r for r in self.rows if r.get("prior_sum_error", 0) > SUM_RTOL]
        if sums:
            worst = max(r["prior_sum_error"] for r in sums)
            reasons.append(f"the prior's exact sums disagree with its bias values (relative "
                           f"{worst:.2g} > {SUM_RTOL:g}), {_where(sums)}")
        far, worst = _beyond(self.rows, "content_needed", FAR_SPREAD)
        if far:
            warnings.append(
                f"measured masses far from the prior in {len(far)} heads ({_where(far)}; "
                f"worst layer {worst['layer']} head {worst['head']} at l = {worst['length']}: "
                f"M = {worst['measured_window_mass']:.4g} against {worst['prior_window_mass']:.4g}"
                f", content spread >= {worst['content_needed']:.3g} needed): is the prior the "
                "one the model applies?")
        wild, worst = _beyond(self.rows, "spread_max", IMPLAUSIBLE_SPREAD)
        if wild:
            warnings.append(
                f"content spread up to {worst['spread_max']:.3g} (layer {worst['layer']} head "
                f"{worst['head']}): implausible for trained attention (> {IMPLAUSIBLE_SPREAD:g},"
                " a logit range of more than 100 nats); the bias subtracted is probably not "
                "the model's")
        refused = [r for r in self.rows if r.get("refused")]
        if refused:
            warnings.append(f"{len(refused)} heads not checked: {refused[0]['refused']}")
        if reasons:
            return "fail", reasons, warnings
        if self.rows_checked == 0:
            trivial = self._total("rows_trivial")
            under = self._total("rows_underflow")
            return "inconclusive", [
                f"no row could be checked ({trivial} trivial rows with no distant key, {under} "
                f"with an underflowed weight, {len(refused)} refused heads): measure a length "
                f"well beyond the window W = {self.window} and any sliding window"], warnings
        return "pass", [], warnings

    @property
    def verdict(self) -> str:
        return self.findings()[0]

    @staticmethod
    def _sinks(heads: list[dict[str, Any]], n: int) -> dict[str, Any]:
        """The attention-sink rate at length ``n``: sink heads over heads measured."""
        at = [r for r in heads if r["length"] == n]
        sinks = sum(1 for r in at if r["sink"])
        return {"sinks": sinks, "heads": len(at), "rate": sinks / len(at) if at else None}

    def to_dict(self) -> dict[str, Any]:
        """The verdict, its reasons, the totals and the per-head numbers; strict JSON
        (non-finite numbers as ``null``)."""
        verdict, reasons, warnings = self.findings()
        heads = [r for r in self.rows if not r.get("refused")]
        return _finite({
            "window": self.window,
            "lengths": self.lengths,
            "tokens": self.source,
            "verdict": verdict,
            "reasons": reasons,
            "warnings": warnings,
            "rows_checked": self.rows_checked,
            "rows_outside": self.rows_outside,
            "rows_trivial": self._total("rows_trivial"),
            "rows_underflow": self._total("rows_underflow"),
            "rows_masked_by_model": self._total("rows_masked_by_model"),
            "rows_attending_masked": self._total("rows_attending_masked"),
            "rtol": RTOL,
            "sinks": {str(n): self._sinks(heads, n) for n in self.lengths},
            "sink_threshold": SINK_THRESHOLD,
            "precision": "measured masses: float64 sums of the model's float32 weights "
            "(relative error below 1e-6); prior masses: float64 running sums of the prior, "
            f"checked against its exact sums to {SUM_RTOL:g}",
            "heads": self.rows,
        })

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``, strict JSON."""
        return json.dumps(self.to_dict(), allow_nan=False, **json_kwargs)

    def to_text(self, digits: int = 6) -> list[str]:
        verdict, reasons, warnings = self.findings()

        def g(x: Any, k: int = digits) -> str:
            return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) \
                else f"{x:.{k}g}"

        lines = [f"measured (tokens: {self.source}; eager attention; W = {self.window}; "
                 "measured masses: float32 weights summed in float64, prior masses to 1e-9):"]
        header = ["l", "layer", "head", "M meas", "M prior", "D meas", "D prior", "B max",
                  "B median", "rows", "outside", "entropy", "ln k", "first", "sink"]
        table = []
        for r in self.rows:
            if r.get("refused"):
                table.append([str(r["length"]), str(r["layer"]), str(r["head"]), "refused"]
                             + ["-"] * (len(header) - 4))
                continue
            table.append([
                str(r["length"]), str(r["layer"]), str(r["head"]),
                g(r["measured_window_mass"]), g(r["prior_window_mass"]),
                g(r["measured_distant_mass"]), g(r["prior_distant_mass"]),
                g(r["spread_max"], 4), g(r["spread_median"], 4), str(r["rows_checked"]),
                str(r["rows_outside"]), g(r["entropy"], 4), g(r["entropy_uniform"], 4),
                g(r["first_token_weight"], 3), "yes" if r["sink"] else "no",
            ])
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(header)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines.append("  " + fmt.format(*header))
        lines += ["  " + fmt.format(*t).rstrip() for t in table]
        if any(r.get("prior") == "eager" for r in self.rows):
            lines.append("  (M/D prior: the prior transformers' eager code applies, which "
                         "differs from the checkpoint's here; see the notes above)")
        heads = [r for r in self.rows if not r.get("refused")]
        for n in self.lengths:
            rate = self._sinks(heads, n)
            if rate["heads"]:
                lines.append(f"  l = {n}: attention-sink rate {rate['sinks']}/{rate['heads']} "
                             f"(heads whose mean weight on the first token is above "
                             f"{SINK_THRESHOLD:g})")
        lines.append(
            f"Theorem 3 bracket for each row's own content spread B_l: verdict {verdict.upper()}"
            f" ({self.rows_checked} rows checked, {self.rows_outside} outside, relative "
            f"tolerance {RTOL:g}; {self._total('rows_trivial')} trivial rows with no distant "
            f"key and {self._total('rows_underflow')} with an underflowed weight not checked)")
        lines += [f"  reason: {x}" for x in reasons]
        lines += [f"  warning: {x}" for x in warnings]
        return lines

"""Per-head masses, limits, brackets and the growth test of a checkpoint (docs/theory.md §5, §7).

For every distinct prior found by ``priors.diagnose.families`` (docs/theory.md §5):

* the exact window mass ``M_l(W) = S_W / S_l`` and distant mass ``D_l(W) = T_l / S_l`` at
  each length (``priors.mass.masses``: O(1) in ``l`` for every built-in encoding, ``dps``
  significant digits, the tail summed directly);
* the limit ``M_inf(W) = S_W / S_inf`` (0 when the prior dilutes) and ``D_inf = 1 - M_inf``;
* with a content-score bound ``B``, Theorem 3's attained brackets
  ``S_W / (S_W + e^{2B} T_l) <= M_l(W) <= e^{2B} S_W / (e^{2B} S_W + T_l)``;
* with a tolerance ``tol``, the growth ``G = D^+_{L1} - D^-_{L0}`` (``= D_{L1} - D_{L0}`` at
  ``B = 0``) between ``L0 = lmin`` and the longest length ``L1``, whether ``G <= tol``, and
  the margin ``delta*`` of ``priors.margin.select_margin`` (docs/theory.md §7): a log-distance
  prior ``-alpha ln(1+d)`` with ``alpha >= 1 + delta*`` keeps the growth within ``tol``.

Each distinct encoding is evaluated once, however many heads share it. Masses are exact for
the stated parameters (the slopes and tables the checkpoint defines, as float64 numbers) to
``dps`` significant digits.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import mpmath

from priors.diagnose.families import HeadPrior, ModelPriors
from priors.encodings import Encoding
from priors.mass import masses
from priors.validation import as_count

__all__ = ["DEFAULT_LENGTHS", "DEFAULT_WINDOW", "Diagnosis", "HeadResult", "evaluate"]

DEFAULT_WINDOW = 512
DEFAULT_LENGTHS = (4096, 65536, 10**6, 10**9, 10**15)


@dataclass
class HeadResult:
    """One head's prior with its exact numbers (mpmath values at ``dps`` digits)."""

    prior: HeadPrior
    masses: list[dict[str, Any]] = field(default_factory=list)
    limit_window_mass: Any = None
    limit_distant_mass: Any = None
    growth: Any = None
    within_tol: bool | None = None


@dataclass
class Diagnosis:
    """The whole diagnosis: model, settings, per-head results, the margin, notes."""

    path: str
    model: ModelPriors
    window: int
    lengths: list[int]
    score_bound: float
    dps: int
    tol: float | None
    lmin: int | None
    heads: list[HeadResult]
    encoder_heads: list[HeadResult]
    margin: Any = None
    measurement: Any = None

    # ---------------------------------------------------------------------------- output

    def _num(self, x: Any) -> str | None:
        if x is None:
            return None
        return mpmath.nstr(x, self.dps, min_fixed=-4, max_fixed=6)

    def _head_dict(self, r: HeadResult) -> dict[str, Any]:
        p = r.prior
        out: dict[str, Any] = {
            "layer": p.layer,
            "head": p.head,
            "stack": p.stack,
            "mechanism": p.mechanism,
            "params": p.params,
            "class": p.classification.label,
            "rate": p.classification.rate,
            "evidence": p.classification.to_dict()["evidence"],
            "masses": [],
            "limit_window_mass": self._num(r.limit_window_mass),
            "limit_distant_mass": self._num(r.limit_distant_mass),
        }
        for m in r.masses:
            row = {
                "length": m["length"],
                "window_mass": self._num(m["window_mass"]),
                "distant_mass": self._num(m["distant_mass"]),
            }
            if self.score_bound > 0:
                row["window_mass_bracket"] = [self._num(v) for v in m["window_mass_bracket"]]
                row["distant_mass_bracket"] = [self._num(v) for v in m["distant_mass_bracket"]]
            out["masses"].append(row)
        if self.tol is not None and r.growth is not None:
            out["growth"] = {
                "lmin": self.lmin,
                "lmax": max(self.lengths),
                "growth": self._num(r.growth),
                "tol": self.tol,
                "within_tol": r.within_tol,
            }
            if not r.within_tol and self.margin is not None:
                out["growth"]["margin"] = self.margin.delta
        if p.measured_encoding is not None:
            out["eager_prior"] = {"encoding": p.measured_encoding.name,
                                  "params": p.measured_encoding.params}
        return out

    def to_dict(self) -> dict[str, Any]:
        """``{"model": path, "heads": [...], ...}``, JSON-ready (masses as decimal strings,
        ``dps`` significant digits, as ``priors.mass`` prints them)."""
        m = self.model
        out: dict[str, Any] = {
            "model": self.path,
            "model_type": m.model_type,
            "mechanism": m.family,
            "num_layers": m.num_layers,
            "num_heads": m.num_heads,
            "weights": m.weights,
            "window": self.window,
            "lengths": self.lengths,
            "score_bound": self.score_bound,
            "dps": self.dps,
            "digits": self.dps,
            "precision": (
                f"masses exact for the stated parameters to {self.dps} significant digits "
                "(decimal strings); parameters are the checkpoint's numbers as float64"
            ),
            "notes": m.notes,
            "heads": [self._head_dict(r) for r in self.heads],
        }
        if self.encoder_heads:
            out["encoder_heads"] = [self._head_dict(r) for r in self.encoder_heads]
        if self.tol is not None:
            out["tol"] = self.tol
            out["lmin"] = self.lmin
            out["margin"] = None if self.margin is None else {
                "delta": self.margin.delta,
                "delta_bracket": list(self.margin.delta_bracket),
                "delta_lo_proven": self.margin.delta_lo_proven,
                "alpha": self.margin.alpha,
                "sup_method": self.margin.sup_method,
                "sup_explanation": self.margin.sup_explanation,
                "meaning": "a log-distance prior -alpha ln(1+d) with alpha >= 1 + delta keeps "
                "the growth of the distant mass within tol (docs/theory.md §7); "
                + ("proven bracket" if self.margin.delta_lo_proven else
                   f"upper end proven; lower end not proven: {self.margin.delta_lo_reason}"),
            }
        if self.measurement is not None:
            out["measure"] = self.measurement.to_dict()
        return out

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``."""
        return json.dumps(self.to_dict(), **json_kwargs)

    def to_text(self, digits: int = 6) -> str:
        """A readable report; numbers rounded to ``digits`` significant digits."""
        digits = min(digits, self.dps)
        m = self.model

        def num(x: Any) -> str:
            return "-" if x is None else mpmath.nstr(x, digits, min_fixed=-4, max_fixed=6)

        weights = ", ".join(m.weights) if m.weights else "none (config only)"
        lines = [
            f"model: {self.path}",
            f"  model_type {m.model_type}, {m.num_layers} layers x {m.num_heads} heads, "
            f"mechanism: {m.family}; weights read: {weights}",
        ]
        lines += [f"  note: {n}" for n in m.notes]
        lines.append(
            f"window W = {self.window}, content-score bound B = {self.score_bound!r}; "
            f"masses exact for the stated parameters, printed to {digits} significant digits "
            f"(computed with {self.dps}; --json gives all {self.dps})"
        )
        for title, results in (("heads", self.heads), ("encoder heads (last query row, "
                                                       "past-side buckets)", self.encoder_heads)):
            if not results:
                continue
            lines.append("")
            lines.append(f"{title}:")
            lines.extend(self._table(results, num))
        if self.tol is not None:
            lines.append("")
            fails = sum(1 for r in self.heads if r.within_tol is False)
            lines.append(
                f"growth of the distant mass from lmin = {self.lmin} to lmax = "
                f"{max(self.lengths)}: {fails} of {len(self.heads)} head entries exceed "
                f"tol = {self.tol!r}"
            )
            if self.margin is not None:
                lo, hi = self.margin.delta_bracket
                bracket = (
                    f"proven bracket [{lo:.10g}, {hi:.10g}]" if self.margin.delta_lo_proven
                    else f"upper end {hi:.10g} proven; lower end not proven: "
                    f"{self.margin.delta_lo_reason}"
                )
                lines.append(
                    f"  margin: a log-distance prior -alpha ln(1+d) with alpha >= 1 + "
                    f"{self.margin.delta:.10g} keeps it within tol ({bracket}, docs/theory.md §7, "
                    "priors.margin)"
                )
        if self.measurement is not None:
            lines.append("")
            lines.extend(self.measurement.to_text(digits))
        return "\n".join(lines)

    def _table(self, results: list[HeadResult], num: Any) -> list[str]:
        header = ["layer", "head", "mechanism", "param", "class"]
        header += [f"D(l={_short(n)})" for n in self.lengths]
        if self.score_bound > 0:
            header += [f"D+(l={_short(max(self.lengths))})"]
        header += ["M(l->inf)"]
        if self.tol is not None:
            header += ["growth", "ok"]
        rows = []
        for r in results:
            p = r.prior
            row = [
                "all" if p.layer is None else str(p.layer),
                "all" if p.head is None else str(p.head),
                p.mechanism,
                _param(p),
                p.classification.label,
            ]
            if r.masses:
                row += [num(mm["distant_mass"]) for mm in r.masses]
                if self.score_bound > 0:
                    row.append(num(r.masses[-1]["distant_mass_bracket"][1]))
            else:
                row += ["-"] * (len(self.lengths) + (self.score_bound > 0))
            row.append(num(r.limit_window_mass))
            if self.tol is not None:
                row += [num(r.growth), "-" if r.within_tol is None else
                        ("yes" if r.within_tol else "NO")]
            rows.append(row)
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        return ["  " + fmt.format(*header)] + ["  " + fmt.format(*r) for r in rows]


def _short(n: int) -> str:
    if n >= 10**5 and n == 10 ** round(math.log10(n)):
        return f"1e{round(math.log10(n))}"
    return str(n)


def _param(p: HeadPrior) -> str:
    if p.mechanism == "alibi":
        return f"m={p.params['slope']:.6g}"
    if p.mechanism == "relative-buckets":
        if "saturation_distance" in p.params:
            return f"tail={p.params['table'][-1]:.4g}"
        return "no table"
    if "sliding_window" in p.params:
        return f"window={p.params['sliding_window']}"
    return "-"


def _growth(enc: Encoding, w: int, l0: int, l1: int, b: float, dps: int) -> Any:
    _, d0, _, _ = masses(enc, w, l0, score_bound=b, dps=dps)
    _, d1, _, _ = masses(enc, w, l1, score_bound=b, dps=dps)
    with mpmath.workdps(dps):
        return d1[1] - d0[0]  # D^+_{L1} - D^-_{L0}; both exact at B = 0


def evaluate(
    path: str,
    model: ModelPriors,
    *,
    window: int = DEFAULT_WINDOW,
    lengths: Any = DEFAULT_LENGTHS,
    score_bound: float = 0.0,
    dps: int = 30,
    tol: float | None = None,
    lmin: int | None = None,
) -> Diagnosis:
    """Masses, limits, brackets and the growth test for every head of ``model``."""
    w = as_count(window, "window", minimum=1)
    ls = sorted({as_count(n, "length", minimum=1) for n in lengths})
    if not ls:
        raise ValueError("length: give at least one length")
    if ls[0] < w:
        raise ValueError(f"length must be >= window = {w}, got {ls[0]}")
    if not (isinstance(score_bound, (int, float)) and math.isfinite(score_bound)
            and 0 <= score_bound <= 1e6):
        raise ValueError(f"score_bound must be in [0, 1e6], got {score_bound!r}")
    if isinstance(dps, bool) or not isinstance(dps, int) or not 15 <= dps <= 200:
        raise ValueError(f"dps must be an integer in [15, 200], got {dps!r}")
    l1 = ls[-1]
    if tol is not None:
        if not (isinstance(tol, (int, float)) and 0 < tol < 1):
            raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
        lmin = w if lmin is None else as_count(lmin, "lmin", minimum=1)
        if not w <= lmin < l1:
            raise ValueError(f"lmin must lie in [window, longest length) = [{w}, {l1}), "
                             f"got {lmin}")
    elif lmin is not None:
        raise ValueError("lmin only applies with tol")
    cache: dict[Encoding, HeadResult] = {}

    def result(p: HeadPrior) -> HeadResult:
        enc = p.encoding
        if enc is None:
            return HeadResult(p)
        if enc not in cache:
            r = HeadResult(p)
            for n in ls:
                m_br, d_br, m, d = masses(enc, w, n, score_bound=score_bound, dps=dps)
                r.masses.append({"length": n, "window_mass": m, "distant_mass": d,
                                 "window_mass_bracket": m_br, "distant_mass_bracket": d_br})
            r.limit_window_mass = enc.limit_window_mass(w, dps=dps)
            r.limit_distant_mass = enc.limit_distant_mass(w, dps=dps)
            if tol is not None:
                r.growth = _growth(enc, w, lmin, l1, score_bound, dps)
                r.within_tol = bool(r.growth <= tol)
            cache[enc] = r
        c = cache[enc]
        return HeadResult(p, c.masses, c.limit_window_mass, c.limit_distant_mass, c.growth,
                          c.within_tol)

    heads = [result(p) for p in model.heads]
    encoder = [result(p) for p in model.encoder_heads]
    diag = Diagnosis(path, model, w, ls, float(score_bound), dps, tol, lmin, heads, encoder)
    if tol is not None and any(r.within_tol is False for r in heads):
        from priors.margin import select_margin

        diag.margin = select_margin(w, l1, tol, lmin=lmin, score_bound=score_bound)
    return diag

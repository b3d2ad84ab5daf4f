"""Per-head masses, limits, brackets and the growth test of a checkpoint (docs/theory.md §5, §7).

For every distinct prior found by ``priors.diagnose.families`` (docs/theory.md §5):

* the exact window mass ``M_l(W) = S_W / S_l`` and distant mass ``D_l(W) = T_l / S_l`` at
  each length (``priors.mass.masses``: O(1) in ``l`` for every built-in encoding, ``dps``
  significant digits, the tail summed directly);
* the limit ``M_inf(W) = S_W / S_inf`` (0 when the prior dilutes; none for chunked
  attention, whose masses oscillate) and ``D_inf = 1 - M_inf``;
* with a content-score bound ``B``, Theorem 3's attained brackets at each length, with ``B``
  replaced by ``tau(l) B`` where the family multiplies the logits by a temperature
  ``tau(l)`` (``priors.diagnose.scaling``):
  ``S_W / (S_W + e^{2 tau B} T_l) <= M_l(W) <= e^{2 tau B} S_W / (e^{2 tau B} S_W + T_l)``;
* with a tolerance ``tol``, the growth ``G = D^+_{L1} - D^-_{L0}`` (``= D_{L1} - D_{L0}`` at
  ``B = 0``) between ``L0 = lmin`` and the longest length ``L1``, whether ``G <= tol``, and
  the margin ``delta*`` of ``priors.margin.select_margin`` (docs/theory.md §7): a log-distance
  prior ``-alpha ln(1+d)`` with ``alpha >= 1 + delta*`` keeps the growth within ``tol``.

Each distinct (prior, temperature) is evaluated once, however many heads share it. Masses
are exact for the stated parameters (the models' slopes and tables as float64 numbers,
``tau(l) B`` rounded to float64) to ``dps`` significant digits. A refused head (a mechanism
not modelled) gets no numbers. The readable text is ``priors.diagnose.text``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import mpmath

from priors.diagnose.heads import HeadPrior, ModelPriors
from priors.mass import masses
from priors.validation import as_count

__all__ = ["DEFAULT_LENGTHS", "DEFAULT_WINDOW", "DPS_RANGE", "Diagnosis", "HeadResult",
           "evaluate"]

DEFAULT_WINDOW = 512
DEFAULT_LENGTHS = (4096, 65536, 10**6, 10**9, 10**15)
#: Significant digits accepted for the masses (the command line and the API share it).
DPS_RANGE = (15, 200)
#: Largest content-score bound (as the other commands).
MAX_SCORE_BOUND = 1e6


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
    margin_note: str | None = None
    measurement: Any = None

    def num(self, x: Any) -> str | None:
        """``x`` as a decimal string of ``dps`` significant digits (``None`` stays)."""
        if x is None:
            return None
        return mpmath.nstr(x, self.dps, min_fixed=-4, max_fixed=6)

    def _head_dict(self, r: HeadResult) -> dict[str, Any]:
        p = r.prior
        out: dict[str, Any] = {
            "layers": None if p.layers is None else list(p.layers),
            "head": p.head,
            "stack": p.stack,
            "mechanism": p.mechanism,
            "params": p.params,
            "class": None if p.classification is None else p.classification.label,
            "rate": None if p.classification is None else p.classification.rate,
            "evidence": (None if p.classification is None
                         else p.classification.to_dict()["evidence"]),
            "masses": [],
            "limit_window_mass": self.num(r.limit_window_mass),
            "limit_distant_mass": self.num(r.limit_distant_mass),
        }
        if p.refusal is not None:
            out["refused"] = p.refusal
        if p.temperature is not None:
            out["temperature"] = p.temperature.to_dict()
        for m in r.masses:
            row = {
                "length": m["length"],
                "window_mass": self.num(m["window_mass"]),
                "distant_mass": self.num(m["distant_mass"]),
            }
            if p.temperature is not None:
                row["temperature"] = m["temperature"]
            if self.score_bound > 0:
                row["window_mass_bracket"] = [self.num(v) for v in m["window_mass_bracket"]]
                row["distant_mass_bracket"] = [self.num(v) for v in m["distant_mass_bracket"]]
            out["masses"].append(row)
        if self.tol is not None and r.growth is not None:
            out["growth"] = {
                "lmin": self.lmin,
                "lmax": max(self.lengths),
                "growth": self.num(r.growth),
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
            "weights_read": m.weights_read,
            "window": self.window,
            "lengths": self.lengths,
            "score_bound": self.score_bound,
            "dps": self.dps,
            "precision": (
                f"masses exact for the stated parameters to {self.dps} significant digits "
                "(decimal strings); parameters are the model's numbers (float32 slopes and "
                "buckets where the model computes them so) as float64"
            ),
            "notes": m.notes,
            "heads": [self._head_dict(r) for r in self.heads],
        }
        if self.encoder_heads:
            out["encoder_heads"] = [self._head_dict(r) for r in self.encoder_heads]
        if m.encoder_note:
            out["encoder_note"] = m.encoder_note
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
            if self.margin_note:
                out["margin_note"] = self.margin_note
        if self.measurement is not None:
            out["measure"] = self.measurement.to_dict()
        return out

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``, strict JSON (no NaN/Infinity)."""
        return json.dumps(self.to_dict(), allow_nan=False, **json_kwargs)

    def to_text(self, digits: int = 6) -> str:
        """A readable report; numbers rounded to ``digits`` significant digits."""
        from priors.diagnose.text import diagnosis_text

        return diagnosis_text(self, digits)


def _growth(enc: Any, w: int, l0: int, l1: int, b0: float, b1: float, dps: int) -> Any:
    _, d0, _, _ = masses(enc, w, l0, score_bound=b0, dps=dps)
    _, d1, _, _ = masses(enc, w, l1, score_bound=b1, dps=dps)
    with mpmath.workdps(dps):
        return d1[1] - d0[0]  # D^+_{L1} - D^-_{L0}; both exact at B = 0


def check_dps(dps: object) -> int:
    """``dps`` as an integer in ``DPS_RANGE`` (``ValueError`` naming it otherwise)."""
    lo, hi = DPS_RANGE
    if isinstance(dps, bool) or not isinstance(dps, int) or not lo <= dps <= hi:
        raise ValueError(f"dps must be an integer in [{lo}, {hi}], got {dps!r}")
    return dps


def _check(window: Any, lengths: Any, score_bound: Any, dps: Any, tol: Any,
           lmin: Any) -> tuple[int, list[int], float, int, int | None]:
    w = as_count(window, "window", minimum=1)
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Iterable):
        raise ValueError(f"lengths must be a sequence of integers, got {lengths!r:.60}")
    ls = sorted({as_count(n, "length", minimum=1) for n in lengths})
    if not ls:
        raise ValueError("length: give at least one length")
    if ls[0] < w:
        raise ValueError(f"length must be >= window = {w}, got {ls[0]}")
    if not (isinstance(score_bound, (int, float)) and not isinstance(score_bound, bool)
            and math.isfinite(score_bound) and 0 <= score_bound <= MAX_SCORE_BOUND):
        raise ValueError(f"score_bound must be in [0, {MAX_SCORE_BOUND:g}], got "
                         f"{score_bound!r}")
    check_dps(dps)
    if tol is not None:
        if not (isinstance(tol, (int, float)) and not isinstance(tol, bool) and 0 < tol < 1):
            raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
        lmin = w if lmin is None else as_count(lmin, "lmin", minimum=1)
        if not w <= lmin < ls[-1]:
            raise ValueError(f"lmin must lie in [window, longest length) = [{w}, {ls[-1]}), "
                             f"got {lmin}")
    elif lmin is not None:
        raise ValueError("lmin only applies with tol")
    return w, ls, float(score_bound), dps, lmin


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
    w, ls, b, dps, lmin = _check(window, lengths, score_bound, dps, tol, lmin)
    l1 = ls[-1]
    cache: dict[Any, HeadResult] = {}

    def tau(p: HeadPrior, n: int) -> float:
        return 1.0 if p.temperature is None else p.temperature.at(n)

    def result(p: HeadPrior) -> HeadResult:
        enc = p.encoding
        if enc is None:
            return HeadResult(p)
        # the temperature is part of the key even at B = 0: each row states tau(l)
        key = (enc, p.temperature)
        if key not in cache:
            r = HeadResult(p)
            for n in ls:
                t = tau(p, n)
                m_br, d_br, m, d = masses(enc, w, n, score_bound=t * b, dps=dps)
                r.masses.append({"length": n, "window_mass": m, "distant_mass": d,
                                 "window_mass_bracket": m_br, "distant_mass_bracket": d_br,
                                 "temperature": t})
            if enc.limit_known:
                r.limit_window_mass = enc.limit_window_mass(w, dps=dps)
                r.limit_distant_mass = enc.limit_distant_mass(w, dps=dps)
            if tol is not None:
                r.growth = _growth(enc, w, lmin, l1, tau(p, lmin) * b, tau(p, l1) * b, dps)
                r.within_tol = bool(r.growth <= tol)
            cache[key] = r
        c = cache[key]
        return HeadResult(p, c.masses, c.limit_window_mass, c.limit_distant_mass, c.growth,
                          c.within_tol)

    heads = [result(p) for p in model.heads]
    encoder = [result(p) for p in model.encoder_heads]
    diag = Diagnosis(path, model, w, ls, b, dps, tol, lmin, heads, encoder)
    if tol is not None and any(r.within_tol is False for r in heads):
        from priors.margin import select_margin

        b_eff = max(tau(r.prior, l1) for r in heads) * b
        if b_eff <= MAX_SCORE_BOUND:
            diag.margin = select_margin(w, l1, tol, lmin=lmin, score_bound=b_eff)
            if b_eff != b:
                diag.margin_note = (f"the margin is for the content bound tau(L1) B = "
                                    f"{b_eff:.10g} (the largest temperature at L1 = {l1})")
        else:
            diag.margin_note = (f"no margin: tau(L1) B = {b_eff:.6g} exceeds "
                                f"{MAX_SCORE_BOUND:g}")
    return diag

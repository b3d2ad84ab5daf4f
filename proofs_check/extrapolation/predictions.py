"""Predictions registered before training, and their check against the results.

:func:`register` writes down, from the priors alone (``priors.encodings``, docs/theory.md
§5, §7) and from a loss model fitted on *other* runs, what a set of variants will do; the
document is committed before the runs start. :func:`check` compares a results file with
that document, never with a rule restated afterwards. Every claim names its variant, the
quantity, the numbers fixed in advance and how the measurement's standard error ``se``
(the two-way bootstrap of ``results``) enters.

Claims (``kind``):

* ``mass-dilutes`` (a prior whose every head dilutes, known before training): the
  measured window mass lost from ``L0`` to the longest length exceeds
  ``max(exact / 2, 3 se)``, ``exact`` the prior's own loss (registered).
* ``mass-summable``: the measured distant mass grows by at most the prior's growth
  ``+ GROWTH_SLACK + 3 se`` (a stated allowance for the content scores); for
  ``margin-T`` up to the design length by at most ``T + 3 se`` (its guarantee over
  ``[W, design length]``, docs/theory.md §7).
* ``mass-learned`` (``t5``, ``kerple-log``): the same two rules by the class of the
  *learned* prior; the class is known only after training, so these are post hoc.
* ``loss-degrades`` (diluting priors outside the loss model's domain: NoPE, RoPE, the
  causal OT operator): the change at the longest length exceeds ``3 se``.
* ``loss-interval`` (the loss model's domain, each length from ``2 L0``, points not used
  to fit it): the measured change lies within the registered 90% prediction interval
  widened by the measurement's error, ``|measured - mean| <= z_90 sqrt(sd^2 + se^2)``.
* ``rank-loss``: Spearman's rank correlation between the registered quantity (the
  dilution ``Lambda`` before a model is fitted, the predicted change after) and the
  measured change over the listed (variant, length) points is at least ``RANK_MIN``.
* ``rank-retrieval``: over the listed variants (not those of the run the loss model was
  fitted on: their probe was measured there), the probe's accuracy at distances
  ``d >= 2 L0`` (at the design length) ranks like the best head's prior log-weight at
  those distances (mean over ``d``): Spearman at least ``RETRIEVAL_RANK_MIN``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from proofs_check.extrapolation.lossmodel import (
    LOSS_MODEL_VERSION,
    Z90,
    LossModel,
    dilution,
    spearman,
)

__all__ = [
    "GROWTH_SLACK",
    "PREDICTIONS_VERSION",
    "RANK_MIN",
    "RETRIEVAL_RANK_MIN",
    "SAME_SETTINGS",
    "Verdict",
    "check",
    "check_registration",
    "register",
]

PREDICTIONS_VERSION = "extrapolation-predictions/2"
#: Growth of the measured distant mass allowed beyond the exact prior's (summable priors).
GROWTH_SLACK = 0.05
#: Smallest rank correlation of the ``rank-loss`` claims.
RANK_MIN = 0.8
#: Smallest rank correlation of the ``rank-retrieval`` claims.
RETRIEVAL_RANK_MIN = 0.5
#: The configuration fields a results file must share with the registration.
SAME_SETTINGS = ("preset", "train_length", "window", "design_length", "max_context", "steps",
         "batch", "lr", "warmup", "n_windows", "d_model", "n_layers", "n_heads",
         "heldout_fraction", "probe")


def _prior_facts(cfg: Any, variant: Any, lengths: tuple[int, ...]) -> dict[str, Any]:
    """What the priors say before training about one variant (``priors`` only)."""
    from proofs_check.extrapolation.evaluate import prior_summary
    from proofs_check.extrapolation.experiment import probe_distances

    if variant.learned:
        return {"known_before_training": False}
    exponent = variant.exponent(cfg.window, cfg.design_length)
    encs = variant.constant_score_priors(cfg.n_heads, exponent)
    l0, lmax = lengths[0], lengths[-1]
    mass = {n: float(np.mean([float(e.window_mass(cfg.window, n)) for e in encs]))
            for n in (l0, lmax)}
    dists = probe_distances(cfg.design_length, cfg.train_length)
    far = [d for d in dists if d >= 2 * cfg.train_length]
    logw = np.asarray(prior_summary(encs, cfg.design_length, far)["log_weight"])
    return {
        "known_before_training": True,
        "classes": sorted({e.classify().label for e in encs}),
        "exponent": exponent,
        "exact_window_mass": {str(n): m for n, m in mass.items()},
        "exact_window_mass_lost": mass[l0] - mass[lmax],
        "dilution": {str(n): dilution(encs, cfg.train_length, n, cfg.score_bytes)
                     for n in lengths[1:]},
        "far_distances": far,
        "far_log_weight_best_head": float(logw.max(0).mean()) if far else None,
    }


def register(cfg: Any, *, loss_model: LossModel | None = None,
             loss_model_sha256: str | None = None) -> dict[str, Any]:
    """The registration document of ``cfg``'s variants at ``cfg.lengths`` (module
    docstring), from the priors and, if given, a fitted ``loss_model``."""
    lengths = tuple(cfg.lengths)
    facts = {v.name: _prior_facts(cfg, v, lengths) for v in cfg.variants}
    fitted, seen = set(), set()
    if loss_model is not None:  # what the fitting run measured is in sample
        fit = loss_model.fitted_on
        fitted = {(v, n) for v in fit.get("variants", []) for n in fit.get("lengths", [])}
        seen = set(fit.get("source_variants", []))
    claims: list[dict[str, Any]] = []
    lmax = lengths[-1]
    in_domain_points = []
    for v in cfg.variants:
        f = facts[v.name]
        if not f["known_before_training"]:
            claims.append({"id": f"{v.name}/mass", "variant": v.name, "kind": "mass-learned",
                           "length": lmax, "claim": "window mass by the learned prior's class "
                           "(post hoc: the class is known after training)"})
            continue
        if f["classes"] == ["dilutes"]:
            claims.append({"id": f"{v.name}/mass", "variant": v.name, "kind": "mass-dilutes",
                           "length": lmax, "exact_lost": f["exact_window_mass_lost"],
                           "claim": "window mass lost L0->Lmax > max(exact lost / 2, 3 se)"})
        elif f["classes"] == ["summable"]:
            # the margin guarantee covers [W, design length] only
            tol = v.value if v.kind == "margin" and lmax <= cfg.design_length else None
            claims.append({
                "id": f"{v.name}/mass", "variant": v.name, "kind": "mass-summable",
                "length": lmax, "exact_growth": f["exact_window_mass_lost"], "tol": tol,
                "claim": (f"distant-mass growth <= tol {tol} + 3 se" if tol is not None else
                          f"distant-mass growth <= exact + {GROWTH_SLACK} + 3 se")})
        if not v.fixed_bias:
            if f["classes"] == ["dilutes"]:
                claims.append({"id": f"{v.name}/loss", "variant": v.name,
                               "kind": "loss-degrades", "length": lmax,
                               "claim": "a diluting prior outside the loss model's domain: "
                               "change at Lmax > 3 se"})
            continue
        for n in lengths[1:]:
            lam = f["dilution"][str(n)]
            in_domain_points.append((v.name, n, lam))
            if loss_model is None or (v.name, n) in fitted:
                continue
            mean, sd = loss_model.predict(lam)
            lo, hi = loss_model.interval(lam)
            claims.append({"id": f"{v.name}/loss@{n}", "variant": v.name,
                           "kind": "loss-interval", "length": n, "dilution": lam,
                           "predicted": mean, "sd": sd, "interval90": [lo, hi],
                           "claim": "|change - predicted| <= z90 sqrt(sd^2 + se^2)"})
    if loss_model is None:
        points = in_domain_points
        quantity = "dilution"
    else:
        points = [(v, n, loss_model.predict(lam)[0]) for v, n, lam in in_domain_points
                  if (v, n) not in fitted]
        quantity = "predicted change"
    if len(points) >= 3:
        claims.append({"id": "rank/loss", "kind": "rank-loss", "points": [
            [v, n, q] for v, n, q in points], "quantity": quantity, "minimum": RANK_MIN,
            "claim": f"Spearman({quantity}, measured change) >= {RANK_MIN}"})
    known = [v.name for v in cfg.variants if facts[v.name]["known_before_training"]
             and facts[v.name]["far_log_weight_best_head"] is not None and v.name not in seen]
    if cfg.probe and len(known) >= 3:
        claims.append({"id": "rank/retrieval", "kind": "rank-retrieval", "variants": known,
                       "log_weight": [facts[n]["far_log_weight_best_head"] for n in known],
                       "minimum": RETRIEVAL_RANK_MIN,
                       "claim": "Spearman(best-head prior log-weight at d >= 2 L0, retrieval "
                       f"accuracy there) >= {RETRIEVAL_RANK_MIN}"})
    return {
        "kind": "registered predictions (docs/extrapolation.md)",
        "version": PREDICTIONS_VERSION,
        "loss_model": (loss_model.to_dict() | {"sha256": loss_model_sha256}
                       if loss_model is not None else
                       {"version": LOSS_MODEL_VERSION, "status": "form registered; "
                        "coefficients fitted on this set's results (in sample)"}),
        "config": cfg.to_dict(),
        "priors": facts,
        "claims": claims,
    }


def document_sha256(doc: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a document (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """One registered claim checked: what was claimed, measured, the bound, the verdict
    (``holds`` None: not measured in these results)."""

    id: str
    kind: str
    claim: str
    measured: float | None
    bound: str
    holds: bool | None

    def __post_init__(self) -> None:  # plain Python types (JSON, identity comparisons)
        if self.holds is not None:
            object.__setattr__(self, "holds", bool(self.holds))
        if self.measured is not None:  # an undefined statistic (NaN) is not measured
            value = float(self.measured)
            object.__setattr__(self, "measured", value if math.isfinite(value) else None)

    def line(self) -> str:
        mark = {True: "holds", False: "FAILS", None: "not measured"}[self.holds]
        meas = "-" if self.measured is None else f"{self.measured:+.4f}"
        return f"{self.id:<24} {mark:<12} measured {meas:>8}  {self.bound}   ({self.claim})"


#: The fields of each kind of claim that :func:`check` reads, besides ``id``, ``kind`` and
#: ``claim`` (strings), as JSON types (``priors.cli.check_shape``); ``points`` of
#: ``rank-loss`` are ``[variant, length, quantity]`` triples.
_CLAIM_FIELDS: dict[str, dict[str, Any]] = {
    "mass-learned": {"variant": str, "length": int},
    "mass-dilutes": {"variant": str, "length": int, "exact_lost": float},
    "mass-summable": {"variant": str, "length": int, "exact_growth": float,
                      "tol": (float, type(None))},
    "loss-degrades": {"variant": str, "length": int},
    "loss-interval": {"variant": str, "length": int, "predicted": float, "sd": float},
    "rank-loss": {"points": list, "minimum": float},
    "rank-retrieval": {"variants": list, "log_weight": list, "minimum": float},
}


def check_registration(registration: Any) -> None:
    """``ValueError`` saying where ``registration`` is not a document :func:`register`
    writes, as far as :func:`check` reads it: its ``config`` (``train_length``) and every
    claim, whose ``kind`` must be one of ``_CLAIM_FIELDS`` and carry that kind's fields.

    A command that checks results against a registration calls this before any work, so
    that a garbled claim is refused up front, never found after the training."""
    from priors.cli import ListOf, Record, check_shape

    base = {"id": str, "kind": str, "claim": str}
    check_shape(registration, Record({"config": Record({"train_length": int}),
                                      "claims": ListOf(Record(base))}))
    for i, c in enumerate(registration["claims"]):
        where = f"['claims'][{i}]"
        fields = _CLAIM_FIELDS.get(c["kind"])
        if fields is None:
            raise ValueError(f"{where}['kind'] must be one of {', '.join(_CLAIM_FIELDS)}, "
                             f"got {c['kind']!r}")
        check_shape(c, Record(fields), where)
        if c["kind"] == "rank-loss":
            check_shape(c["points"], ListOf(list), f"{where}['points']")
            for k, point in enumerate(c["points"]):
                if len(point) != 3:
                    raise ValueError(f"{where}['points'][{k}] must be [variant, length, "
                                     f"quantity], got {len(point)} items")
                for item, kind in zip(point, (str, int, float), strict=True):
                    check_shape(item, kind, f"{where}['points'][{k}]")
        if c["kind"] == "rank-retrieval":
            check_shape(c["variants"], ListOf(str), f"{where}['variants']")
            check_shape(c["log_weight"], ListOf(float), f"{where}['log_weight']")
            if len(c["variants"]) != len(c["log_weight"]):
                raise ValueError(f"{where}: 'variants' and 'log_weight' differ in length")


def _length_entry(v: dict[str, Any], n: int) -> dict[str, Any] | None:
    return next((e for e in v["per_length"] if e["length"] == n), None)


def _mass_lost(v: dict[str, Any], length: int, files: list[int] | None) -> tuple[float, float]:
    """Measured window mass lost from ``L0`` to ``length`` and its bootstrap se."""
    first, last = v["per_length"][0], _length_entry(v, length)
    if files is None or "window_mass_windows_by_seed" not in last:
        return v["window_mass_lost"], v["window_mass_lost_se"]
    from proofs_check.extrapolation.results import bootstrap_mean

    lost = bootstrap_mean(np.asarray(first["window_mass_windows_by_seed"])
                          - np.asarray(last["window_mass_windows_by_seed"]), files)
    return lost["mean"], lost["se"]


def _mass_verdict(c: dict[str, Any], v: dict[str, Any], files: list[int] | None) -> Verdict:
    lost, se = _mass_lost(v, c["length"], files)
    first, last = v["per_length"][0], _length_entry(v, c["length"])
    kind = c["kind"]
    if kind == "mass-learned":
        exact = first["exact_window_mass"] - last["exact_window_mass"]
        if v["classes"] == ["dilutes"]:
            kind, c = "mass-dilutes", {**c, "exact_lost": exact}
        elif v["classes"] == ["summable"]:
            kind, c = "mass-summable", {**c, "exact_growth": exact, "tol": None}
        else:
            return Verdict(c["id"], c["kind"], c["claim"], lost, "heads in both classes", None)
    if kind == "mass-dilutes":
        thr = max(0.5 * c["exact_lost"], 3 * se)
        return Verdict(c["id"], c["kind"], c["claim"], lost, f"> {thr:.4f}", lost > thr)
    base = c["tol"] if c["tol"] is not None else c["exact_growth"] + GROWTH_SLACK
    thr = base + 3 * se
    return Verdict(c["id"], c["kind"], c["claim"], lost, f"<= {thr:.4f}", lost <= thr)


def _retrieval_accuracy(v: dict[str, Any], far: int) -> float | None:
    probe = v["probe"][-1] if v.get("probe") else None
    if probe is None:
        return None
    acc = [a for d, a in zip(probe["distances"], probe["accuracy"], strict=True) if d >= far]
    return float(np.mean(acc)) if acc else None


def check(registration: dict[str, Any], results: dict[str, Any]) -> list[Verdict]:
    """Every claim of ``registration`` checked on ``results`` (module docstring);
    ``ValueError`` if the two were made with different settings or the registration is
    not one (:func:`check_registration`)."""
    check_registration(registration)
    reg_cfg, res_cfg = registration["config"], results["config"]
    diff = [k for k in SAME_SETTINGS if reg_cfg.get(k) != res_cfg.get(k)]
    if diff:
        raise ValueError(f"the results were not made with the registered settings "
                         f"(differ: {', '.join(diff)})")
    out = []
    variants = results["variants"]
    files = results.get("windows", {}).get("files")
    for c in registration["claims"]:
        kind = c["kind"]
        if kind.startswith("mass") or kind.startswith("loss"):
            v = variants.get(c["variant"])
            entry = None if v is None else _length_entry(v, c["length"])
            if entry is None:
                out.append(Verdict(c["id"], kind, c["claim"], None, "", None))
            elif kind.startswith("mass"):
                out.append(_mass_verdict(c, v, files))
            elif kind == "loss-degrades":
                thr = 3 * entry["se"]
                out.append(Verdict(c["id"], kind, c["claim"], entry["change"], f"> {thr:.4f}",
                                   entry["change"] > thr))
            else:
                half = Z90 * math.sqrt(c["sd"] ** 2 + entry["se"] ** 2)
                lo, hi = c["predicted"] - half, c["predicted"] + half
                out.append(Verdict(c["id"], kind, c["claim"], entry["change"],
                                   f"in [{lo:+.4f}, {hi:+.4f}] (predicted {c['predicted']:+.4f})",
                                   lo <= entry["change"] <= hi))
        elif kind == "rank-loss":
            pairs = []
            for name, n, q in c["points"]:
                entry = _length_entry(variants[name], n) if name in variants else None
                if entry is not None:
                    pairs.append((q, entry["change"]))
            rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
            ok = None if len(pairs) < len(c["points"]) else rho >= c["minimum"]
            out.append(Verdict(c["id"], kind, c["claim"], rho,
                               f">= {c['minimum']} over {len(pairs)} points", ok))
        elif kind == "rank-retrieval":
            far = 2 * reg_cfg["train_length"]
            pairs = [(w, _retrieval_accuracy(variants[n], far))
                     for n, w in zip(c["variants"], c["log_weight"], strict=True)
                     if n in variants]
            pairs = [p for p in pairs if p[1] is not None]
            rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
            ok = None if len(pairs) < len(c["variants"]) else rho >= c["minimum"]
            out.append(Verdict(c["id"], kind, c["claim"], rho,
                               f">= {c['minimum']} over {len(pairs)} variants", ok))
    return out

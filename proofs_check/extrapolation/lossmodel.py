"""The quantitative loss model: the loss change from the prior alone, with intervals.

The quantity (docs/extrapolation.md, "The loss model"). Under a fixed additive bias
``b_h(d)`` the softmax normaliser of head ``h`` at a query that sees ``q`` keys is
``S_h(q) = sum_{d<q} e^{b_h(d)}`` (docs/theory.md §5, ``B = 0``). A model trained at
length ``L0`` has only seen ``q <= L0``; at ``q > L0`` every weight it learned to use is
divided by ``S_h(q) / S_h(L0)``, and the fraction ``1 - S_h(L0)/S_h(q)`` of the head's
attention goes to distances it never saw. The log of that factor,

    Lambda_h(q) = ln S_h(q) - ln S_h(L0)        (nats; 0 for q <= L0),

is the head's *dilution*: the shift of every learned log-weight. The experiment scores
the same ``S`` targets at every length ``L`` (query lengths ``q = L - S + 1 .. L``)
against a baseline that gives each target exactly ``L0`` keys, so the dilution the
scored targets see is the mean ``Lambda_h(L) = mean_q Lambda_h(q)``. A model can route
what it needs through its least-diluted head (ALiBi's steepest slope keeps
``Lambda = 0``), so the model uses the least-diluted head,

    Lambda(L) = min_h mean_{q = L-S+1..L} Lambda_h(q),

and states the loss change in bits per byte as a quadratic in it,

    change(L) = c0 + c1 Lambda(L) + c2 Lambda(L)^2,

fitted on one set of variants (``fit``) and judged on others (``judge``). Its domain is
softmax attention with a fixed, non-constant additive bias (``Variant.fixed_bias``):
NoPE and RoPE carry position through the causal mask and rotations, which a normaliser
does not describe; learned biases are unknown before training; the causal OT operator
has no softmax normaliser.

Fitting: weighted least squares with the known standard error ``se_i`` of each point
and a between-point variance ``tau^2`` for what the quantity does not capture, chosen by
restricted maximum likelihood (the random-effects meta-regression). The prediction for a
new point is ``mean = x'c`` with the standard deviation of the true change
``sd = sqrt(tau^2 + x' Cov(c) x)``; a measurement with its own standard error ``se`` is
within the prediction at level ``p`` when ``|measured - mean| <= z_p sqrt(sd^2 + se^2)``.
Points of one variant at several lengths share the trained models, so ``Cov(c)``, which
treats them as independent, is optimistic; the out-of-sample coverage is the test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "LOSS_MODEL_VERSION",
    "LossModel",
    "LossPoint",
    "dilution",
    "fit_loss_model",
    "head_dilutions",
    "judge",
    "spearman",
]

#: Names the form of the model; a registered prediction records it.
LOSS_MODEL_VERSION = (
    "loss-model/1: change = c0 + c1 Lambda + c2 Lambda^2 (bits per byte), Lambda = min over "
    "heads of the mean over the scored targets of ln S_h(q) - ln S_h(L0)"
)
#: Two-sided 90% normal quantile: the prediction intervals are 90% intervals.
Z90 = 1.6448536269514722


def head_dilutions(
    encodings: Sequence[Any], train_length: int, length: int, score_bytes: int
) -> np.ndarray | None:
    """``(H,)`` mean dilution ``mean_q ln(S_h(q) / S_h(L0))`` over ``q = length -
    score_bytes + 1 .. length`` (0 where ``q <= L0``), one per head; ``None`` for a prior
    that depends on the length (the causal-OT prior has no fixed normaliser).

    ``S_h(q)`` is a float64 cumulative sum of ``e^{b(d) - b(0)}`` over ``d < q`` (at most
    a few ten thousand positive terms: relative error below ``1e-12``; the tests compare
    it with ``priors``' exact ``partial_sum``)."""
    if score_bytes < 1 or length < score_bytes or train_length < 1:
        raise ValueError(f"need length >= score_bytes >= 1 and train_length >= 1, got "
                         f"{length}, {score_bytes}, {train_length}")
    out = []
    q = np.arange(length - score_bytes + 1, length + 1)  # query lengths of the targets
    top = max(length, train_length)
    for enc in encodings:
        if enc.length_dependent:
            return None
        b = np.asarray(enc.bias(np.arange(top, dtype=float)), dtype=np.float64)
        s = np.cumsum(np.exp(b - b[0]))  # s[m - 1] = S(m) / e^{b(0)}
        grow = np.log(s[q - 1] / s[train_length - 1])
        out.append(float(np.mean(np.maximum(grow, 0.0))))
    return np.asarray(out)


def dilution(
    encodings: Sequence[Any], train_length: int, length: int, score_bytes: int
) -> float | None:
    """``Lambda(L)`` of the module docstring: the least-diluted head's mean dilution."""
    heads = head_dilutions(encodings, train_length, length, score_bytes)
    return None if heads is None else float(heads.min())


@dataclass(frozen=True)
class LossPoint:
    """One (variant, length): its dilution, measured change and standard error."""

    variant: str
    length: int
    dilution: float
    change: float
    se: float


def _design(lam: np.ndarray) -> np.ndarray:
    lam = np.asarray(lam, dtype=np.float64)
    return np.stack([np.ones_like(lam), lam, lam * lam], axis=-1)


@dataclass(frozen=True)
class LossModel:
    """A fitted loss model: coefficients ``(c0, c1, c2)``, their covariance, ``tau``, and
    where they came from (``fitted_on``: variants, lengths, source file and its sha256)."""

    coef: tuple[float, float, float]
    cov: tuple[tuple[float, ...], ...]
    tau: float
    fitted_on: dict[str, Any] = field(default_factory=dict)
    version: str = LOSS_MODEL_VERSION

    def predict(self, lam: float) -> tuple[float, float]:
        """``(mean, sd)`` of the true change at dilution ``lam`` (module docstring); inf or
        NaN, without a warning, where float64 overflows."""
        with np.errstate(over="ignore", invalid="ignore"):
            x = _design(np.asarray([lam]))[0]
            cov = np.asarray(self.cov)
            mean, var = float(x @ np.asarray(self.coef)), float(x @ cov @ x)
        return mean, math.sqrt(self.tau * self.tau + var)

    def interval(self, lam: float) -> tuple[float, float]:
        """The 90% prediction interval of the true change at ``lam``."""
        mean, sd = self.predict(lam)
        return mean - Z90 * sd, mean + Z90 * sd

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        out = asdict(self)
        out["cov"] = [list(r) for r in self.cov]
        out["coef"] = list(self.coef)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LossModel:
        """Inverse of :meth:`to_dict` (``ValueError`` naming what is wrong)."""
        if d.get("version") != LOSS_MODEL_VERSION:
            raise ValueError(f"loss model version {d.get('version')!r} is not "
                             f"{LOSS_MODEL_VERSION!r}")
        coef = tuple(float(c) for c in d["coef"])
        cov = tuple(tuple(float(c) for c in row) for row in d["cov"])
        if len(coef) != 3 or len(cov) != 3 or any(len(r) != 3 for r in cov):
            raise ValueError("loss model: coef must have 3 entries and cov be 3 x 3")
        if not all(math.isfinite(c) for c in coef + sum(cov, ())) or not d["tau"] >= 0:
            raise ValueError("loss model: coefficients must be finite and tau >= 0")
        return cls(coef, cov, float(d["tau"]), dict(d.get("fitted_on", {})))  # type: ignore[arg-type]


def _wls(x: np.ndarray, y: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Coefficients, covariance and restricted log-likelihood of WLS with variances ``var``."""
    w = 1.0 / var
    xtw = x.T * w
    info = xtw @ x
    cov = np.linalg.inv(info)
    coef = cov @ (xtw @ y)
    r = y - x @ coef
    _, logdet = np.linalg.slogdet(info)
    reml = -0.5 * (np.sum(np.log(var)) + np.sum(w * r * r) + logdet)
    return coef, cov, float(reml)


def fit_loss_model(points: Sequence[LossPoint], fitted_on: dict[str, Any] | None = None
                   ) -> LossModel:
    """Fit the model of the module docstring to ``points`` (at least 4, with at least 3
    distinct dilutions); ``tau`` maximises the restricted likelihood over a grid of 2001
    values from 0 to 2 bits per byte (steps of 0.001). ``ValueError`` if the fit is not a
    finite model (points whose ``Lambda^2``, change or se overflow float64)."""
    if len(points) < 4 or len({round(p.dilution, 12) for p in points}) < 3:
        raise ValueError("points must hold at least 4 points at 3 distinct dilutions")
    lam = np.asarray([p.dilution for p in points], dtype=np.float64)
    y = np.asarray([p.change for p in points], dtype=np.float64)
    with np.errstate(all="ignore"):  # an overflow is refused below, not warned about
        se2 = np.asarray([max(p.se, 1e-6) for p in points], dtype=np.float64) ** 2
        x = _design(lam)
        if not (np.isfinite(x).all() and np.isfinite(y).all() and np.isfinite(se2).all()):
            raise ValueError("the points' dilution squared, change and se must be finite "
                             "float64 numbers")
        best = None
        for tau in np.linspace(0.0, 2.0, 2001):
            coef, cov, reml = _wls(x, y, se2 + tau * tau)
            if best is None or reml > best[3]:
                best = (coef, cov, float(tau), reml)
    coef, cov, tau, _ = best  # type: ignore[misc]
    if not (np.isfinite(coef).all() and np.isfinite(cov).all()):
        raise ValueError("the fitted coefficients are not finite (dilutions too far apart "
                         "in scale for float64)")
    return LossModel(
        tuple(float(c) for c in coef),  # type: ignore[arg-type]
        tuple(tuple(float(c) for c in row) for row in cov),
        tau,
        dict(fitted_on or {}, points=len(points)),
    )


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN for fewer than 3 pairs or
    a constant sequence (no order to compare)."""
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def judge(model: LossModel, points: Sequence[LossPoint]) -> dict[str, Any]:
    """How well ``model`` predicts ``points``: per point the prediction, its interval, the
    standardised error ``z = (measured - mean) / sqrt(sd^2 + se^2)`` and whether
    ``|z| <= z_90``; the coverage (fraction within) and Spearman's rank correlation of
    predicted and measured changes."""
    rows = []
    for p in points:
        mean, sd = model.predict(p.dilution)
        z = (p.change - mean) / math.sqrt(sd * sd + p.se * p.se)
        rows.append({**asdict(p), "predicted": mean, "sd": sd,
                     "interval90": list(model.interval(p.dilution)), "z": z,
                     "within": abs(z) <= Z90})
    return {
        "points": rows,
        "coverage90": (sum(r["within"] for r in rows) / len(rows)) if rows else float("nan"),
        "spearman": spearman([r["predicted"] for r in rows], [r["change"] for r in rows]),
    }

"""Theorem 3 (docs/theory.md §5): content-score bounds on the window mass, and the classification.

``thm3_content_bounds`` (torch): attention is ``softmax(s + b)`` on the causal rows, with a
positional bias ``b(d)`` (``proofs_check.operators.biases``) and content scores ``|s| <= B``.
For every row ``l >= W`` the window mass ``M_l(W)`` (attention on distances ``0..W-1``) obeys

    M^-_l = S_W / (S_W + e^{2B} T_l)  <=  M_l(W)  <=  M^+_l = e^{2B} S_W / (e^{2B} S_W + T_l),

``S_W = sum_{d<W} e^{b(d)}``, ``T_l = sum_{W<=d<l} e^{b(d)}`` (the prior tail), and both ends
are attained: scores ``-B`` on the window and ``+B`` beyond give ``M^-``, the reverse ``M^+``.
Measured on random uniform scores in ``[-B, B]`` and on the two extreme patterns, for a set
of encodings; the bounds come from the encodings' exact partial sums (``weight_sum``, closed
forms in mpmath) through ``priors.content_bounds``, a route independent of the torch softmax.

``thm3_classification`` (no torch): every row of the §5 table, through ``enc.classify()``,
against the table's class and an independent numeric criterion: the growth of the partial
sums over successive ``R``-fold length ranges. With ``g(l) = S_l/S_W = 1/M_l(W)`` and
``Delta_k = g(l_{k+1}) - g(l_k)`` at ``l_0, l_1 = R l_0, l_2 = R^2 l_0``, a tail
``e^{b(d)} ~ d^-p`` gives ``Delta_2/Delta_1 ~ R^(1-p)``, so

    p_hat = 1 - ln(Delta_2/Delta_1) / ln R

estimates the tail exponent: summable when ``p_hat >= 1.05``, dilutes when ``p_hat <= 1.01``
(``p = 1`` diverges: the harmonic increments do not shrink), inconclusive between. An
increment below the working precision (exponential tails) counts as summable.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from proofs_check.result import CheckSpec, Measurement, theorem_check
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "check_classification", "check_content_bounds", "numeric_class"]

THEOREM = "Theorem 3 (§5)"


def _bound_encodings() -> list[Any]:
    from priors.encodings import ALiBi, KerpleLog, KerplePower, LogDistance, NoPE

    return [NoPE(), ALiBi(slope=0.1), LogDistance(alpha=1.5), LogDistance(alpha=0.8),
            KerpleLog(r1=1.5, r2=1.0), KerplePower(r1=0.5, r2=0.5)]


# --------------------------------------------------------------------------- content bounds


def _exact_bounds(enc: Any, n: int, window: int, score_bound: float) -> tuple[torch.Tensor,
                                                                              torch.Tensor]:
    """``(M^-_l, M^+_l)`` for the rows ``l = W..n`` from the encoding's exact partial sums.

    Row by row (length-dependent priors included), in mpmath at 20 digits through
    ``priors.content_bounds``, then rounded to float64.
    """
    import mpmath

    from priors.content_bounds import window_mass_bounds

    lo_b, hi_b = [], []
    e_factor = mpmath.exp(2 * mpmath.mpf(score_bound))
    for l in range(window, n + 1):  # noqa: E741
        length = l if enc.length_dependent else None
        s_w = enc.weight_sum(0, window, length=length, dps=20)
        tail = enc.weight_sum(window, l, length=length, dps=20)
        m_lo, m_hi = window_mass_bounds(s_w, tail, e_factor)
        lo_b.append(float(m_lo))
        hi_b.append(float(m_hi))
    return torch.tensor(lo_b, dtype=torch.float64), torch.tensor(hi_b, dtype=torch.float64)


def _violation(m: torch.Tensor, kind: str, m_minus: torch.Tensor,
               m_plus: torch.Tensor) -> torch.Tensor:
    """Per row: ``|M/M^- - 1|`` (``"attain_lo"``), ``|M/M^+ - 1|`` (``"attain_hi"``) or the
    relative excess of ``M`` over ``[M^-, M^+]`` (``"inside"``; negative inside)."""
    if kind == "attain_lo":
        return (m / m_minus - 1).abs()
    if kind == "attain_hi":
        return (m / m_plus - 1).abs()
    return torch.maximum((m_minus - m) / m_minus, (m - m_plus) / m_plus)


def _window_mass_cases(enc: Any, n: int, window: int, score_bound: float, samples: int,
                       gen: torch.Generator, system: System, dtype: torch.dtype,
                       device: str) -> dict[str, tuple[torch.Tensor, str]]:
    """``{case: (M_l(W) for l = W..n, kind)}``: the two extreme patterns and ``samples``
    random score draws, through ``system.biased_softmax`` with the bias of
    ``system.prior(enc)`` (kinds as in ``_violation``)."""
    from proofs_check.operators.biases import bias_matrix

    dist = torch.arange(n).unsqueeze(1) - torch.arange(n).unsqueeze(0)  # d = l - j
    in_window = (dist >= 0) & (dist < window)  # (n, n)
    b = float(score_bound)
    # Extreme patterns: -B on the window, +B beyond (attains M^-), and the reverse (M^+).
    low = torch.where(in_window, -b, b).to(dtype)
    bias = bias_matrix(system.prior(enc), n, dtype=dtype, device=device)

    def window_mass(scores: torch.Tensor) -> torch.Tensor:
        attn = system.biased_softmax(system.scores(scores).to(device), bias)  # (n, n)
        mass = (attn.to("cpu", torch.float64) * in_window).sum(-1)  # (n,)
        return mass[window - 1:]  # rows l = W..n

    cases = {"extreme_low": (window_mass(low), "attain_lo"),
             "extreme_high": (window_mass(-low), "attain_hi")}
    for k in range(samples):
        s = (torch.rand(n, n, generator=gen, dtype=torch.float64) * 2 - 1) * b
        cases[f"random_{k}"] = (window_mass(s.to(dtype)), "inside")
    return cases


def _worst_content_bound_violation(n: int, window: int, score_bound: float, samples: int,
                                   system: System, dtype: torch.dtype, device: str,
                                   seed: int) -> tuple[float, dict[str, Any]]:
    """The largest ``_violation`` over every encoding, case and row, and where it sits."""
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    where: dict[str, Any] = {}
    for enc in _bound_encodings():
        m_minus, m_plus = _exact_bounds(enc, n, window, score_bound)
        cases = _window_mass_cases(enc, n, window, score_bound, samples, gen, system, dtype,
                                   device)
        for label, (m, kind) in cases.items():
            v = _violation(m, kind, m_minus, m_plus)
            i = int(v.argmax())  # a NaN entry is the argmax; it is never outvoted
            if math.isnan(float(v[i])) or float(v[i]) > worst or not where:
                worst = float(v[i])
                where = {"encoding": enc.name, "params": enc.params, "scores": label,
                         "row": window + i, "window_mass": float(m[i]),
                         "M_minus": float(m_minus[i]), "M_plus": float(m_plus[i])}
    return worst, where


@theorem_check("thm3_content_bounds", THEOREM)
@uses("biased_softmax", "scores", "prior")
def check_content_bounds(
    n: int = 96,
    window: int = 8,
    score_bound: float = 0.5,
    samples: int = 2,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """``M^- <= M_l(W) <= M^+`` on softmax attention with biases, attained at the extremes.

    Measured: the largest of (a) the relative excess of ``M_l(W)`` over ``[M^-, M^+]`` on
    random scores and (b) ``|M_extreme / M^± - 1|`` on the extreme patterns, over every row
    ``l = W..n`` and every encoding. Reference 0, tolerance ``8 n eps(dtype)``: a row sum of
    ``n`` terms, each within a few ulps, carries a relative error below ``n eps``; the factor
    8 covers the exponentials and the normalisation.

    The attention is ``system.biased_softmax`` of ``system.scores(scores)`` and the bias of
    ``system.prior(encoding)``; the bounds always use the named encoding and ``B``.
    Negative control: scores times 1.1 (``scaled_scores``), beyond the ``B`` of the bounds:
    the extreme patterns then fall outside them.
    """
    if not 1 <= window < n:
        raise ValueError(f"window must be in [1, n), got {window}")
    worst, where = _worst_content_bound_violation(n, window, score_bound, samples, system,
                                                  dtype, device, seed)
    return Measurement(
        quantity="rel. excess over [M^-,M^+]; |M/M^± - 1| at extreme scores",
        measured=worst,
        reference=0.0,
        relation="<=",
        allowance=8 * n * torch.finfo(dtype).eps,
        params={"encodings": [f"{e.name} {e.params}" for e in _bound_encodings()]},
        details={"worst_case": where},
    )


# --------------------------------------------------------------------------- classification


def _table() -> list[tuple[str, Any, str]]:
    """docs/theory.md §5 table: (row, encoding instance, class stated by docs/theory.md)."""
    import numpy as np

    from priors.encodings import (
        ALiBi,
        CausalOTPrior,
        KerpleLog,
        KerplePower,
        LogDistance,
        NoPE,
        Sandwich,
        T5Buckets,
        alibi_slopes,
    )

    t5_table = tuple(float(x) for x in np.linspace(0.0, -3.0, 32))
    return [
        ("none (NoPE), RoPE", NoPE(), "dilutes"),
        ("bounded score change (Sandwich)", Sandwich(dim=16), "dilutes"),
        ("ALiBi m = 0.5", ALiBi(slope=0.5), "summable"),
        ("ALiBi smallest of 8 heads", ALiBi(slope=min(alibi_slopes(8))), "summable"),
        ("log-distance alpha = 2", LogDistance(alpha=2.0), "summable"),
        ("log-distance alpha = 1.5", LogDistance(alpha=1.5), "summable"),
        ("log-distance alpha = 1", LogDistance(alpha=1.0), "dilutes"),
        ("log-distance alpha = 0.5", LogDistance(alpha=0.5), "dilutes"),
        ("KERPLE-log r1 = 1.5, r2 = 1", KerpleLog(r1=1.5, r2=1.0), "summable"),
        ("KERPLE-log r1 = 0.8, r2 = 2", KerpleLog(r1=0.8, r2=2.0), "dilutes"),
        ("KERPLE-power r1 = 0.5, r2 = 1", KerplePower(r1=0.5, r2=1.0), "summable"),
        ("KERPLE-power r1 = 0.1, r2 = 0.5", KerplePower(r1=0.1, r2=0.5), "summable"),
        ("KERPLE-power r1 = 0.01, r2 = 2", KerplePower(r1=0.01, r2=2.0), "summable"),
        ("T5 relative buckets", T5Buckets(num_buckets=32, max_distance=128, table=t5_table),
         "dilutes"),
        ("causal OT prior rho = 1/3", CausalOTPrior(rho=1 / 3), "dilutes"),
    ]


def numeric_class(enc: Any, *, window: int = 8, start: int = 10**4, ratio: int = 10**4,
                  dps: int = 40) -> tuple[str, float]:
    """``(label, p_hat)`` from the growth of ``g(l) = S_l/S_W`` at ``start * ratio^k``.

    See the module docstring. Encodings summed term by term (``Sandwich``) are limited in
    length; for them the lengths are ``2^4, 2^11, 2^18``.
    """
    import mpmath

    if enc.name == "sandwich":
        start, ratio = 2**4, 2**7
    if enc.max_digits is not None:  # float64-backed sums: ask only for the digits they carry
        dps = min(dps, enc.max_digits)
    lengths = [start, start * ratio, start * ratio**2]
    with mpmath.workdps(dps):
        g = [1 / enc.window_mass(window, ln, dps=dps) for ln in lengths]
        d1, d2 = g[1] - g[0], g[2] - g[1]
        floor = mpmath.mpf(10) ** (3 - dps) * g[2]
        if d1 <= floor or d2 <= floor:
            return "summable", math.inf  # increments below the working precision
        p_hat = float(1 - mpmath.log(d2 / d1) / mpmath.log(ratio))
    if p_hat >= 1.05:
        return "summable", p_hat
    if p_hat <= 1.01:
        return "dilutes", p_hat
    return "inconclusive", p_hat


@theorem_check("thm3_classification", THEOREM)
@uses("prior")
def check_classification(
    *,
    window: int = 8,
    start: int = 10**4,
    ratio: int = 10**4,
    system: System | None = None,
) -> Measurement:
    """Each §5 table row: ``enc.classify().label`` == the stated class == the numeric class.

    Measured: the number of rows where the three disagree; reference 0. ``classify`` and
    the numeric criterion both see ``system.prior(enc)``; the class docs/theory.md §5 states
    is that of ``enc``.

    Negative control (a perturbed prior): log-distance and KERPLE-log exponents shifted by
    ``-0.6`` (``exponent_shifted``; ``alpha = 1.5`` becomes ``0.9``), which changes their
    class, so they disagree with the table.
    """
    disagreements: list[dict[str, Any]] = []
    rows: dict[str, Any] = {}
    for row, named, stated in _table():
        enc = system.prior(named)
        cls = enc.classify()
        numeric, p_hat = numeric_class(enc, window=window, start=start, ratio=ratio)
        rows[row] = {"stated": stated, "classify": cls.label, "rate": cls.rate,
                     "numeric": numeric, "p_hat": p_hat}
        if not cls.label == stated == numeric:
            disagreements.append({"row": row, **rows[row]})
    return Measurement(
        quantity="§5 rows where classify/docs table/numeric tail test disagree",
        measured=len(disagreements),
        reference=0.0,
        relation="<=",
        # encodings whose masses are float64 sums (max_digits set: Sandwich, 13) are read
        # at the digits they carry, not at 40
        dtype="mpmath dps 40; float64-backed encodings at their digits",
        details={"rows": rows, "disagreements": disagreements},
    )


CHECKS = (
    CheckSpec(
        name="thm3_content_bounds",
        theorem=THEOREM,
        section="§5",
        run=check_content_bounds,
        ci={"n": 96, "window": 8, "score_bound": 0.5, "samples": 2},
        default={"n": 256, "window": 16, "score_bound": 1.0, "samples": 4},
        full={"n": 1024, "window": 64, "score_bound": 2.0, "samples": 8},
        negative={"system": System(scores=mutants.scaled_scores(1.1))},
    ),
    CheckSpec(
        name="thm3_classification",
        theorem=THEOREM,
        section="§5",
        run=check_classification,
        ci={},
        default={},
        full={"start": 10**5, "ratio": 10**5},
        negative={"system": System(prior=mutants.exponent_shifted(-0.6))},
        torch_args=False,
    ),
)

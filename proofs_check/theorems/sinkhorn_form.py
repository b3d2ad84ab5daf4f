"""docs/theory.md §2, Lemma 2.2: the Sinkhorn form of the prefix-consistent operator.

The all-rows-at-once iteration ``A = rowsoftmax_causal(S + logV)``, ``C' = cumsum_rows(A)``,
``logV <- rho (logV - log C')`` from ``logV = 0`` has the operator of Lemma 2.1 as its fixed
point, and its ``logV`` increments shrink by about ``rho`` per sweep. Two checks:

* ``lemma22_sweeps_converge``: plain sweeps (``method="sinkhorn"``) and Anderson-mixed sweeps
  (``method="anderson"``) converge to the row-by-row Newton solver (``method="newton"``, an
  independent algorithm);
* ``lemma22_contraction``: the measured per-sweep contraction factor of the sup-norm
  increments ``d_k = ||logV_k - logV_{k-1}||`` (``info.residual`` after ``k`` sweeps) is
  ``rho`` (docs/theory.md §2: 0.1992, 0.4991, 0.8003, 0.9004, 0.9499 at rho = 0.2 ... 0.95).
"""

from __future__ import annotations

import math
import warnings

import torch

from proofs_check.operators.causal_ot import ConvergenceWarning, causal_ot_attention
from proofs_check.result import CheckSpec, Measurement, theorem_check, worst_of
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "check_contraction", "check_sweeps_converge", "contraction_factor"]

THEOREM = "Lemma 2.2 (§2)"


def _scores(n, samples, score_bound, gen, dtype, device):
    s = score_bound * (2 * torch.rand(samples, n, n, generator=gen, dtype=torch.float64) - 1)
    s = torch.cat([torch.zeros(1, n, n, dtype=torch.float64), s])  # constant + random
    return s.to(dtype=dtype, device=device)


@theorem_check("lemma22_sweeps_converge", THEOREM)
@uses("operator")
def check_sweeps_converge(
    n: int = 64,
    rhos: tuple[float, ...] = (0.3, 0.6, 0.9),
    samples: int = 2,
    score_bound: float = 2.0,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Lemma 2.2 sweeps converge to the Lemma 2.1 solution: max |A_sweeps - A_exact|.

    Plain sweeps (``system.operator(..., method="sinkhorn")``) and the same map with
    Anderson mixing (``method="anderson"``, which stops on the same increment test) run to
    an increment ``1e-12``
    (float64); with contraction ``rho <= 0.9`` the distance of ``logV`` to the fixed point is
    then ``<= 0.9/0.1 * 1e-12 = 1e-11``, which moves weights ``<= 1`` by about as much. The
    reference is the project's row-by-row Newton solver (``causal_ot_attention(...,
    method="newton")``, an independent algorithm, itself within ``1e-12`` of mpmath: see
    ``lemma21_exact_vs_mp``), never the substituted operator. Tolerance ``1e-9`` leaves two
    orders of margin. float32: sweeps to ``1e-5``, tolerance ``2e-3`` (distance ``<= 9e-5``
    in ``logV`` plus round-off).

    Negative control: the operator at ``0.85 rho`` (``system.operator``).
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    sweeps: dict[str, int] = {}
    sweep_tol = 1e-12 if dtype == torch.float64 else 1e-5
    s = _scores(n, samples, score_bound, gen, dtype, device)
    for rho in rhos:
        ref = causal_ot_attention(s, rho, method="newton").weights.double()
        for method in ("sinkhorn", "anderson"):
            res = system.operator(s, rho, method=method, tol=sweep_tol)
            sweeps[f"{method} rho={rho}"] = res.info.sweeps
            worst = worst_of(worst, (res.weights.double() - ref).abs().max())
    return Measurement(
        quantity="max |A_sinkhorn - A_exact|",
        measured=worst,
        reference=0.0,
        relation="==",
        allowance=1e-9 if dtype == torch.float64 else 2e-3,
        details={"sweeps": sweeps},
    )


def contraction_factor(scores: torch.Tensor, rho: float, *, hi: float = 1e-3,
                       lo: float = 1e-8, operator=causal_ot_attention) -> float:
    """Geometric-mean contraction of the sup-norm ``logV`` increments of plain sweeps.

    ``d_k`` is ``info.residual`` of ``operator(..., method="sinkhorn", max_iter=k)``
    (default ``causal_ot_attention``); ``k1, k2`` are where ``rho^k`` crosses ``hi`` and
    ``lo`` (past the transient, above round-off); returns ``(d_k2 / d_k1)^(1/(k2 - k1))``.
    """
    k1 = max(2, math.ceil(math.log(hi) / math.log(rho)))
    k2 = max(k1 + 3, math.ceil(math.log(lo) / math.log(rho)))
    d = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # stopping early is the point
        for k in (k1, k2):
            d[k] = operator(scores, rho, method="sinkhorn", tol=1e-300, max_iter=k).info.residual
    return (d[k2] / d[k1]) ** (1.0 / (k2 - k1)) if d[k1] > 0 else math.nan


@theorem_check("lemma22_contraction", THEOREM)
@uses("operator")
def check_contraction(
    n: int = 64,
    rhos: tuple[float, ...] = (0.2, 0.5, 0.8, 0.9, 0.95),
    samples: int = 1,
    score_bound: float = 2.0,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Measured contraction factor of the Lemma 2.2 sweeps vs ``rho``: max |factor - rho|.

    Constant scores and ``samples`` uniform draws in ``[-B, B]``. Increments are measured
    between ``1e-3`` and ``1e-10`` (float64; ``1e-2`` to ``1e-5`` in float32), where the
    asymptotic rate has set in and round-off has not. Tolerance ``0.01``: docs/theory.md §2's own
    measurements deviate from ``rho`` by at most ``0.0009``; the transient from the first
    sweeps can bias a geometric mean over a few decades by a few thousandths. float32:
    tolerance ``0.02``, because the window above float32's stall (about ``5e-7`` in
    ``logV``) spans only three decades, so the transient weighs more (measured ``0.0103``
    at default size). An operator that reports no increments (``residual = 0``) gives a
    ``nan`` factor, which fails.

    Negative control: the operator at ``0.85 rho`` (``system.operator``): factor ``0.85 rho``.
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    factors: dict[str, float] = {}
    hi, lo = (1e-3, 1e-10) if dtype == torch.float64 else (1e-2, 1e-5)
    s = _scores(n, samples, score_bound, gen, dtype, device)
    for rho in rhos:
        fs = [contraction_factor(s[i], rho, hi=hi, lo=lo, operator=system.operator)
              for i in range(s.shape[0])]
        factors[str(rho)] = fs[0]  # constant scores
        deviations = [abs(f - rho) if math.isfinite(f) else math.inf for f in fs]
        worst = max(worst, *deviations)
    return Measurement(
        quantity="max |measured sweep contraction factor - rho|",
        measured=worst,
        reference=0.0,
        relation="==",
        allowance=0.01 if dtype == torch.float64 else 0.02,
        details={"factor_constant_scores": factors},
    )


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="lemma22_sweeps_converge",
        theorem=THEOREM,
        section="§2.2",
        run=check_sweeps_converge,
        ci={"n": 24, "rhos": (0.3, 0.8), "samples": 1},
        default={"n": 64, "samples": 2},
        full={"n": 256, "samples": 4},
        negative={"system": System(operator=mutants.operator_at_scaled_rho(0.85))},
    ),
    CheckSpec(
        name="lemma22_contraction",
        theorem=THEOREM,
        section="§2.2",
        run=check_contraction,
        ci={"n": 16, "rhos": (0.2, 0.5, 0.8), "samples": 1},
        default={"n": 64, "samples": 1},
        full={"n": 256, "samples": 3},
        negative={"system": System(operator=mutants.operator_at_scaled_rho(0.85))},
    ),
)

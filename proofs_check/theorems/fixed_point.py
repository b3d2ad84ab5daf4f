"""THEORY.md §2, Lemma 2.1: the row fixed point of the prefix-consistent operator.

Row ``l`` is strictly positive and solves ``a[l,j] C'[l,j]^kappa = w[l,j] / Z_l`` with
``C' = cumsum over rows of a`` and ``sum_j a[l,j] = 1``. Equivalently
``q[l,j] = log a[l,j] + kappa log C'[l,j] - s[l,j]`` is the same number ``-log Z_l`` for every
key ``j <= l`` of the row. Two checks:

* ``lemma21_fixed_point``: the weights of the torch exact solver (``method="exact"``) satisfy
  the equation -- the spread ``max_j q - min_j q`` of every row, the row-sum error, and strict
  positivity -- measured from the weights alone (``C'`` recomputed here);
* ``lemma21_exact_vs_mp``: the torch exact solver agrees with the mpmath solver at 30 digits
  (``causal_ot_exact_mp``), the ground truth.
"""

from __future__ import annotations

import math

import mpmath
import torch

from proofs_check.operators.causal_ot import causal_ot_attention, causal_ot_exact_mp
from proofs_check.result import CheckResult, CheckSpec, dtype_name, make_result, stopwatch

__all__ = ["CHECKS", "check_exact_vs_mp", "check_fixed_point", "fixed_point_defect"]

THEOREM = "Lemma 2.1 (§2)"


def fixed_point_defect(weights: torch.Tensor, scores: torch.Tensor, rho: float) -> float:
    """Largest violation of Lemma 2.1 in float64: row spread of ``q``, row sums, positivity.

    Returns ``inf`` if a causal weight is not strictly positive.
    """
    a = weights.double().cpu()
    s = scores.double().cpu()
    n = a.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    if not bool((a[..., causal] > 0).all()):
        return math.inf
    kappa = rho / (1 - rho)
    cp = torch.cumsum(a, dim=-2)  # C'[l, j] = sum_{k <= l} a[k, j]
    q = torch.log(a) + kappa * torch.log(cp) - s  # -log Z_l on the causal part
    big = torch.tensor(math.inf, dtype=torch.float64)
    spread = torch.where(causal, q, -big).amax(-1) - torch.where(causal, q, big).amin(-1)
    row_err = (a.sum(-1) - 1).abs()
    return float(torch.maximum(spread, row_err).max())


def check_fixed_point(
    n: int = 64,
    rhos: tuple[float, ...] = (0.3, 0.6, 0.9, 0.99),
    samples: int = 2,
    score_bound: float = 2.0,
    *,
    perturb: float = 0.0,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> CheckResult:
    """Exact-solver rows satisfy ``a C'^kappa = w / Z``, ``sum a = 1``, ``a > 0`` (Lemma 2.1).

    Scores: ``samples`` uniform draws in ``[-B, B]`` (batched). Measured: the largest row
    spread of ``q = log a + kappa log C' - s`` or row-sum error over all rows and ``rho``.
    Tolerance: ``1e-9`` in float64 -- the solver stops when its Newton step on ``log Z``
    is below ``1e-10``; ``q`` is then exact to that level plus ``kappa`` times the relative
    round-off of ``C'`` (``n eps``), i.e. ``<= 1e-10 + 99 * 512 * 2.2e-16``. float32:
    ``1e-2`` (``kappa`` up to 99 amplifies a relative round-off of ``n * 6e-8``, n <= 512).

    ``perturb = 1e-4`` (negative control): the weights are multiplied by
    ``1 + perturb * U(-1, 1)`` and renormalised (a perturbed operator); the defect is then
    about ``perturb`` and must exceed the tolerance.
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    per_rho: dict[str, float] = {}
    with stopwatch() as elapsed:
        s = score_bound * (2 * torch.rand(samples, n, n, generator=gen, dtype=torch.float64) - 1)
        s = s.to(dtype=dtype, device=device)
        for rho in rhos:
            w = causal_ot_attention(s, rho, method="exact").weights.double().cpu()
            if perturb:
                noise = 1 + perturb * (2 * torch.rand(w.shape, generator=gen,
                                                      dtype=torch.float64) - 1)
                w = w * noise
                w = w / w.sum(-1, keepdim=True)
            defect = fixed_point_defect(w, s, rho)
            per_rho[str(rho)] = defect
            worst = max(worst, defect)
    tol = 1e-9 if dtype == torch.float64 else 1e-2
    return make_result(
        check="lemma21_fixed_point",
        theorem=THEOREM,
        quantity="max row spread of log a + kappa log C' - s (and |sum a - 1|)",
        measured=worst,
        reference=0.0,
        relation="==",
        tol=tol,
        params={"n": n, "rhos": list(rhos), "samples": samples, "score_bound": score_bound,
                "perturb": perturb, "seed": seed},
        dtype=dtype_name(dtype),
        device=str(device),
        seconds=elapsed(),
        details={"defect_by_rho": per_rho},
    )


def check_exact_vs_mp(
    n: int = 6,
    rhos: tuple[float, ...] = (0.3, 0.9, 0.99),
    score_bound: float = 2.0,
    dps: int = 30,
    *,
    rho_offset: float = 0.0,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> CheckResult:
    """Torch exact solver vs mpmath at ``dps`` digits (ground truth), max abs difference.

    Tolerance ``1e-12`` in float64 (Newton on ``log Z`` converges quadratically, so after the
    ``1e-10`` step test the error is far smaller; weights are ``<= 1`` and computed from
    O(1) logs with ``kappa <= 99`` amplification of ~1e-16 round-off), ``1e-4`` in float32.

    ``rho_offset = 1e-3`` (negative control) gives the mpmath solver a wrong ``rho``.
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    with stopwatch() as elapsed:
        s = score_bound * (2 * torch.rand(n, n, generator=gen, dtype=torch.float64) - 1)
        for rho in rhos:
            w = causal_ot_attention(s.to(dtype=dtype, device=device), rho,
                                    method="exact").weights.double().cpu()
            ref = causal_ot_exact_mp(s, mpmath.mpf(rho) + mpmath.mpf(rho_offset), dps=dps)
            for l_row, row in enumerate(ref):
                for j, v in enumerate(row):
                    worst = max(worst, abs(float(w[l_row, j]) - float(v)))
    tol = 1e-12 if dtype == torch.float64 else 1e-4
    return make_result(
        check="lemma21_exact_vs_mp",
        theorem=THEOREM,
        quantity=f"max |a_torch - a_mpmath(dps={dps})|",
        measured=worst,
        reference=0.0,
        relation="==",
        tol=tol,
        params={"n": n, "rhos": list(rhos), "score_bound": score_bound, "dps": dps,
                "rho_offset": rho_offset, "seed": seed},
        dtype=dtype_name(dtype),
        device=str(device),
        seconds=elapsed(),
    )


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="lemma21_fixed_point",
        theorem=THEOREM,
        section="§2.1",
        run=check_fixed_point,
        ci={"n": 32, "samples": 2},
        default={"n": 128, "samples": 4},
        full={"n": 512, "samples": 4},
        negative={"perturb": 1e-4},
    ),
    CheckSpec(
        name="lemma21_exact_vs_mp",
        theorem=THEOREM,
        section="§2.1",
        run=check_exact_vs_mp,
        ci={"n": 5},
        default={"n": 8},
        full={"n": 12, "dps": 50},
        negative={"rho_offset": 1e-3},
    ),
)

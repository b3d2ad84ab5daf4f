"""THEORY.md §2, Proposition 2.3: prefix consistency, and the batch plan's future-token leak.

The leak of an attention map ``P`` on scores ``S`` (length ``n``) is

    leak = max_{m < n} max_{l, j <= m} |P_n[l, j] - P_m[l, j]|,

``P_m`` the map on the length-``m`` prefix ``S[:m, :m]``. The prefix-consistent operator has
leak exactly 0 (row ``l`` depends on rows ``< l`` only); the batch unbalanced Sinkhorn plan
of §1 does not (THEORY: about 0.03-0.06 at ``rho = 0.3``, up to 0.45 at ``rho = 0.9``, on
random scores). Two checks, each the other's negative control:

* ``prop23_prefix_consistency``: leak of the operator ``== 0`` (float64 round-off);
* ``prop23_batch_leak``: leak of the batch plan ``>= 1e-6`` for every sample and ``rho``.
"""

from __future__ import annotations

import torch

from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn
from proofs_check.operators.causal_ot import causal_ot_attention
from proofs_check.result import CheckResult, CheckSpec, dtype_name, make_result, stopwatch

__all__ = ["CHECKS", "check_batch_leak", "check_prefix_consistency", "leak"]

THEOREM = "Proposition 2.3 (§2)"
OPERATORS = ("causal_ot", "batch")


def _attention(scores: torch.Tensor, rho: float, operator: str) -> torch.Tensor:
    if operator == "causal_ot":
        return causal_ot_attention(scores, rho, method="exact").weights
    if operator == "batch":
        return batch_unbalanced_sinkhorn(scores, rho).plan
    raise ValueError(f"operator must be one of {OPERATORS}, got {operator!r}")


def leak(scores: torch.Tensor, rho: float, operator: str, prefixes: list[int]) -> torch.Tensor:
    """Per-batch-element ``max_{m in prefixes} max_{l,j <= m} |P_n - P_m|`` (float64)."""
    full = _attention(scores, rho, operator).double()
    worst = torch.zeros(scores.shape[:-2], dtype=torch.float64, device=scores.device)
    for m in prefixes:
        part = _attention(scores[..., :m, :m], rho, operator).double()
        worst = torch.maximum(worst, (full[..., :m, :m] - part).abs().amax((-2, -1)))
    return worst


def _setup(n, samples, seed, dtype, device):
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(samples, n, n, generator=gen, dtype=torch.float64)  # N(0, 1) scores
    prefixes = sorted({1, 2, n // 4, n // 2, n - 1} - {0})
    return s.to(dtype=dtype, device=device), prefixes


def check_prefix_consistency(
    n: int = 64,
    rhos: tuple[float, ...] = (0.3, 0.6, 0.9),
    samples: int = 2,
    *,
    operator: str = "causal_ot",
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> CheckResult:
    """Leak of the prefix-consistent operator (Prop. 2.3) on N(0,1) scores: ``== 0``.

    Tolerance ``1e-12`` in float64: rows ``l <= m`` receive identical inputs in both runs;
    only the batched row solver's stopping point can differ (the exact solver iterates each
    row to a Newton step ``< 1e-10``, quadratically convergent). float32: ``1e-5``.

    ``operator = "batch"`` (negative control) measures the batch plan of §1 instead.
    """
    worst = 0.0
    by_rho: dict[str, float] = {}
    with stopwatch() as elapsed:
        s, prefixes = _setup(n, samples, seed, dtype, device)
        for rho in rhos:
            value = float(leak(s, rho, operator, prefixes).max())
            by_rho[str(rho)] = value
            worst = max(worst, value)
    return make_result(
        check="prop23_prefix_consistency",
        theorem=THEOREM,
        quantity=f"max_m max_(l,j<=m) |P_n - P_m|, {operator}",
        measured=worst,
        reference=0.0,
        relation="==",
        tol=1e-12 if dtype == torch.float64 else 1e-5,
        params={"n": n, "rhos": list(rhos), "samples": samples, "operator": operator,
                "prefixes": prefixes, "seed": seed},
        dtype=dtype_name(dtype),
        device=str(device),
        seconds=elapsed(),
        details={"leak_by_rho": by_rho},
    )


def check_batch_leak(
    n: int = 32,
    rhos: tuple[float, ...] = (0.3, 0.9),
    samples: int = 4,
    *,
    operator: str = "batch",
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> CheckResult:
    """The batch plan leaks future tokens: its smallest leak over samples and ``rho`` ``>= 1e-6``.

    ``1e-6`` is far above what convergence error could produce (the batch solver's ``log v``
    is within ``rho/(1-rho) * 1e-10 <= 1e-9`` of its fixed point) and far below the measured
    leaks (details: min/max per ``rho``, beside THEORY's 0.03-0.06 at ``rho = 0.3`` and up to
    0.45 at ``rho = 0.9``; the exact range depends on the score distribution, N(0,1) here).

    ``operator = "causal_ot"`` (negative control) measures the prefix-consistent operator,
    whose leak is 0.
    """
    lowest = float("inf")
    ranges: dict[str, list[float]] = {}
    with stopwatch() as elapsed:
        s, prefixes = _setup(n, samples, seed, dtype, device)
        prefixes = list(range(1, n))
        for rho in rhos:
            values = leak(s, rho, operator, prefixes)
            ranges[str(rho)] = [float(values.min()), float(values.max())]
            lowest = min(lowest, float(values.min()))
    return make_result(
        check="prop23_batch_leak",
        theorem=THEOREM,
        quantity=f"min over samples of max_m max_(l,j<=m) |P_n - P_m|, {operator}",
        measured=lowest,
        reference=1e-6,
        relation=">=",
        params={"n": n, "rhos": list(rhos), "samples": samples, "operator": operator,
                "seed": seed},
        dtype=dtype_name(dtype),
        device=str(device),
        seconds=elapsed(),
        details={"leak_min_max_by_rho": ranges},
    )


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="prop23_prefix_consistency",
        theorem=THEOREM,
        section="§2.3",
        run=check_prefix_consistency,
        ci={"n": 24, "samples": 1},
        default={"n": 64, "samples": 2},
        full={"n": 256, "samples": 4},
        negative={"operator": "batch"},
    ),
    CheckSpec(
        name="prop23_batch_leak",
        theorem=THEOREM,
        section="§2.3",
        run=check_batch_leak,
        ci={"n": 16, "samples": 2},
        default={"n": 32, "samples": 8},
        full={"n": 64, "samples": 16},
        negative={"operator": "causal_ot"},
    ),
)

"""Theorem 5 (THEORY.md §7): the selected margin controls the growth of the distant mass.

``priors.margin.select_margin(W, L1, tau, lmin=L0, score_bound=B)`` returns ``delta*``, the
smallest margin with ``sup_{alpha >= 1 + delta*} G(alpha) <= tau``, where
``G = D_{L1}(W) - D_{L0}(W)`` (``B = 0``) or ``G_B = D^+_{L1} - D^-_{L0}`` (``B > 0``). The
checks rebuild the attention with the torch operators (``bias_matrix`` of the log-distance
prior ``b(d) = -alpha ln(1+d)`` and ``softmax_with_bias``) and measure the growth of the
distant mass ``D_l(W)`` (attention on distances ``>= W``) between rows ``L0`` and ``L1``:

* at ``alpha* = 1 + delta*`` it is at most ``tau`` -- with constant scores
  (``thm5_margin_constant_scores``), and with random scores ``|s| <= B`` and the extreme
  scores that attain ``G_B`` (``thm5_margin_random_scores``: ``+B`` beyond the window and
  ``-B`` on it in row ``L1``, the reverse in row ``L0``);
* at ``alpha* - eps`` ("just below") it exceeds ``tau`` by more than the round-off
  allowance (constant scores for ``B = 0``, the extreme scores for ``B > 0``): the margin
  is not larger than it needs to be.

Measured: ``max(G(alpha*) - tau, tau + 2 tol - G(alpha* - eps))`` over everything measured,
reference 0, tolerance ``tol = 4 L1 eps(dtype)`` (a distant mass is a sum of at most ``L1``
softmax entries, each within a few ulps). It is ``<= tol`` exactly when every growth at
``alpha*`` is within ``tau + tol`` and the growth just below exceeds ``tau + tol``.
"""

from __future__ import annotations

from typing import Any

import torch

from proofs_check.result import CheckResult, CheckSpec, dtype_name, make_result, stopwatch

__all__ = ["CHECKS", "check_margin_control", "distant_masses"]

THEOREM = "Theorem 5 (§7)"


def distant_masses(attn: torch.Tensor, window: int, rows: tuple[int, ...]) -> list[float]:
    """``D_l(W)`` for the 1-based rows ``l`` of a causal attention matrix ``(n, n)``.

    Row ``l`` is tensor row ``l-1``; distances ``>= W`` are the keys ``j <= l - W``, i.e.
    tensor columns ``0 .. l-W-1``. Summed in float64 whatever the attention dtype.
    """
    out = []
    for l in rows:  # noqa: E741
        out.append(float(attn[l - 1, : max(0, l - window)].to(torch.float64).sum()))
    return out


def check_margin_control(
    window: int = 8,
    lmax: int = 512,
    tau: float = 0.1,
    *,
    lmin: int | None = None,
    score_bound: float = 0.0,
    samples: int = 3,
    eps_below: float | None = None,
    delta_offset: float = 0.0,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> CheckResult:
    """Growth ``<= tau`` at ``delta*`` and ``> tau`` just below, on torch attention (§7).

    ``eps_below`` defaults to ``1e-3`` in float64 and ``3e-2`` otherwise (the excess just
    below must clear the round-off allowance of the dtype). ``delta_offset`` (negative
    control) uses ``delta* + delta_offset`` in place of the selected margin; a negative
    offset lets the growth exceed ``tau`` and the check must fail.
    """
    from priors.encodings import LogDistance
    from priors.margin import select_margin
    from proofs_check.operators.biases import bias_matrix, softmax_with_bias

    l0 = window if lmin is None else lmin
    l1 = lmax
    if eps_below is None:
        eps_below = 1e-3 if dtype == torch.float64 else 3e-2
    gen = torch.Generator().manual_seed(seed)
    tol = 4 * l1 * torch.finfo(dtype).eps
    b = float(score_bound)
    n = l1
    dist = torch.arange(n).unsqueeze(1) - torch.arange(n).unsqueeze(0)  # d = l - j
    beyond = dist >= window

    def growth(alpha: float, scores: torch.Tensor) -> float:
        bias = bias_matrix(LogDistance(alpha=alpha), n, dtype=dtype, device=device)
        attn = softmax_with_bias(scores.to(dtype=dtype, device=device), bias)  # (n, n)
        d0, d1 = distant_masses(attn, window, (l0, l1))
        return d1 - d0

    # Extreme scores attaining G_B: row L1 favours the distant keys, row L0 the window.
    extreme = torch.zeros(n, n, dtype=torch.float64)
    extreme[l1 - 1] = torch.where(beyond[l1 - 1], b, -b)
    extreme[l0 - 1] = torch.where(beyond[l0 - 1], -b, b)
    with stopwatch() as elapsed:
        sel = select_margin(window, l1, tau, lmin=l0, score_bound=b)
        delta = sel.delta + delta_offset
        alpha = 1.0 + delta
        grown: dict[str, float] = {"constant": growth(alpha, torch.zeros(n, n))}
        if b > 0:
            grown["extreme"] = growth(alpha, extreme)
            for k in range(samples):
                s = (torch.rand(n, n, generator=gen, dtype=torch.float64) * 2 - 1) * b
                grown[f"random_{k}"] = growth(alpha, s)
        below_scores = extreme if b > 0 else torch.zeros(n, n)
        below = growth(alpha - eps_below, below_scores)
        worst_at = max(grown, key=grown.get)
        measured = max(grown[worst_at] - tau, tau + 2 * tol - below)
    details: dict[str, Any] = {
        "delta_star": sel.delta,
        "delta_bracket": list(sel.delta_bracket),
        "selected_growth": sel.growth,
        "growth_at_alpha_star": grown,
        "largest_growth_from": worst_at,
        "growth_just_below": below,
        "alpha_just_below": alpha - eps_below,
        "sup_method": sel.sup_method,
    }
    return make_result(
        check="thm5_margin_random_scores" if b > 0 else "thm5_margin_constant_scores",
        theorem=THEOREM,
        quantity="max(G(a*) - tau, tau + 2tol - G(a*-eps)) on torch attention",
        measured=measured,
        reference=0.0,
        relation="<=",
        tol=tol,
        params={"window": window, "lmin": l0, "lmax": l1, "tau": tau, "score_bound": b,
                "samples": samples if b > 0 else 0, "eps_below": eps_below,
                "delta_offset": delta_offset, "seed": seed},
        dtype=dtype_name(dtype),
        device=str(device),
        seconds=elapsed(),
        details=details,
    )


def check_margin_constant_scores(**kwargs: Any) -> CheckResult:
    """``check_margin_control`` with ``score_bound = 0`` (constant scores)."""
    return check_margin_control(**{**kwargs, "score_bound": 0.0})


CHECKS = (
    CheckSpec(
        name="thm5_margin_constant_scores",
        theorem=THEOREM,
        section="§7",
        run=check_margin_constant_scores,
        ci={"window": 8, "lmax": 512, "tau": 0.1},
        default={"window": 64, "lmax": 4096, "tau": 0.1},
        full={"window": 64, "lmax": 8192, "tau": 0.05, "lmin": 128},
        negative={"delta_offset": -0.05},
    ),
    CheckSpec(
        name="thm5_margin_random_scores",
        theorem=THEOREM,
        section="§7",
        run=check_margin_control,
        ci={"window": 8, "lmax": 512, "tau": 0.1, "score_bound": 0.5, "samples": 3},
        default={"window": 32, "lmax": 2048, "tau": 0.1, "score_bound": 0.5, "samples": 4},
        full={"window": 64, "lmax": 8192, "tau": 0.1, "score_bound": 0.5, "samples": 8,
              "lmin": 128},
        negative={"delta_offset": -0.05},
    ),
)

"""Theorem 5 (docs/theory.md §7): the selected margin controls the growth of the distant mass.

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

import torch

from proofs_check.result import CheckSpec, Measurement, theorem_check, worst_of
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "check_margin_constant_scores", "check_margin_control", "distant_masses"]

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


def _growth_at(alpha: float, scores: torch.Tensor, window: int, rows: tuple[int, int],
               system: System, dtype: torch.dtype, device: str) -> float:
    """``D_{L1}(W) - D_{L0}(W)`` on ``system.biased_softmax`` of ``scores`` with the bias of
    ``system.prior(LogDistance(alpha))`` (``rows = (L0, L1)``, matrices of size ``L1``)."""
    from priors.encodings import LogDistance
    from proofs_check.operators.biases import bias_matrix

    prior = system.prior(LogDistance(alpha=alpha))
    bias = bias_matrix(prior, rows[1], dtype=dtype, device=device)
    attn = system.biased_softmax(scores.to(dtype=dtype, device=device), bias)  # (n, n)
    d0, d1 = distant_masses(attn, window, rows)
    return d1 - d0


def _extreme_scores(window: int, rows: tuple[int, int], score_bound: float) -> torch.Tensor:
    """Scores attaining ``G_B``: row ``L1`` favours the distant keys (``+B`` beyond the window,
    ``-B`` on it), row ``L0`` the window; every other row 0."""
    l0, l1 = rows
    n = l1
    beyond = (torch.arange(n).unsqueeze(1) - torch.arange(n).unsqueeze(0)) >= window
    b = float(score_bound)
    extreme = torch.zeros(n, n, dtype=torch.float64)
    extreme[l1 - 1] = torch.where(beyond[l1 - 1], b, -b)
    extreme[l0 - 1] = torch.where(beyond[l0 - 1], -b, b)
    return extreme


def _growths(alpha: float, eps_below: float, window: int, rows: tuple[int, int],
             score_bound: float, samples: int, gen: torch.Generator, system: System,
             dtype: torch.dtype, device: str) -> tuple[dict[str, float], float]:
    """``({scores: growth at alpha}, growth at alpha - eps_below)``.

    At ``alpha``: constant scores, and for ``B > 0`` the extreme scores and ``samples``
    random draws in ``[-B, B]``; just below: the extreme scores (constant ones for ``B = 0``).
    """
    n = rows[1]
    b = float(score_bound)
    extreme = _extreme_scores(window, rows, b)

    def growth(a: float, scores: torch.Tensor) -> float:
        return _growth_at(a, scores, window, rows, system, dtype, device)

    grown: dict[str, float] = {"constant": growth(alpha, torch.zeros(n, n))}
    if b > 0:
        grown["extreme"] = growth(alpha, extreme)
        for k in range(samples):
            s = (torch.rand(n, n, generator=gen, dtype=torch.float64) * 2 - 1) * b
            grown[f"random_{k}"] = growth(alpha, s)
    below = growth(alpha - eps_below, extreme if b > 0 else torch.zeros(n, n))
    return grown, below


def _margin_control(
    window: int = 8,
    lmax: int = 512,
    tau: float = 0.1,
    *,
    lmin: int | None = None,
    score_bound: float = 0.0,
    samples: int = 3,
    eps_below: float | None = None,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Growth ``<= tau`` at ``delta*`` and ``> tau`` just below, on torch attention (§7).

    ``eps_below`` defaults to ``1e-3`` in float64 and ``3e-2`` otherwise (the excess just
    below must clear the round-off allowance of the dtype). The margin comes from
    ``system.select_margin``, the attention from ``system.biased_softmax`` with the bias of
    ``system.prior(LogDistance(alpha))``. Negative control: a selector whose ``delta`` is
    ``0.05`` too small (``margin_offset``); the growth then exceeds ``tau``.
    """
    l0 = window if lmin is None else lmin
    if eps_below is None:
        eps_below = 1e-3 if dtype == torch.float64 else 3e-2
    tol = 4 * lmax * torch.finfo(dtype).eps
    b = float(score_bound)
    sel = system.select_margin(window, lmax, tau, lmin=l0, score_bound=b)
    alpha = 1.0 + sel.delta
    gen = torch.Generator().manual_seed(seed)
    grown, below = _growths(alpha, eps_below, window, (l0, lmax), b, samples, gen, system,
                            dtype, device)
    worst_at = max(grown, key=grown.get)
    return Measurement(
        quantity="max(G(a*) - tau, tau + 2tol - G(a*-eps)) on torch attention",
        measured=worst_of(*(g - tau for g in grown.values()), tau + 2 * tol - below),
        reference=0.0,
        relation="<=",
        allowance=tol,
        params={"lmin": l0, "samples": samples if b > 0 else 0, "eps_below": eps_below},
        details={
            "delta_star": sel.delta,
            "delta_bracket": list(sel.delta_bracket),
            "selected_growth": sel.growth,
            "growth_at_alpha_star": grown,
            "largest_growth_from": worst_at,
            "growth_just_below": below,
            "alpha_just_below": alpha - eps_below,
            "sup_method": sel.sup_method,
            "sup_explanation": sel.sup_explanation,
        },
    )


_PARTS = ("select_margin", "biased_softmax", "prior")


@theorem_check("thm5_margin_random_scores", THEOREM)
@uses(*_PARTS)
def check_margin_control(
    window: int = 8,
    lmax: int = 512,
    tau: float = 0.1,
    *,
    lmin: int | None = None,
    score_bound: float = 0.5,
    samples: int = 3,
    eps_below: float | None = None,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Theorem 5 with content scores ``|s| <= B``, ``B = score_bound > 0`` (see the module).

    Random scores, and the extreme scores that attain ``G_B``; ``B = 0`` is
    ``check_margin_constant_scores``.
    """
    if not score_bound > 0:
        raise ValueError(f"score_bound must be > 0 (B = 0 is check_margin_constant_scores), "
                         f"got {score_bound!r}")
    return _margin_control(window, lmax, tau, lmin=lmin, score_bound=score_bound,
                           samples=samples, eps_below=eps_below, system=system, dtype=dtype,
                           device=device, seed=seed)


@theorem_check("thm5_margin_constant_scores", THEOREM)
@uses(*_PARTS)
def check_margin_constant_scores(
    window: int = 8,
    lmax: int = 512,
    tau: float = 0.1,
    *,
    lmin: int | None = None,
    eps_below: float | None = None,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """``check_margin_control`` with ``score_bound = 0`` (constant scores)."""
    return _margin_control(window, lmax, tau, lmin=lmin, score_bound=0.0, samples=0,
                           eps_below=eps_below, system=system, dtype=dtype, device=device,
                           seed=seed)


CHECKS = (
    CheckSpec(
        name="thm5_margin_constant_scores",
        theorem=THEOREM,
        section="§7",
        run=check_margin_constant_scores,
        ci={"window": 8, "lmax": 512, "tau": 0.1},
        default={"window": 64, "lmax": 4096, "tau": 0.1},
        full={"window": 64, "lmax": 8192, "tau": 0.05, "lmin": 128},
        negative={"system": System(select_margin=mutants.margin_offset(-0.05))},
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
        negative={"system": System(select_margin=mutants.margin_offset(-0.05))},
    ),
)

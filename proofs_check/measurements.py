"""Measurements of attention maps that the theorem checks and the figures share.

Each function measures one quantity of docs/theory.md on a map or a row the caller
computed; the checks (``proofs_check.theorems``) compare it with a bound or a closed form,
the figures (``paper_figs.py``) draw it, and both call the same function, so a number in a
figure is the number the check judged. All results are float64.

* ``prefix_leak`` (§2, Proposition 2.3; §1): ``max_{m} max_{l,j <= m} |P_n[l,j] -
  P_m[l,j]|``, how much a map on the length-``m`` prefix differs from the map on the
  whole sequence (0 for a prefix-consistent operator);
* ``diagonal_mass`` (§1, Proposition 1): ``trace(P)/n``;
* ``grid_distances`` (§4, Theorem 2): the distance ``K_l`` between the key CDF of one row
  and the continuum prior's CDF ``Q(1-rho, ln(l/j))`` on the grid ``y = j/l``, the sup
  over all real ``y``, and the diagonal atom.

>>> import torch
>>> diagonal_mass(torch.eye(4, dtype=torch.float64))
tensor(1., dtype=torch.float64)
>>> float(prefix_leak(torch.zeros(6, 6, dtype=torch.float64), 0.5, "causal_ot", [2, 4]))
0.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

__all__ = ["MAP_NAMES", "continuum_cdf", "diagonal_mass", "grid_distances", "named_map",
           "prefix_leak"]

#: The attention maps ``prefix_leak`` knows by name.
MAP_NAMES = ("causal_ot", "batch")


def named_map(operator: str) -> Callable[[torch.Tensor, float], torch.Tensor]:
    """``(scores, rho) -> (..., n, n)`` weights for a map named in ``MAP_NAMES``.

    ``"causal_ot"``: the prefix-consistent operator (``causal_ot_attention``, exact row
    solver ``method="newton"``); ``"batch"``: the batch unbalanced Sinkhorn plan of §1
    (``batch_unbalanced_sinkhorn``, default tolerance). ``ValueError`` for other names.
    """
    from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn
    from proofs_check.operators.causal_ot import causal_ot_attention

    if operator == "causal_ot":
        return lambda s, rho: causal_ot_attention(s, rho, method="newton").weights
    if operator == "batch":
        return lambda s, rho: batch_unbalanced_sinkhorn(s, rho).weights
    raise ValueError(f"operator must be 'causal_ot', 'batch' or a callable, got {operator!r}")


def prefix_leak(scores: torch.Tensor, rho: float,
                operator: str | Callable[[torch.Tensor, float], torch.Tensor],
                prefixes: Sequence[int]) -> torch.Tensor:
    """Per-batch-element ``max_{m in prefixes} max_{l,j <= m} |P_n - P_m|`` (float64).

    ``operator(scores, rho) -> (..., n, n)`` is the map under test (``P_n``), applied again
    to each prefix ``scores[..., :m, :m]`` (``P_m``); a name from ``MAP_NAMES`` selects one
    of the maps of ``named_map``. Returns a tensor of the batch shape ``scores.shape[:-2]``
    (a 0-d tensor for one ``(n, n)`` score matrix), on the device of ``scores``.
    """
    attention = named_map(operator) if isinstance(operator, str) else operator
    full = attention(scores, rho).double()
    worst = torch.zeros(scores.shape[:-2], dtype=torch.float64, device=scores.device)
    for m in prefixes:
        part = attention(scores[..., :m, :m], rho).double()
        worst = torch.maximum(worst, (full[..., :m, :m] - part).abs().amax((-2, -1)))
    return worst


def diagonal_mass(plan: torch.Tensor) -> torch.Tensor:
    """``trace(P)/n`` of each ``(n, n)`` map in ``plan`` (shape ``(..., n, n)``).

    The diagonal is summed in the map's dtype and divided by ``n``; the result has the
    batch shape ``plan.shape[:-2]``.
    """
    n = plan.shape[-1]
    return torch.diagonal(plan, dim1=-2, dim2=-1).sum(-1) / n


def continuum_cdf(rho: float, l: int, j: torch.Tensor) -> torch.Tensor:  # noqa: E741
    """``Q(1-rho, ln(l/j))`` in float64 (scipy's regularised upper incomplete gamma).

    The continuum prior's probability (Theorem 2, §4) that the key of query ``l`` is at
    most ``j``, i.e. the CDF ``G(y) = Q(1-rho, ln(1/y))`` at ``y = j/l``.
    """
    from scipy.special import gammaincc

    x = torch.log(torch.tensor(float(l), dtype=torch.float64) / j.to(torch.float64))
    return torch.from_numpy(gammaincc(1.0 - rho, x.numpy()))


def grid_distances(row: torch.Tensor, rho: float) -> dict[str, float]:
    """``K_l``, the sup over real ``y``, and the diagonal atom of one row ``a[l, 1..l]``.

    The row is promoted to float64 before the cumulative sum (the operator may run in
    float32; the analysis should not add its own rounding). With ``c_j = sum_{i<=j} a[l,i]``
    (``c_0 = 0``) and ``G(y) = Q(1-rho, ln(1/y))`` (``G(0) = 0``, ``G(1) = 1``),

        K_l = max_{1<=j<=l} |c_j - G(j/l)|;

    the step CDF equals ``c_j`` on ``[j/l, (j+1)/l)``, so the sup over real ``y`` is
    ``max_j max(|c_j - G(j/l)|, |c_j - G((j+1)/l)|)``. Returns ``{"K", "sup_y",
    "diagonal_atom"}`` (the last is ``a[l, l]``).
    """
    a = row.detach().to("cpu", torch.float64)
    l = a.numel()  # noqa: E741
    c = torch.cumsum(a, 0)  # c[j-1] = c_j, j = 1..l
    j = torch.arange(1, l + 1, dtype=torch.float64)
    g = continuum_cdf(rho, l, j)  # G(j/l), j = 1..l
    k_l = float((c - g).abs().max())
    c0 = torch.cat([torch.zeros(1, dtype=torch.float64), c[:-1]])  # c_0 .. c_{l-1}
    sup_y = max(k_l, float((c0 - g).abs().max()))  # c_j against G((j+1)/l)
    return {"K": k_l, "sup_y": sup_y, "diagonal_atom": float(a[-1])}

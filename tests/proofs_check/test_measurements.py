"""``proofs_check.measurements``: the measurements the checks and the figures share.

Each is compared with a brute-force evaluation written out here (explicit loops over the
prefixes and entries, a Python sum over the diagonal), never with its own output.
"""

from __future__ import annotations

import math

import pytest
import torch

from proofs_check import measurements
from proofs_check.measurements import diagonal_mass, prefix_leak


def _full_softmax(scores: torch.Tensor, rho: float) -> torch.Tensor:
    """A map that is NOT prefix consistent: softmax over the whole row, future keys included
    (``rho`` unused). Its leak is therefore positive on random scores."""
    del rho
    return torch.softmax(scores, dim=-1)


def _brute_leak(scores: torch.Tensor, prefixes: list[int]) -> float:
    n = scores.shape[-1]
    full = _full_softmax(scores, 0.0)
    worst = 0.0
    for m in prefixes:
        part = _full_softmax(scores[:m, :m], 0.0)
        for i in range(m):
            for j in range(m):
                worst = max(worst, abs(float(full[i, j]) - float(part[i, j])))
    assert n > max(prefixes)
    return worst


def test_prefix_leak_against_brute_force():
    gen = torch.Generator().manual_seed(4)
    scores = torch.randn(2, 10, 10, generator=gen, dtype=torch.float64)
    prefixes = [1, 3, 7]
    got = prefix_leak(scores, 0.5, _full_softmax, prefixes)
    assert got.shape == (2,) and got.dtype == torch.float64
    for b in range(2):
        # the same float64 differences, maximised in a different order: equal exactly
        assert float(got[b]) == _brute_leak(scores[b], prefixes)
    assert float(got.min()) > 0.01  # a map that looks ahead leaks


def test_prefix_leak_of_the_operator_is_zero_and_names_are_checked():
    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(12, 12, generator=gen, dtype=torch.float64)
    # Proposition 2.3: exactly 0 up to float64 round-off of the row solver
    assert float(prefix_leak(scores, 0.6, "causal_ot", [2, 6, 11])) <= 1e-12
    assert float(prefix_leak(scores, 0.6, "batch", [6])) > 1e-3  # the batch plan of §1 leaks
    with pytest.raises(ValueError, match="operator"):
        prefix_leak(scores, 0.6, "softmax", [2])


def test_diagonal_mass_against_a_python_sum():
    gen = torch.Generator().manual_seed(6)
    plans = torch.rand(3, 7, 7, generator=gen, dtype=torch.float64)
    got = diagonal_mass(plans)
    assert got.shape == (3,)
    for b in range(3):
        ref = math.fsum(float(plans[b, i, i]) for i in range(7)) / 7  # exactly rounded sum
        # 7 terms in (0, 1): torch's sum differs from the exactly rounded one by < 7 ulps
        assert float(got[b]) == pytest.approx(ref, rel=1e-15, abs=0)
    assert float(diagonal_mass(torch.eye(5, dtype=torch.float64))) == 1.0


def test_continuum_cdf_ends():
    # G(1) = Q(1-rho, 0) = 1 at j = l; and it increases in j
    j = torch.arange(1, 9, dtype=torch.float64)
    g = measurements.continuum_cdf(0.3, 8, j)
    assert float(g[-1]) == 1.0
    assert bool((g[1:] > g[:-1]).all())

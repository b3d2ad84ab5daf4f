"""The O(n)-memory streaming solver against the dense solvers and docs/theory.md §4's numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import gammaincc

from proofs_check.operators import (
    ConvergenceWarning,
    causal_ot_attention,
    causal_ot_exact_mp,
    stream_causal_ot,
)

F64 = torch.float64


def test_constant_scores_match_dense_anderson():
    n, rho = 40, 0.7
    dense = causal_ot_attention(torch.zeros(n, n, dtype=F64), rho, method="anderson", tol=1e-13)
    for l_row, row in stream_causal_ot(n, rho):
        assert row.shape == (l_row,) and row.dtype == F64
        # Anderson stopped at increment 1e-13: 10 tol/(1-rho)^2 ~ 1.1e-11 (see test_causal_ot)
        assert (row - dense.weights[l_row - 1, :l_row]).abs().max().item() <= 1.2e-11


def test_score_fn_with_masks_matches_mpmath():
    n, rho = 7, 0.8
    g = torch.Generator().manual_seed(21)
    s = torch.randn(n, n, generator=g, dtype=F64)
    s[5, 2] = -math.inf
    s[6, 0] = -math.inf
    ref = causal_ot_exact_mp(s, rho, dps=30)

    def score_fn(l_row: int, j: torch.Tensor) -> torch.Tensor:
        return s[l_row - 1, j - 1]  # 1-based (l, j) -> tensor index

    for l_row, row in stream_causal_ot(n, rho, score_fn=score_fn):
        err = max(abs(float(row[j]) - float(ref[l_row - 1][j])) for j in range(l_row))
        assert err <= 1e-14 * (1 + rho / (1 - rho)), (l_row, err)  # float64 rounding only
    assert float(dict(stream_causal_ot(n, rho, score_fn=score_fn))[6][2]) == 0.0


def test_prefix_is_the_same_whatever_n():
    a = dict(stream_causal_ot(30, 0.9))
    b = dict(stream_causal_ot(12, 0.9))
    for l_row in range(1, 13):
        assert torch.equal(a[l_row], b[l_row])  # same arithmetic, row by row


def test_rho_zero_is_uniform():
    for l_row, row in stream_causal_ot(9, 0.0):
        assert torch.equal(row, torch.full((l_row,), 1.0 / l_row, dtype=F64))


def test_continuum_distance_reproduces_theory_k_256():
    # docs/theory.md §4: K_l = max_j |sum_{i<=j} a[l,i] - Q(1-rho, ln(l/j))| = 0.00668 at l = 256,
    # rho = 1/3 (float64, computed independently). Q is scipy's regularised upper gamma.
    rho, l_max = 1 / 3, 256
    row = dict(stream_causal_ot(l_max, rho))[l_max]
    cdf = torch.cumsum(row, 0).numpy()
    j = torch.arange(1, l_max + 1, dtype=F64)
    q = gammaincc(1 - rho, (math.log(l_max) - torch.log(j)).numpy())
    k_l = float(abs(cdf - q).max())
    # docs/theory.md quotes 3 significant digits: agree to 5e-6 absolute (half a unit in the last)
    assert abs(k_l - 0.00668) <= 5e-6, k_l


def test_float32_stream_close_to_float64():
    rows64 = dict(stream_causal_ot(64, 0.6))
    for l_row, row in stream_causal_ot(64, 0.6, dtype=torch.float32):
        assert row.dtype == torch.float32
        # float32 Newton stopped at 1e-5 on log-steps (quadratic: actual error ~ eps32 * terms);
        # log terms are O(kappa log 64) ~ 6, so 50 eps32 * 6 ~ 4e-5 absolute bounds the weights.
        assert (row.double() - rows64[l_row]).abs().max().item() <= 4e-5


def test_non_convergence_warns():
    with pytest.warns(ConvergenceWarning, match="row"):
        for _ in stream_causal_ot(5, 0.99, tol=1e-300, max_iter=1):
            pass


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, 0.5), {}, "n must"),
        ((3.5, 0.5), {}, "n must"),
        ((3, 1.0), {}, "rho"),
        ((3, 0.5), {"dtype": torch.int64}, "dtype"),
        ((3, 0.5), {"max_iter": 0}, "max_iter"),
        ((3, 0.5), {"max_iter": 2**63}, "max_iter"),
        ((3, 0.5), {"tol": -1.0}, "tol"),
        ((3, 0.5), {"device": "meta"}, "device"),
        ((3, 0.5), {"device": torch.device("meta")}, "device"),
        ((3, 0.5), {"device": "no-such-device"}, "device"),
    ],
)
def test_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        stream_causal_ot(*args, **kwargs)


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda l_row, j: torch.zeros(l_row + 1), "returned"),
        (lambda l_row, j: torch.full((l_row,), math.nan), "NaN"),
        (lambda l_row, j: torch.full((l_row,), -math.inf), "masked every key"),
    ],
)
def test_bad_score_fn(fn, match):
    with pytest.raises(ValueError, match=match):
        for _ in stream_causal_ot(3, 0.5, score_fn=fn):
            pass


def test_numpy_integers_are_integers_for_n_and_max_iter():
    # numpy integers count as integers (as numpy floats count as reals for rho): the same rows
    ref = dict(stream_causal_ot(6, 0.5, max_iter=50))
    got = dict(stream_causal_ot(np.int64(6), np.float64(0.5), max_iter=np.int32(50)))
    assert ref.keys() == got.keys()
    assert all(torch.equal(ref[k], got[k]) for k in ref)


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda l_row, j: torch.zeros(l_row, dtype=torch.complex128) + 1j, "complex128"),
        (lambda l_row, j: torch.ones(l_row, dtype=torch.bool), "bool"),
        (lambda l_row, j: "scores", "not a tensor of real scores"),
        (lambda l_row, j: None, "not a tensor of real scores"),
    ],
)
def test_score_fn_returning_no_real_scores_is_refused(fn, match):
    """Complex scores (whose cast drops the imaginary part), booleans (True read as a score
    of 1) and values that are no tensor are refused by name, as the dense operator refuses
    those dtypes, instead of streaming rows of other scores or a TypeError."""
    with pytest.raises(ValueError, match=match):
        for _ in stream_causal_ot(3, 0.5, score_fn=fn):
            pass


def test_score_fn_of_integers_or_lists_streams_the_dense_rows():
    """Integer tensors and Python lists are real scores: the rows equal the dense operator's
    on the same scores within 1e-12 (both solve each row to tol = 1e-13 in float64; a row's
    error adds up over the n = 5 rows before it, see ``ConvergenceInfo.residual``)."""
    n, rho = 5, 0.5
    s = torch.arange(n * n).reshape(n, n) % 3
    dense = causal_ot_attention(s.to(F64), rho, tol=1e-13).weights
    for fn in (lambda l_row, j: s[l_row - 1, :l_row],
               lambda l_row, j: s[l_row - 1, :l_row].tolist()):
        for l_row, row in stream_causal_ot(n, rho, tol=1e-13, score_fn=fn):
            assert (row - dense[l_row - 1, :l_row]).abs().max().item() <= 1e-12


def test_unavailable_cuda_device_is_refused_up_front():
    """A CUDA device this machine does not have (``cuda:99``: none without CUDA, an invalid
    ordinal with it) is a ValueError naming the device when the stream is made, not
    torch's AssertionError or RuntimeError at the first row."""
    with pytest.raises(ValueError, match="device 'cuda:99' is not available"):
        stream_causal_ot(3, 0.5, device="cuda:99")

"""Hostile arguments for the reference operators (docs/theory.md §1-§2).

The contract asserted for ``causal_ot_attention`` and ``batch_unbalanced_sinkhorn``: every
call either raises ``ValueError`` (with a message naming the argument it rejects) or
returns a result that is sane, never NaN or inf weights, never an exception of another
type, and never ``converged=True`` on weights whose rows do not sum to one. Hypothesis
draws the scores (magnitudes up to ``1e308``, shifts up to ``1e7``, masked keys, NaN and
inf entries, wrong shapes and dtypes) and the keyword arguments (``rho``, ``tol``,
``max_iter``, ``method``, ``col_target``) from a grammar of hostile values. Sizes stay at
``n <= 6`` and ``max_iter`` is capped, so a case costs milliseconds.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from proofs_check.operators import batch_unbalanced_sinkhorn, causal_ot_attention

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

# Row-sum slack of a returned plan: float32 rows of <= 6 weights sum to 1 within a few
# ulps (~1e-6); 1e-4 leaves room for the stated tolerances (1e-5 default in float32)
# without letting a broken plan (the 0.0037 .. 0.51 errors) through.
ROW_SUM_SLACK = {torch.float64: 1e-8, torch.float32: 1e-4}

_REALS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 0.99, 0.999999, 1 - 2**-53, 1e-300, 5e-324,
                     1e308, -1e308, math.inf, -math.inf, math.nan, 2.0, 1e-12]),
    st.floats(allow_nan=True, allow_infinity=True),
)
_HOSTILE = st.one_of(
    _REALS,
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from(["0.5", "", "abc", None, [0.5], (1,), object()]),
)


def _mostly(valid, hostile=_HOSTILE):
    """``valid`` three times in four, else a hostile value (so most calls get computed)."""
    return st.sampled_from([True, True, True, False]).flatmap(
        lambda ok: valid if ok else hostile)


@st.composite
def _scores(draw):
    n = draw(st.integers(1, 6))
    dtype = draw(st.sampled_from([torch.float64, torch.float32]))
    batch = draw(st.sampled_from([(), (2,), (1, 2)]))
    scale = draw(st.sampled_from([1.0, 3.0, 1e4, 1e16, 9e307]))
    shift = draw(st.sampled_from([0.0, 1e7, -1e7]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    s = torch.randn(*batch, n, n, generator=gen, dtype=torch.float64) * scale + shift
    s = s.to(dtype)
    special = draw(st.sampled_from([None, None, None, "mask", "nan", "inf", "all-masked-row"]))
    if special is not None and n >= 2:
        value = {"mask": -math.inf, "nan": math.nan, "inf": math.inf,
                 "all-masked-row": -math.inf}[special]
        if special == "all-masked-row":
            s[..., n - 1, :] = value
        else:
            s[..., n - 1, 0] = value
    return s


def _assert_sane(weights: torch.Tensor, converged: bool, dtype: torch.dtype) -> None:
    assert torch.isfinite(weights).all(), "non-finite weights returned"
    assert (weights >= 0).all()
    n = weights.shape[-1]
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    assert (weights[..., upper] == 0).all(), "weight above the diagonal"
    rows = weights.double().sum(-1)
    if converged:
        assert (rows - 1).abs().max() <= ROW_SUM_SLACK[dtype], "converged=True, rows != 1"


def _call(fn, *args, **kwargs):
    """Run ``fn``; return its result, or None after a ValueError that names something."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # non-convergence warnings are allowed, not required
        try:
            return fn(*args, **kwargs)
        except ValueError as exc:
            assert str(exc).strip(), "empty ValueError message"
            event(f"refused: {str(exc).split(' ')[0]}")
            return None


@SETTINGS
@given(scores=_scores(), rho=_mostly(st.floats(0, 0.999)),
       tol=_mostly(st.one_of(st.none(), st.sampled_from([1e-10, 1e-5, 1e-3]))),
       max_iter=_mostly(st.one_of(st.none(), st.integers(1, 50))),
       method=_mostly(st.sampled_from(["auto", "newton", "sinkhorn", "anderson"]),
                      st.sampled_from(["bogus", "", "Newton", None, 3, "exact"])))
def test_causal_ot_attention_hostile_arguments(scores, rho, tol, max_iter, method):
    if isinstance(max_iter, int) and not isinstance(max_iter, bool) and max_iter > 50:
        max_iter = 50  # keep each case cheap; huge values are tested as refusals below
    res = _call(causal_ot_attention, scores, rho, method=method, tol=tol, max_iter=max_iter)
    event("refused" if res is None else "returned")
    if res is None:
        return
    assert res.weights.shape == scores.shape and res.weights.dtype == scores.dtype
    if torch.isnan(scores).any() or torch.isposinf(scores).any():
        pytest.fail("NaN / +inf scores were accepted instead of refused")
    masked_rows = torch.isneginf(torch.tril(scores)).sum(-1) == torch.arange(
        1, scores.shape[-1] + 1)
    if masked_rows.any():
        pytest.fail("a row with every key masked was accepted")
    _assert_sane(res.weights, res.info.converged, scores.dtype)


@SETTINGS
@given(scores=_scores(), rho=_mostly(st.floats(0, 0.99)),
       tol=_mostly(st.one_of(st.none(), st.sampled_from([1e-10, 1e-5, 1e-3]))),
       max_iter=_mostly(st.one_of(st.none(), st.integers(1, 200))),
       col_target=_mostly(st.none(), st.sampled_from(["x", -1.0, 0.0, math.nan, 2.0])))
def test_batch_plan_hostile_arguments(scores, rho, tol, max_iter, col_target):
    if isinstance(max_iter, int) and not isinstance(max_iter, bool) and max_iter > 200:
        max_iter = 200
    if isinstance(col_target, float):
        col_target = torch.full(scores.shape[-1:], col_target, dtype=scores.dtype)
    res = _call(batch_unbalanced_sinkhorn, scores, rho, col_target=col_target, tol=tol,
                max_iter=max_iter)
    event("refused" if res is None else "returned")
    if res is None:
        return
    assert res.weights.shape == scores.shape
    _assert_sane(res.weights, res.info.converged, scores.dtype)


@pytest.mark.parametrize("fn", [causal_ot_attention, batch_unbalanced_sinkhorn])
@pytest.mark.parametrize("bad", [{"tol": math.inf}, {"tol": True}, {"tol": -1.0},
                                 {"tol": math.nan}, {"max_iter": 0}, {"max_iter": True},
                                 {"max_iter": 1.5}])
def test_refusals_name_the_argument(fn, bad):
    s = torch.randn(4, 4, dtype=torch.float64)
    (name,) = bad
    with pytest.raises(ValueError, match=name):
        fn(s, 0.5, **bad)


@pytest.mark.parametrize("fn", [causal_ot_attention, batch_unbalanced_sinkhorn])
def test_meta_tensors_are_refused(fn):
    with pytest.raises(ValueError, match="meta"):
        fn(torch.zeros(4, 4, device="meta"), 0.5)

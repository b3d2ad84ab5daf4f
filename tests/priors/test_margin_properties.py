"""Property tests of the margin selector (docs/theory.md §7), hypothesis-driven, kept small.

Monotonicity statements are about the exact ``delta*``; the code returns a proven bracket
``delta_lo < delta* <= delta_hi``, so "``delta*_a <= delta*_b``" is tested in the form it
implies on brackets: ``delta_hi(b) >= delta_lo(a)`` (a failure would exhibit a bracket that
cannot contain the exact value). The defining property at the bracket ends is re-checked
by direct mpmath summation (independent of the Arb Hurwitz-zeta code under test).
"""

from __future__ import annotations

import mpmath
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from priors.margin import select_margin

SETTINGS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

windows = st.integers(min_value=1, max_value=64)
octaves = st.integers(min_value=1, max_value=8)  # L1 = W * 2^k (moderate sizes)
tols = st.sampled_from(["0.02", "0.05", "0.1", "0.2", "0.3", "0.5"])
bounds = st.sampled_from(["0", "0.1", "0.5", "1"])


def lo_hi(r):
    return r.delta_bracket


def direct_growth(w: int, l0: int, l1: int, b: str, delta: float) -> mpmath.mpf:
    """``D^+_{L1} - D^-_{L0}`` by direct 40-digit summation (docs/theory.md §5)."""
    with mpmath.workdps(40):
        a = 1 + mpmath.mpf(delta)
        terms = [mpmath.mpf(k) ** -a for k in range(1, l1 + 1)]
        s_w, t0, t1 = mpmath.fsum(terms[:w]), mpmath.fsum(terms[w:l0]), mpmath.fsum(terms[w:])
        e = mpmath.exp(2 * mpmath.mpf(b))
        return e * t1 / (s_w + e * t1) - t0 / (e * s_w + t0)


@SETTINGS
@given(w=windows, k=octaves, t1=tols, t2=tols)
def test_delta_nondecreasing_as_tol_shrinks(w, k, t1, t2):
    small, large = sorted((t1, t2), key=float)
    r_small = select_margin(w, w * 2**k, small)
    r_large = select_margin(w, w * 2**k, large)
    assert lo_hi(r_small)[1] >= lo_hi(r_large)[0]


@SETTINGS
@given(w=windows, k1=octaves, k2=octaves, tol=tols)
def test_delta_nondecreasing_as_lmax_grows(w, k1, k2, tol):
    short, long_ = sorted((k1, k2))
    r_short = select_margin(w, w * 2**short, tol)
    r_long = select_margin(w, w * 2**long_, tol)
    assert lo_hi(r_long)[1] >= lo_hi(r_short)[0]


@SETTINGS
@given(w=windows, k=octaves, j=st.integers(0, 7), tol=tols, b=bounds)
def test_score_bound_never_smaller(w, k, j, tol, b):
    l1 = w * 2**k
    l0 = min(w * 2 ** min(j, k - 1), l1 - 1)
    r0 = select_margin(w, l1, tol, lmin=l0)
    rb = select_margin(w, l1, tol, lmin=l0, score_bound=b)
    # G_B >= G_0 pointwise (D+ >= D >= D-), so the supremum and delta* can only grow
    assert lo_hi(rb)[1] >= lo_hi(r0)[0]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=st.integers(1, 16), k=st.integers(1, 6), j=st.integers(0, 5), tol=tols, b=bounds)
def test_defining_property_random(w, k, j, tol, b):
    l1 = w * 2**k  # <= 1024 terms: direct sums stay fast
    l0 = min(w * 2 ** min(j, k - 1), l1 - 1)
    r = select_margin(w, l1, tol, lmin=l0, score_bound=b)
    lo, hi = r.delta_bracket
    tau = mpmath.mpf(tol)
    # 40-digit sums resolve G - tol to ~1e-35, far below G' * (hi - lo)
    assert direct_growth(w, l0, l1, b, hi) <= tau
    if hi > 0.0:
        assert direct_growth(w, l0, l1, b, lo) > tau
        assert hi - lo <= 1e-9 * hi
    else:  # no margin: even alpha = 1 satisfies, and so must the reported supremum
        assert r.sup_value[1] <= float(tau) and r.delta_bracket == (0.0, 0.0)

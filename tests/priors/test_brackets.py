"""Brackets of docs/theory.md §6: containment, ordering, convergence, the §6 numbers.

The exact values come from ``priors.harmonic`` (Hurwitz-zeta / digamma differences in
mpmath, itself tested against direct summation in ``test_harmonic.py``) and from mpmath's
``zeta``/``digamma`` directly; the brackets are computed by a different method (Arb,
integral test and Euler–Maclaurin), so containment is a real check.
"""

from __future__ import annotations

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpmath import mpf

from priors.brackets import (
    euler_maclaurin_bracket,
    integral_bracket,
    limit_window_mass_bracket,
    near_one_limit,
    window_mass_brackets,
    zeta_bracket,
)
from priors.harmonic import harmonic_number

# m spread over every magnitude, with the small-m and direct/EM switch points weighted in.
counts = st.one_of(
    st.integers(0, 40),
    st.integers(0, 10**6),
    st.integers(10**6, 10**15),
    st.sampled_from([1, 15, 16, 17, 64, 65, 10**12, 10**15]),
)
# delta = alpha - 1 from 1e-12 to 10, both signs near 1 (alpha stays > 0), and exactly 0.
deltas = st.one_of(
    st.floats(1e-12, 10.0),
    st.floats(-0.9, -1e-12),
    st.just(0.0),
    st.sampled_from([2.0**-27, -(2.0**-27), 1e-8, 1e-2]),
)


def _exact(m: int, alpha: mpf) -> mpf:
    return harmonic_number(m, alpha, dps=45)


@settings(max_examples=60, deadline=None)
@given(m=counts, delta=deltas)
def test_brackets_contain_exact_value_and_em_is_tighter(m: int, delta: float) -> None:
    alpha = 1 + mpf(delta)  # exact: delta is a float, 1 + delta is exact in mpf
    h = _exact(m, alpha)
    ilo, ihi = integral_bracket(m, alpha)
    elo, ehi = euler_maclaurin_bracket(m, alpha)
    with mpmath.workdps(50):
        # the exact value is known to 10^-43 relative; brackets are rounded outwards, so
        # containment is asserted with no tolerance
        assert ilo <= h <= ihi, (m, delta)
        assert elo <= h <= ehi, (m, delta)
        assert ilo <= elo and ehi <= ihi, (m, delta)
        if m >= 1:  # strictly tighter (m = 0: both are exactly (0, 0))
            assert ehi - elo < ihi - ilo, (m, delta)
            # and 10^-dps tight (default dps = 30; 10^-28 allows the outward rounding)
            assert (ehi - elo) / h < mpf(10) ** -28, (m, delta)


def test_m_zero_and_one() -> None:
    # H_0 = 0: both brackets are (0, 0). H_1 = 1 = U_1: the integral upper end is attained.
    assert integral_bracket(0, 1.5) == (0, 0)
    assert euler_maclaurin_bracket(0, 1.5) == (0, 0)
    lo, hi = integral_bracket(1, 1.5)
    assert hi == 1 and lo < 1
    assert euler_maclaurin_bracket(1, 1.5) == (1, 1)


@pytest.mark.parametrize("m", [10, 1000, 10**6, 10**12])
def test_integral_bracket_tends_to_log_forms_as_delta_to_zero(m: int) -> None:
    # delta -> 0 limits ln(m+1) and 1 + ln m (docs/theory.md §6). The difference at delta is
    # O(delta ln(m)^2): with delta = 2^-60 that is < 1e-15.
    with mpmath.workdps(30):  # 1 + 2^-60 needs 61 bits: build it at enough precision
        tiny = 1 + mpf(2) ** -60
    lo, hi = integral_bracket(m, tiny)
    lo1, hi1 = integral_bracket(m, 1)
    with mpmath.workdps(40):
        assert abs(lo1 - mpmath.log(m + 1)) < mpf(10) ** -28
        assert abs(hi1 - 1 - mpmath.log(m)) < mpf(10) ** -28
        assert abs(lo - lo1) < mpf(2) ** -60 * mpmath.log(m + 1) ** 2
        assert abs(hi - hi1) < mpf(2) ** -60 * mpmath.log(m + 1) ** 2
        assert lo < lo1 and hi < hi1  # x^-delta < 1 shrinks both ends for delta > 0


@pytest.mark.parametrize("delta", [0.5, 0.1, 2.0])
def test_integral_bracket_tends_to_zeta_bracket(delta: float) -> None:
    # m -> inf: L_m -> 1/delta, U_m -> 1 + 1/delta; the gap is m^-delta/delta at most.
    alpha = 1 + mpf(delta)
    zlo, zhi = zeta_bracket(alpha)
    m = 10**18
    lo, hi = integral_bracket(m, alpha)
    with mpmath.workdps(40):
        # plus 10^-29 relative: both brackets are rounded (outwards) to 30 digits
        gap = mpf(m) ** -delta / delta + zhi * mpf(10) ** -29
        assert 0 <= zlo - lo <= gap and 0 <= zhi - hi <= gap
        assert zlo <= mpmath.zeta(alpha) <= zhi


def test_euler_maclaurin_converges_with_terms() -> None:
    # Each Bernoulli correction shrinks the width by about (2 pi N)^2 ~ 1e4 (N = 16), until
    # the rounding floor; checked as a factor > 100 per term over the first five terms.
    m, alpha = 10**9, 1 + mpf(2) ** -27
    h = _exact(m, alpha)
    widths = []
    for p in range(6):
        lo, hi = euler_maclaurin_bracket(m, alpha, terms=p, dps=40)
        with mpmath.workdps(50):
            assert lo <= h <= hi, p
            widths.append(hi - lo)
    for p in range(5):
        assert widths[p + 1] * 100 < widths[p], (p, widths)


@settings(max_examples=30, deadline=None)
@given(
    window=st.integers(1, 5000),
    ratio=st.one_of(st.integers(1, 10**6), st.just(1)),
    delta=st.one_of(st.floats(1e-10, 3.0), st.floats(-0.5, -1e-10), st.just(0.0)),
)
def test_window_mass_brackets_contain_exact(window: int, ratio: int, delta: float) -> None:
    length = window * ratio
    alpha = 1 + mpf(delta)
    b = window_mass_brackets(window, length, alpha)
    with mpmath.workdps(50):
        exact = _exact(window, alpha) / _exact(length, alpha)
        ilo, ihi = b["integral"]
        elo, ehi = b["euler_maclaurin"]
        assert ilo <= elo <= exact <= ehi <= ihi
        assert (ehi - elo) / exact < mpf(10) ** -27


@pytest.mark.parametrize("window", [1, 8, 512])
@pytest.mark.parametrize("delta", [0.01, 0.1, 1.0])
def test_limit_window_mass_bracket(window: int, delta: float) -> None:
    # M_inf(W) = H_W / zeta(alpha), by mpmath directly; and the length-n integral bracket
    # of M_n(W) tends to it (at n = 1e18 the n-dependence is below (1e18)^-delta/delta).
    alpha = 1 + mpf(delta)
    lo, hi = limit_window_mass_bracket(window, alpha)
    with mpmath.workdps(40):
        exact = (mpmath.zeta(alpha) - mpmath.zeta(alpha, window + 1)) / mpmath.zeta(alpha)
        assert lo <= exact <= hi
        ilo, ihi = window_mass_brackets(window, 10**18, alpha)["integral"]
        slack = 2 * mpf(10) ** (-18 * delta) / delta * (1 + delta)
        assert abs(ilo - lo) <= slack and abs(ihi - hi) <= slack * (1 + 1 / delta)


def test_limit_is_zero_when_not_summable() -> None:
    assert limit_window_mass_bracket(512, 1) == (0, 0)
    assert limit_window_mass_bracket(512, 0.5) == (0, 0)


def test_near_one_limit_theory_numbers() -> None:
    # docs/theory.md §6: at W = 512, n = 1e12, delta -> 0, H_W/H_n = 0.24165 against 0.22577 for
    # ln W / ln n (5 printed digits, computed independently: tolerance 5e-6).
    v = near_one_limit(512, 10**12)
    with mpmath.workdps(40):
        ref = (mpmath.digamma(513) + mpmath.euler) / (mpmath.digamma(10**12 + 1) + mpmath.euler)
        assert abs(v / ref - 1) < mpf(10) ** -28
        log_ratio = mpmath.log(512) / mpmath.log(10**12)
    assert abs(v - mpf("0.24165")) < 5e-6
    assert abs(log_ratio - mpf("0.22577")) < 5e-6


@pytest.mark.parametrize("delta_exp", [12, 15])
def test_window_mass_tends_to_near_one_limit(delta_exp: int) -> None:
    # As delta ln n -> 0, M_n(W) -> H_W/H_n. To first order H_m^(1+delta) = H_m -
    # delta sum ln k / k, so |M_n(W) - H_W/H_n| <= delta ln(n)^2 (a generous first-order
    # bound); at delta = 1e-12, n = 1e12 that is 7.6e-10.
    delta = mpf(10) ** -delta_exp
    w, n = 512, 10**12
    with mpmath.workdps(40):
        alpha = 1 + delta
    m = harmonic_number(w, alpha, dps=40) / harmonic_number(n, alpha, dps=40)
    lim = near_one_limit(w, n, dps=40)
    with mpmath.workdps(40):
        diff = abs(m - lim)
        assert 0 < diff < delta * mpmath.log(n) ** 2


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: integral_bracket(-1, 2), "m"),
        (lambda: integral_bracket(10, 0), "alpha"),
        (lambda: integral_bracket(10, -1.5), "alpha"),
        (lambda: euler_maclaurin_bracket(10, float("nan")), "alpha"),
        (lambda: euler_maclaurin_bracket(10, 2, terms=-1), "terms"),
        (lambda: euler_maclaurin_bracket(10, 2, dps=1), "dps"),
        (lambda: window_mass_brackets(0, 10, 2), "window"),
        (lambda: window_mass_brackets(10, 5, 2), "length"),
        (lambda: window_mass_brackets(10, 0, 2), "length"),
        (lambda: limit_window_mass_bracket(0, 2), "window"),
        (lambda: zeta_bracket(1), "alpha"),
        (lambda: zeta_bracket(0.5), "alpha"),
        (lambda: near_one_limit(512, 100), "length"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()

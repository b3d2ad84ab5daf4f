"""Closed forms of the scale-invariant prior (docs/theory.md §4) against quadrature and limits.

References are numerical quadrature (mpmath.quad, tanh-sinh) of the density in the
original variable ``y`` and closed-form special cases (``rho = 0`` is uniform softmax).
"""

from __future__ import annotations

import mpmath
import pytest
from mpmath import mpf

from priors.scale_invariant import (
    cumulative_mass,
    density,
    key_cdf,
    normaliser,
    window_mass_asymptotic,
    window_mass_continuum,
)

RHOS = [0, mpf(1) / 3, 0.5, 0.9, 0.99]
DPS = 30
# Quadrature tolerance: tanh-sinh on the smooth integrands below (the endpoint singularity
# v^-rho removed by substitution) reaches ~1e-25 at 30 digits; 1e-20 leaves margin.
QUAD_TOL = mpf(10) ** -20


def _f_near_one(rho, v: mpf) -> mpf:
    """f_rho(1 - v) from docs/theory.md §4, written in v = 1 - y so y never rounds to 1."""
    r = mpf(rho)
    return (-mpmath.log1p(-v)) ** (-r) / mpmath.gamma(1 - r)


def _int_near_one(g, rho, vmax: mpf) -> mpf:
    """int_0^vmax g(v) dv for g ~ v^-rho at 0, with v = w^(1/(1-rho)) (smooth in w)."""
    r = mpf(rho)
    p = 1 / (1 - r)

    def integrand(w):
        return g(w**p) * p * w ** (p - 1)

    top = vmax ** (1 - r)
    return mpmath.quad(integrand, [0, top / 2, top])


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("v", ["1e-20", "1e-3", "0.5", "0.999"])
def test_density_formula(rho, v: str) -> None:
    # density(y) in y against the formula in v = 1 - y (log1p): the two agree to 10^-25
    # (30 digits, minus the conditioning of ln(1/y) near y = 1 when v = 1e-20 is exact in y).
    with mpmath.workdps(DPS + 30):
        vv = mpf(v)
        y = 1 - vv
        ref = _f_near_one(rho, vv)
    with mpmath.workdps(DPS):
        assert abs(density(rho, y, dps=DPS) / ref - 1) < mpf(10) ** -25


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("q", ["0.001", "0.1", "0.5", "0.9", "0.999999"])
def test_window_mass_continuum_against_quadrature(rho, q: str) -> None:
    # M(q) = int_{1-q}^1 f_rho(y) dy (docs/theory.md §4), by quadrature in v = 1 - y.
    with mpmath.workdps(DPS):
        qq = mpf(q)
        direct = _int_near_one(lambda v: _f_near_one(rho, v), rho, qq)
        value = window_mass_continuum(rho, qq, dps=DPS)
        assert abs(value - direct) <= QUAD_TOL, (rho, q)


@pytest.mark.parametrize("rho", RHOS)
def test_window_mass_asymptotic_ratio_tends_to_one(rho) -> None:
    # M(q) / (q^(1-rho)/Gamma(2-rho)) = 1 + O(q): expanding -ln(1-q) = q + q^2/2 + ... and
    # P(a, x) = x^a/Gamma(a+1) (1 - a x/(a+1) + ...) the O(q) coefficient is below 1.
    ratios = []
    for k in range(2, 13, 2):
        q = mpf(10) ** -k
        ratio = window_mass_continuum(rho, q, dps=DPS) / window_mass_asymptotic(rho, q, dps=DPS)
        with mpmath.workdps(DPS):
            assert abs(ratio - 1) <= q, (rho, k, ratio)
        ratios.append(abs(ratio - 1))
    if rho != 0:
        assert ratios[-1] < ratios[0]


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("y", ["1e-6", "0.01", "0.3", "0.9", "0.999"])
def test_cumulative_mass_is_integral_of_density_over_x(rho, y: str) -> None:
    # F(y) = int_y^1 f(x)/x dx (docs/theory.md §4), by quadrature in v = 1 - x.
    with mpmath.workdps(DPS):
        yy = mpf(y)
        direct = _int_near_one(lambda v: _f_near_one(rho, v) / (1 - v), rho, 1 - yy)
        assert abs(cumulative_mass(rho, yy, dps=DPS) - direct) <= QUAD_TOL * max(1, direct)


@pytest.mark.parametrize("rho", RHOS)
def test_density_normalised_and_fixed_point(rho) -> None:
    # int_0^1 f = 1 (quadrature in v = 1 - y), and the fixed point a C^kappa = 1/Z:
    # f(y) F(y)^kappa Z(t) / t = 1 for every y (identity; 1e-27 for 30-digit arithmetic).
    with mpmath.workdps(DPS):
        total = _int_near_one(lambda v: _f_near_one(rho, v), rho, mpf(1))
        assert abs(total - 1) < QUAD_TOL
        r = mpf(rho)
        kappa = r / (1 - r)
        for y in ("1e-9", "0.2", "0.5", "0.99"):
            for t in (1, 7, 1000):
                lhs = density(rho, y, dps=DPS) * cumulative_mass(rho, y, dps=DPS) ** kappa
                assert abs(lhs * normaliser(rho, t, dps=DPS) / t - 1) < mpf(10) ** -27


@pytest.mark.parametrize("rho", RHOS)
def test_normaliser_against_quadrature(rho) -> None:
    # Row normalisation sum_j a_j = 1 with a = C^-kappa / Z gives Z(t) = t int_0^1 F(y)^-kappa
    # dy; F(1 - v)^-kappa ~ v^-rho at v = 0, so the same substitution applies.
    with mpmath.workdps(DPS):
        r = mpf(rho)
        kappa = r / (1 - r)

        def g(v):
            return ((-mpmath.log1p(-v)) ** (1 - r) / mpmath.gamma(2 - r)) ** (-kappa)

        direct = _int_near_one(g, rho, mpf(1))
        for t in (1, 3, 2**20):
            assert abs(normaliser(rho, t, dps=DPS) / (t * direct) - 1) < QUAD_TOL


@pytest.mark.parametrize("rho", RHOS)
def test_key_cdf(rho) -> None:
    # Q(1-rho, ln(l/j)) = P(key <= j) = int_0^{j/l} f(y) dy = 1 - M(1 - j/l); by quadrature
    # and by the complementary window mass.
    with mpmath.workdps(DPS):
        for row, j in ((10, 3), (1000, 999), (2**20, 1), (5, 5)):
            value = key_cdf(rho, row, j, dps=DPS)
            if j == row:
                assert value == 1
                continue
            y = mpf(j) / row
            direct = mpmath.quad(
                lambda x: density(rho, x, dps=DPS),
                [mpf(0), y * mpf(10) ** -20, y * mpf(10) ** -5, y],
            )
            assert abs(value - direct) < QUAD_TOL, (row, j)
            assert abs(value - (1 - window_mass_continuum(rho, 1 - y, dps=DPS))) < 1e-25


def test_rho_zero_is_uniform_softmax() -> None:
    # rho = 0: f = 1, F(y) = ln(1/y), Z(t) = t, M(q) = q, P(key <= j) = j/l, all exact.
    with mpmath.workdps(DPS):
        assert density(0, "0.37") == 1
        assert abs(cumulative_mass(0, "0.37") - mpmath.log(1 / mpf("0.37"))) < 1e-28
        assert normaliser(0, 12) == 12
        assert abs(window_mass_continuum(0, "0.25") - mpf("0.25")) < 1e-28
        assert abs(window_mass_asymptotic(0, "0.25") - mpf("0.25")) < 1e-28
        assert abs(key_cdf(0, 7, 2) - mpf(2) / 7) < 1e-28
        assert window_mass_continuum(0.5, 1) == 1
        assert cumulative_mass(0.5, 1) == 0


def test_dps_is_respected() -> None:
    before = mpmath.mp.prec
    lo = window_mass_continuum(0.5, "0.01", dps=15)
    hi = window_mass_continuum(0.5, "0.01", dps=50)
    assert before == mpmath.mp.prec
    with mpmath.workdps(50):
        assert 0 < abs(lo - hi) / hi < mpf(10) ** -14


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: density(1, 0.5), "rho"),
        (lambda: density(-0.1, 0.5), "rho"),
        (lambda: density(float("nan"), 0.5), "rho"),
        (lambda: density(0.5, 0), "y"),
        (lambda: density(0.5, 1), "y"),
        (lambda: cumulative_mass(0.5, 1.5), "y"),
        (lambda: normaliser(0.5, 0), "t"),
        (lambda: window_mass_continuum(0.5, 0), "q"),
        (lambda: window_mass_continuum(0.5, 1.01), "q"),
        (lambda: window_mass_asymptotic(2, 0.1), "rho"),
        (lambda: key_cdf(0.5, 0, 1), "l"),
        (lambda: key_cdf(0.5, 5, 6), "j"),
        (lambda: key_cdf(0.5, 5, 0), "j"),
        (lambda: density(0.5, 0.5, dps=0), "dps"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("k", [20, 40, 53])
@pytest.mark.parametrize("dps", [15, 30])
def test_normaliser_keeps_its_digits_near_rho_one(k: int, dps: int) -> None:
    """``Z(t) = t Gamma(1-rho) Gamma(2-rho)^kappa`` at ``rho = 1 - eps``, ``eps = 2^-k``
    (``rho`` an exact float, ``kappa = (1-eps)/eps`` up to 9e15). Reference, by a different
    route: ``ln Gamma(1+eps) = -gamma_E eps + sum_{n>=2} (-1)^n zeta(n) eps^n / n`` (the
    Taylor series, summed to ``eps^n < 10^-120``) and ``Gamma(eps) = Gamma(1+eps)/eps``, at
    120 digits. ``Gamma(2-rho)^kappa`` multiplies the relative error of ``Gamma(2-rho)``
    by ``kappa``, so a fixed number of guard digits loses ``log10(kappa)`` of the result's.
    Tolerance ``10^-(dps-1)``: one digit of slack for the final rounding."""
    t = 3
    with mpmath.workdps(120):
        eps = mpf(2) ** -k
        series = -mpmath.euler * eps
        n = 2
        while eps**n > mpf(10) ** -120:
            series += (-1) ** n * mpmath.zeta(n) * eps**n / n
            n += 1
        gamma_1p = mpmath.exp(series)  # Gamma(1 + eps) = Gamma(2 - rho)
        kappa = (1 - eps) / eps
        ref = t * (gamma_1p / eps) * mpmath.exp(kappa * series)
    got = normaliser(1 - 2.0**-k, t, dps=dps)
    with mpmath.workdps(120):
        assert abs(got - ref) / ref < mpf(10) ** (1 - dps)

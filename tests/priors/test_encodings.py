"""Encodings: closed-form prior sums against direct high-precision summation (docs/theory.md §5).

Reference values come from a different method than the code under test: term-by-term
``mpmath.fsum`` of ``e^{b(d)}`` at 20 extra digits, with ``b(d)`` written out here from
the formula (not taken from the encoding), or another closed form (ALiBi vs KERPLE-power
at ``r2 = 1``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from priors.encodings import (
    ENCODINGS,
    ALiBi,
    CausalOTPrior,
    KerpleLog,
    KerplePower,
    LogDistance,
    NoPE,
    Sandwich,
    T5Buckets,
    UserBias,
    alibi_slopes,
    sandwich_heads,
    t5_bucket,
)

DPS = 30
#: closed forms are computed with >= 8 guard digits and rounded to DPS, the reference at
#: DPS + 20: the relative difference must be within a few units of 10^-DPS; 10^-(DPS-3)
#: leaves a factor 1000 for the rounding of the final quotient.
RTOL = mpmath.mpf(10) ** -(DPS - 3)

T5_TABLE = [-0.05 * k - 0.1 * math.sin(k) for k in range(32)]


def direct(weight, lo, hi, dps=DPS + 20):
    with mpmath.workdps(dps):
        return mpmath.fsum(weight(mpmath.mpf(d)) for d in range(lo, hi))


def weights():
    """(encoding, e^{b(d)} written from the formula in mpmath)."""
    return [
        (NoPE(), lambda d: mpmath.mpf(1)),
        (ALiBi(0.3), lambda d: mpmath.exp(-mpmath.mpf(0.3) * d)),
        (ALiBi(1e-4), lambda d: mpmath.exp(-mpmath.mpf(1e-4) * d)),
        (LogDistance(1.3), lambda d: (1 + d) ** -mpmath.mpf(1.3)),
        (LogDistance(0.7), lambda d: (1 + d) ** -mpmath.mpf(0.7)),
        (LogDistance(1.0), lambda d: 1 / (1 + d)),
        (LogDistance(1 + 1e-8), lambda d: (1 + d) ** -mpmath.mpf(1 + 1e-8)),
        (KerpleLog(1.7, 0.3), lambda d: (1 + mpmath.mpf(0.3) * d) ** -mpmath.mpf(1.7)),
        (KerpleLog(0.6, 2.5), lambda d: (1 + mpmath.mpf(2.5) * d) ** -mpmath.mpf(0.6)),
        (KerplePower(1.0, 0.5), lambda d: mpmath.exp(-mpmath.sqrt(d))),
        (KerplePower(0.7, 1.5), lambda d: mpmath.exp(-mpmath.mpf(0.7) * d ** mpmath.mpf(1.5))),
    ]


@pytest.mark.parametrize("enc,weight", weights(), ids=lambda x: getattr(x, "name", ""))
@pytest.mark.parametrize("lo,hi", [(0, 1), (0, 7), (3, 200), (0, 3000), (100, 3000)])
def test_weight_sum_matches_direct_summation(enc, weight, lo, hi):
    got = enc.weight_sum(lo, hi, dps=DPS)
    ref = direct(weight, lo, hi)
    with mpmath.workdps(DPS + 20):
        assert abs(got - ref) <= RTOL * abs(ref), (enc, lo, hi, got, ref)


@pytest.mark.parametrize("enc,weight", weights()[1:], ids=lambda x: getattr(x, "name", ""))
def test_window_and_distant_mass_match_direct(enc, weight):
    w, n = 16, 2500
    s_w, tail = direct(weight, 0, w), direct(weight, w, n)
    with mpmath.workdps(DPS + 20):
        m_ref, d_ref = s_w / (s_w + tail), tail / (s_w + tail)
        assert abs(enc.window_mass(w, n) - m_ref) <= RTOL * m_ref
        # the distant mass is computed from the tail: full relative accuracy even when tiny
        assert abs(enc.distant_mass(w, n) - d_ref) <= RTOL * d_ref


def test_distant_mass_keeps_relative_precision_when_tiny():
    # ALiBi with a large slope: D ~ e^{-m W} ~ 1e-87, far below 1 - M in float or at dps 30
    enc = ALiBi(10.0)
    with mpmath.workdps(60):
        m = mpmath.mpf(10)
        ref = mpmath.exp(-m * 20) * (1 - mpmath.exp(-m * 80)) / (1 - mpmath.exp(-m * 100))
    got = enc.distant_mass(20, 100)
    with mpmath.workdps(60):
        assert abs(got - ref) <= RTOL * ref


def test_kerple_power_em_tail_matches_alibi_closed_form():
    # r2 = 1 makes KERPLE-power the geometric ALiBi prior: a closed form that checks the
    # Euler-Maclaurin tail (the small slope forces it: 1024 terms are far from enough)
    kp, al = KerplePower(0.001, 1.0), ALiBi(0.001)
    for lo, hi in [(0, 5000), (512, 10**6), (512, 10**15)]:
        got, ref = kp.weight_sum(lo, hi), al.weight_sum(lo, hi, dps=DPS + 10)
        with mpmath.workdps(DPS + 10):
            assert abs(got - ref) <= RTOL * ref, (lo, hi)
    with mpmath.workdps(DPS + 10):
        assert abs(kp.total_sum() - al.total_sum(dps=40)) <= RTOL * al.total_sum(dps=40)


def test_kerple_power_slow_decay_matches_direct_summation():
    # r1 = 0.05, r2 = 0.5: e^{-0.05 sqrt(d)} is still 0.08 at d = 2500, so the EM tail is used
    enc = KerplePower(0.05, 0.5)
    ref = direct(lambda d: mpmath.exp(-mpmath.mpf(0.05) * mpmath.sqrt(d)), 0, 20000)
    with mpmath.workdps(DPS + 20):
        assert abs(enc.partial_sum(20000) - ref) <= RTOL * ref


def test_o1_in_length_closed_forms_are_fast_and_finite():
    for enc in [NoPE(), ALiBi(0.1), LogDistance(1.1), KerpleLog(1.5, 0.3), CausalOTPrior(0.3)]:
        d = enc.distant_mass(512, 10**15)
        assert 0 < d < 1


@pytest.mark.parametrize("alpha", [1.1, 2.0, 3.5])
def test_log_distance_limit_is_harmonic_over_zeta(alpha):
    w = 64
    with mpmath.workdps(50):
        ref = mpmath.fsum(mpmath.mpf(k) ** -mpmath.mpf(alpha) for k in range(1, w + 1))
        ref /= mpmath.zeta(mpmath.mpf(alpha))
    got = LogDistance(alpha).limit_window_mass(w)
    with mpmath.workdps(50):
        assert abs(got - ref) <= RTOL * ref
    # and the finite-length masses approach it from above (docs/theory.md §5)
    assert LogDistance(alpha).window_mass(w, 10**15) >= got


@pytest.mark.parametrize("slope", [0.01, 0.5, 3.0])
def test_alibi_limit_is_one_minus_exp(slope):
    with mpmath.workdps(50):
        ref = -mpmath.expm1(-mpmath.mpf(slope) * 10)
    got = ALiBi(slope).limit_window_mass(10)
    with mpmath.workdps(50):
        assert abs(got - ref) <= RTOL * ref
    assert ALiBi(slope).limit_distant_mass(10) > 0


def test_kerple_log_limit_matches_log_distance_when_r2_is_one():
    a, b = KerpleLog(1.4, 1.0), LogDistance(1.4)
    with mpmath.workdps(40):
        assert abs(a.limit_window_mass(100) - b.limit_window_mass(100)) <= RTOL
        assert abs(a.limit_distant_mass(100) - b.limit_distant_mass(100)) <= RTOL


def test_conventions_window_includes_query_and_causal_keys():
    # W = 1 is the query alone (d = 0); the query at position l sees l keys j <= l.
    assert NoPE().window_mass(1, 1) == 1  # the only key is the query itself
    assert NoPE().window_mass(1, 4) == mpmath.mpf(1) / 4  # keys j = 1..4, d = 3..0
    # ALiBi W = 1: e^0 / sum_{d=0}^{l-1} e^{-m d}
    with mpmath.workdps(40):
        ref = 1 / mpmath.fsum(mpmath.exp(-mpmath.mpf(0.5) * d) for d in range(4))
        assert abs(ALiBi(0.5).window_mass(1, 4) - ref) <= RTOL
    # partial sums: S_m sums d = 0..m-1, so S_1 = e^{b(0)}
    assert LogDistance(2.0).partial_sum(1) == 1
    assert ALiBi(0.5).partial_sum(0) == 0


def test_bias_values_follow_the_formulas():
    d = np.arange(0, 50, dtype=float)
    np.testing.assert_array_equal(ALiBi(0.25).bias(d), -0.25 * d)
    np.testing.assert_allclose(LogDistance(1.5).bias(d), -1.5 * np.log(1 + d), rtol=1e-15)
    np.testing.assert_allclose(KerpleLog(2, 0.5).bias(d), -2 * np.log(1 + 0.5 * d), rtol=1e-15)
    np.testing.assert_allclose(KerplePower(0.5, 1.5).bias(d), -0.5 * d**1.5, rtol=1e-15)
    assert isinstance(ALiBi(0.25).bias(3), float)
    # Sandwich: b(d) = scale (sum_i cos(d w_i / r) - dim/2), b(0) = 0, bounded below by -scale dim
    enc = Sandwich(dim=6, base=100.0, scale=0.5, compress=2.0)
    ref = [0.5 * (sum(math.cos(x / 2 * 100 ** (-2 * i / 6)) for i in (1, 2, 3)) - 3) for x in d]
    np.testing.assert_allclose(enc.bias(d), ref, rtol=1e-13, atol=1e-13)
    assert enc.bias(0.0) == 0.0


def test_t5_buckets_follow_the_reference_rule():
    # unidirectional T5: exact buckets below 16, then log-spaced up to max_distance = 128
    b = t5_bucket(np.arange(300))
    assert list(b[:16]) == list(range(16))
    # bucket 16 starts at 16, the last (31) at the first d with 16 + floor(ln(d/16)/ln 8 * 16) >= 31
    first_last = next(
        d for d in range(16, 300) if 16 + int(math.log(d / 16) / math.log(8) * 16) >= 31
    )
    assert int(np.argmax(b == 31)) == first_last
    assert np.all(np.diff(b) >= 0) and b[-1] == 31
    enc = T5Buckets(table=T5_TABLE)
    assert enc.saturation == first_last
    # closed form vs direct summation of the table values
    ref = direct(lambda d: mpmath.exp(mpmath.mpf(T5_TABLE[int(t5_bucket(int(d)))])), 0, 2000)
    with mpmath.workdps(DPS + 20):
        assert abs(enc.partial_sum(2000) - ref) <= RTOL * ref
    # beyond saturation each key adds exactly e^{table[-1]}
    with mpmath.workdps(DPS + 20):
        step = enc.weight_sum(10**12, 10**12 + 5, dps=40)
        assert abs(step - 5 * mpmath.exp(mpmath.mpf(T5_TABLE[-1]))) <= RTOL


def test_causal_ot_prior_cells_and_window_mass():
    rho, n = 1 / 3, 200
    enc = CausalOTPrior(rho)
    # cells of the Gamma(1-rho) law of ln(l/j): they sum to 1 and give M = P(a, -ln(1-q))
    with mpmath.workdps(50):
        a = 1 - mpmath.mpf(rho)
        cells = [
            mpmath.gammainc(a, mpmath.log(mpmath.mpf(n) / (n - d)), regularized=True)
            - (
                mpmath.gammainc(a, mpmath.log(mpmath.mpf(n) / (n - d - 1)), regularized=True)
                if d < n - 1
                else 0
            )
            for d in range(n)
        ]
        assert abs(mpmath.fsum(cells) - 1) < mpmath.mpf(10) ** -45
        ref_m = mpmath.fsum(cells[:10])
        ref_p = mpmath.gammainc(a, 0, -mpmath.log(1 - mpmath.mpf(10) / n), regularized=True)
        assert abs(ref_m - ref_p) < mpmath.mpf(10) ** -45
        assert abs(enc.window_mass(10, n) - ref_m) <= RTOL * ref_m
        assert abs(enc.distant_mass(10, n) - (1 - ref_m)) <= RTOL
        # the float64 bias is ln(cell), up to ~log10(l) digits lost (stated in the module)
        got = enc.bias(np.arange(n, dtype=float), length=n)
        ref = np.array([float(mpmath.log(c)) for c in cells])
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11)


@pytest.mark.parametrize("length", [10**15, 10**18])
@pytest.mark.parametrize(("lo", "width"), [("half", 1), ("half", 100), ("end", 1)])
@pytest.mark.parametrize("dps", [15, 30])
def test_causal_ot_weight_sum_of_a_narrow_range_keeps_its_digits(length, lo, width, dps):
    """The prior mass of ``width`` keys far from the diagonal (``d`` from ``l/2``, or the
    last ``d = l - 2``) at ``rho = 0`` and ``rho = 1/2``, by closed forms that use no
    incomplete gamma: ``rho = 0`` is uniform, the mass is ``width / l`` exactly;
    ``rho = 1/2`` has ``P(1/2, x) = erf(sqrt(x))``, so the mass is
    ``erf(sqrt(x2)) - erf(sqrt(x1))`` with ``x = -log1p(-d/l)``, at 120 digits. The cell
    spans ``x2 - x1 ~ 2 width / l`` of ``x ~ ln 2``, so rounded ``x`` cost ``log10(l)``
    digits. Tolerance ``10^-(dps-1)`` relative (``dps`` asked, one digit of slack)."""
    start = length // 2 if lo == "half" else length - 2
    enc0, enc_half = CausalOTPrior(rho=0.0), CausalOTPrior(rho=0.5)
    with mpmath.workdps(120):
        ref0 = mpmath.mpf(width) / length
        x1 = -mpmath.log1p(-mpmath.mpf(start) / length)
        x2 = -mpmath.log1p(-mpmath.mpf(start + width) / length)
        ref_half = mpmath.erf(mpmath.sqrt(x2)) - mpmath.erf(mpmath.sqrt(x1))
        for enc, ref in ((enc0, ref0), (enc_half, ref_half)):
            got = enc.weight_sum(start, start + width, length=length, dps=dps)
            assert abs(got - ref) <= mpmath.mpf(10) ** (1 - dps) * ref


def test_causal_ot_window_mass_matches_h2_continuum_when_available():
    si = pytest.importorskip("priors.scale_invariant", reason="H2's module not present yet")
    for rho, w, n in [(0.3, 8, 1024), (0.9, 512, 65536), (0.0, 3, 7)]:
        got = CausalOTPrior(rho).window_mass(w, n)
        with mpmath.workdps(60):
            q = mpmath.mpf(w) / n
        ref = si.window_mass_continuum(rho, q, dps=40)
        with mpmath.workdps(40):
            assert abs(got - ref) <= RTOL * ref


def test_causal_ot_small_q_asymptotic():
    # M ~ q^(1-rho) / Gamma(2-rho) as q -> 0 (docs/theory.md §4): relative gap O(q)
    rho = 0.5
    got = CausalOTPrior(rho).window_mass(1, 10**12)
    with mpmath.workdps(40):
        asym = mpmath.mpf(10) ** (-12 * (1 - rho)) / mpmath.gamma(2 - rho)
        assert abs(got / asym - 1) < 1e-11


def test_user_bias_array_with_tails():
    vals = -1.5 * np.log1p(np.arange(64.0))
    enc = UserBias(vals, tail="power", tail_exponent=1.5)
    # the power tail continues the log-distance law exactly: compare with LogDistance(1.5)
    # (the float64 values carry ~1e-16 relative error, hence 1e-13)
    ld = LogDistance(1.5)
    for w, n in [(8, 64), (8, 10**6), (100, 10**15)]:
        assert abs(enc.window_mass(w, n) - ld.window_mass(w, n)) < 1e-13
    assert abs(enc.limit_window_mass(8) - ld.limit_window_mass(8)) < 1e-13
    const = UserBias(vals, tail="constant")
    with mpmath.workdps(40):
        head = mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in vals)
        ref = head + (1000 - 64) * mpmath.exp(mpmath.mpf(vals[-1]))
        assert abs(const.partial_sum(1000) - ref) <= RTOL * ref
    assert const.limit_window_mass(8) == 0
    with pytest.raises(ValueError, match="length"):
        UserBias(vals).window_mass(8, 65)
    assert UserBias(vals).window_mass(8, 64) == enc.window_mass(8, 64)


def test_user_bias_callable_is_sampled():
    enc = UserBias(lambda d: -0.5 * d, extent=100, tail="constant")
    al = ALiBi(0.5)
    assert abs(enc.window_mass(10, 100) - al.window_mass(10, 100)) < 1e-25
    with pytest.raises(ValueError, match="extent"):
        UserBias(lambda d: 0.0)


@pytest.mark.parametrize("window", [65, 100, 120])
def test_user_bias_tiny_tail_after_a_dominant_head_keeps_its_digits(window):
    """Values ``b(d) = -d`` (integers: exact floats), ``d < 200``: the distant mass over more
    than 64 values is ``T / (S_W + T)`` with the geometric closed forms
    ``S_W = (1 - e^-W) / (1 - e^-1)`` and ``T = e^-W (1 - e^-(200-W)) / (1 - e^-1)``,
    evaluated at 60 digits. ``T`` is ``e^-W`` (down to 1e-52) of the sum up to 200, so a
    difference of prefix sums cancels that many digits. Tolerance ``10^-29`` relative: the
    30 digits asked, one of slack for the final rounding."""
    enc = UserBias([-float(d) for d in range(200)])
    with mpmath.workdps(60):
        r = mpmath.exp(-1)
        s_w = -mpmath.expm1(-window) / (1 - r)
        tail = mpmath.exp(-window) * -mpmath.expm1(-(200 - window)) / (1 - r)
        ref = tail / (s_w + tail)
        got = enc.distant_mass(window, 200, dps=30)
        assert abs(got - ref) <= mpmath.mpf(10) ** -29 * ref


def test_user_bias_range_sum_below_a_huge_first_weight():
    """``b(0) = 100``, ``b(d) = -100`` for ``1 <= d <= 200``: the weight sum over
    ``1 <= d < 201`` is ``200 e^-100`` exactly (about 1e-85 of ``e^100``), by the closed
    form at 60 digits; tolerance ``10^-29`` relative (30 digits asked)."""
    enc = UserBias([100.0] + [-100.0] * 200)
    with mpmath.workdps(60):
        ref = 200 * mpmath.exp(-100)
        got = enc.weight_sum(1, 201, dps=30)
        assert abs(got - ref) <= mpmath.mpf(10) ** -29 * ref


@pytest.mark.parametrize("window", [1, 5, 10, 20])
def test_user_bias_limit_distant_mass_of_a_tiny_power_tail(window):
    """``b(0) = 0``, ``b(d) = -80`` for ``1 <= d <= 9``, then the stated power tail
    ``e^-80 (10/(1+d))^2``: the tail beyond ``W`` is about ``e^-80`` (1e-34) of ``S_W``.
    Reference by the closed form ``sum_{k>n} k^-2 = pi^2/6 - sum_{k<=n} k^-2`` at 80 digits:
    ``T_W = e^-80 (max(0, 10 - max(W, 1)) + 100 (pi^2/6 - H_{max(W,10)}^(2)))`` for
    ``W >= 1`` and ``D_inf(W) = T_W / (S_W + T_W)``. Tolerance ``10^-29`` relative (30
    digits asked)."""
    values = [0.0] + [-80.0] * 9
    enc = UserBias(values, tail="power", tail_exponent=2.0)
    with mpmath.workdps(80):
        e = mpmath.exp(-80)
        n = max(window, 10)
        given = (10 - window) * e if window < 10 else mpmath.mpf(0)
        beyond = 100 * e * (mpmath.pi**2 / 6 - mpmath.fsum(mpmath.mpf(k) ** -2
                                                          for k in range(1, n + 1)))
        tail = given + beyond
        s_w = 1 + (min(window, 10) - 1) * e + (100 * e * mpmath.fsum(
            mpmath.mpf(k) ** -2 for k in range(11, window + 1)) if window > 10 else 0)
        ref = tail / (s_w + tail)
        got = enc.limit_distant_mass(window, dps=30)
        assert abs(got - ref) <= mpmath.mpf(10) ** -29 * ref


def test_alibi_slopes_variants():
    # power of two: both variants are 2^(-8h/H)
    assert alibi_slopes(8) == alibi_slopes(8, variant="exp2") == [2.0**-k for k in range(1, 9)]
    assert alibi_slopes(16)[0] == 2**-0.5
    # H = 12: the 8 slopes 2^-h, then 2^(-h/2) for odd h = 1, 3, 5, 7 (every other of H = 16)
    odd = [2 ** (-h / 2) for h in (1, 3, 5, 7)]
    assert alibi_slopes(12) == [2.0**-h for h in range(1, 9)] + odd
    assert alibi_slopes(12, variant="exp2") == [2 ** (-8 * h / 12) for h in range(1, 13)]
    assert alibi_slopes(1) == [2.0**-8]


@pytest.mark.parametrize(
    "make,arg",
    [
        (lambda: ALiBi(-0.1), "slope"),
        (lambda: ALiBi(0.0), "slope"),
        (lambda: ALiBi(float("nan")), "slope"),
        (lambda: LogDistance(float("inf")), "alpha"),
        (lambda: LogDistance(-1.0), "alpha"),
        (lambda: KerpleLog(0.0, 1.0), "r1"),
        (lambda: KerpleLog(1.0, -1.0), "r2"),
        (lambda: KerplePower(1.0, 2.5), "r2"),
        (lambda: KerplePower(-1.0, 1.0), "r1"),
        (lambda: CausalOTPrior(1.0), "rho"),
        (lambda: CausalOTPrior(-0.1), "rho"),
        (lambda: CausalOTPrior(float("nan")), "rho"),
        (lambda: T5Buckets(table=[0.0] * 3), "table"),
        (lambda: T5Buckets(), "table"),
        (lambda: T5Buckets(num_buckets=32, max_distance=8, table=[0.0] * 32), "max_distance"),
        (lambda: Sandwich(dim=7), "dim"),
        (lambda: Sandwich(compress=0.5), "compress"),
        (lambda: UserBias([0.0, float("nan")]), "values"),
        (lambda: UserBias([0.0], tail="power"), "tail_exponent"),
        (lambda: UserBias([0.0], tail="linear"), "tail"),
        (lambda: alibi_slopes(0), "num_heads"),
        (lambda: alibi_slopes(4, variant="x"), "variant"),
        (lambda: NoPE().window_mass(0, 10), "window"),
        (lambda: NoPE().window_mass(10, 0), "length"),
        (lambda: NoPE().window_mass(10, 5), "length"),
        (lambda: NoPE().window_mass(2.5, 5), "window"),
        (lambda: NoPE().bias(-1.0), "d"),
        (lambda: CausalOTPrior(0.3).bias(1.0), "length"),
        (lambda: CausalOTPrior(0.3).partial_sum(3), "length"),
        (lambda: LogDistance(1.1).window_mass(1, 10, dps=2), "dps"),
        (lambda: Sandwich(dim=4).window_mass(1, 10**9, dps=13), "length"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(make, arg):
    with pytest.raises(ValueError, match=arg):
        make()


def test_registry_names_and_params_are_json_friendly():
    import json

    assert set(ENCODINGS) == {
        "nope", "alibi", "log-distance", "kerple-log", "kerple-power", "t5", "sandwich",
        "causal-ot", "user",
    }
    for enc in [NoPE(), ALiBi(0.5), LogDistance(1.3), KerpleLog(), KerplePower(),
                T5Buckets(table=T5_TABLE), Sandwich(), CausalOTPrior(0.2), UserBias([0.0, -1.0])]:
        assert ENCODINGS[enc.name] is type(enc)
        json.dumps(enc.params)


def test_sandwich_warns_beyond_float64_digits_and_matches_fsum():
    enc = Sandwich(dim=8)
    with pytest.warns(RuntimeWarning, match="float64-backed"):
        enc.window_mass(4, 100, dps=30)
    got = enc.window_mass(4, 100, dps=13)
    w = np.exp(enc.bias(np.arange(100.0)))
    # an independent float64 evaluation: numpy's pairwise sum (rounding ~1e-15 relative)
    assert abs(float(got) - w[:4].sum() / w.sum()) < 1e-13


def _nemo_sandwich_bias(d: np.ndarray, head: int, num_heads: int, hidden: int) -> np.ndarray:
    """NeMo's ``SandwichRelativePositionEmbedding`` written out from its formula (not from
    priors): ``inv_freq = 1 / 10000^(2 i / hs)``, ``i = 1..hs/2``; bias of head ``k`` (1-based)
    ``(sum_i cos(d inv_freq_i) - hs/2) / (k * 8 / H)``."""
    inv_freq = 1.0 / (10000.0 ** (2.0 * np.arange(1, hidden // 2 + 1) / hidden))
    total = np.cos(d[:, None] * inv_freq[None, :]).sum(axis=1)
    return (total - hidden / 2) / ((head + 1) * 8 / num_heads)


@pytest.mark.parametrize(("num_heads", "hidden"), [(8, 64), (12, 64), (32, 128)])
def test_sandwich_heads_match_nemo_formula(num_heads, hidden):
    """``sandwich_heads`` gives every head NeMo's scale ``H/(8k)``. Reference: NeMo's bias
    formula evaluated directly in numpy. Tolerance per distance: the two compute each phase
    ``d w_i`` (``w_i <= 1``) by a different route (``base^(-x)`` against ``1/base^x``), which
    may differ by two ulps of ``d w_i``, so each cosine by ``2 eps d w_i`` plus its own
    rounding; summed over the ``hidden/2`` terms and scaled:
    ``scale * eps * (4 d sum_i w_i + 2 hidden)`` (a factor-2 allowance on each part)."""
    heads = sandwich_heads(num_heads, hidden)
    assert len(heads) == num_heads
    d = np.arange(0, 5000, dtype=np.float64)
    for h, enc in enumerate(heads):
        assert enc.scale == num_heads / (8 * (h + 1))
        assert enc.dim == hidden
        err = np.abs(enc.bias(d) - _nemo_sandwich_bias(d, h, num_heads, hidden))
        inv_freq = 10000.0 ** (-2.0 * np.arange(1, hidden // 2 + 1) / hidden)
        allowed = enc.scale * np.finfo(np.float64).eps * (4 * d * inv_freq.sum() + 2 * hidden)
        assert np.all(err <= allowed), float(np.max(err / allowed))
    # sharper heads keep more of the recent window (larger scale, steeper bias)
    masses = [float(enc.window_mass(16, 1024, dps=13)) for enc in heads]
    assert masses == sorted(masses, reverse=True)


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "8", 10**6])
def test_sandwich_heads_bad_num_heads(bad):
    with pytest.raises(ValueError, match="num_heads"):
        sandwich_heads(bad, 64)


@pytest.mark.parametrize(("lo", "hi"), [(0, 16), (0, 5000), (7, 131), (100, 100), (90, 5000)])
def test_t5_bucket_counts_match_counting_the_buckets_one_by_one(lo, hi):
    # bucket_counts (bisection on the bucket starts, O(num_buckets)) against a bincount of
    # t5_bucket over every distance: exact integers, so they must be equal
    enc = T5Buckets(table=[0.0] * 32)
    direct = np.bincount(t5_bucket(np.arange(lo, hi)), minlength=32).tolist()
    assert enc.bucket_counts(lo, hi) == direct and sum(direct) == hi - lo

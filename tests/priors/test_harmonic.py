"""Precision of the generalised harmonic numbers (docs/theory.md §6).

References, each by a method independent of the code under test (Hurwitz-zeta / digamma
differences with cancellation recovery):

* direct summation in mpmath at ``dps + 20`` digits (``fsum`` of ``k^-alpha``) for
  ``m`` up to a few thousand, and in Arb balls (certified) up to ``m = 1e5``;
* the Euler–Maclaurin bracket of ``priors.brackets`` (Arb, rigorous remainder) for
  ``m`` up to ``1e15``.

The exponent is built ONCE as an exact binary number and reused: ``mpf('1.00000001')``
made at 15 digits and at 50 digits are different numbers, and at ``delta = 1e-8`` the
difference would show up at the 10th digit of ``H_m``.
"""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import flint
import mpmath
import pytest
from mpmath import mpf

from priors.brackets import euler_maclaurin_bracket
from priors.harmonic import (
    DEFAULT_DPS,
    harmonic_number,
    harmonic_number_arb,
    harmonic_tail,
    harmonic_tail_arb,
    power_sum,
    power_sum_arb,
)
from priors.validation import as_count, as_real

# Exponents aimed at the regime switches: alpha = 1 exactly (digamma), delta crossing
# 1e-8 .. 1e-2 (cancellation of log10(1/delta) digits), both sides of 1, and alpha < 1.
ALPHAS = {
    "one": mpf(1),
    "1+2^-27": 1 + mpf(2) ** -27,  # delta ~ 7.45e-9
    "1-2^-27": 1 - mpf(2) ** -27,
    "1+1e-8(float)": mpf(1.00000001),  # the float's exact binary value
    "1+2^-20": 1 + mpf(2) ** -20,
    "1+1e-5(float)": mpf(1.00001),
    "1+1e-2(float)": mpf(1.01),
    "1.1(float)": mpf(1.1),
    "2": mpf(2),
    "0.5": mpf(0.5),
    "3.7(float)": mpf(3.7),
}
# m aimed at the direct/closed-form switch (64 terms) and the trivial cases.
SMALL_M = (0, 1, 2, 3, 63, 64, 65, 66, 100, 128, 1000, 2999)
LARGE_M = (10**6, 2**40, 10**12, 10**15 - 1, 10**15)


def _direct_mpmath(alpha: mpf, checkpoints: tuple[int, ...], dps: int) -> dict[int, mpf]:
    """Partial sums sum_{k<=m} k^-alpha at every checkpoint, by one direct sweep."""
    out: dict[int, mpf] = {}
    top = max(checkpoints)
    with mpmath.workdps(dps):
        total = mpf(0)
        if 0 in checkpoints:
            out[0] = +total
        for k in range(1, top + 1):
            total += mpf(k) ** (-alpha)
            if k in checkpoints:
                out[k] = +total
    return out


def _arb_of(x: mpf) -> flint.arb:
    """Exact Arb copy of a binary mpf."""
    sign, man, exp, _bc = x._mpf_
    return flint.arb((-man if sign else man, exp))


def _rel_err(value: mpf, ref: mpf) -> mpf:
    with mpmath.workdps(60):
        return abs(value - ref) / abs(ref) if ref != 0 else abs(value)


def _assert_all(errors: dict[object, mpf], bound: mpf, what: str) -> None:
    """Assert every relative error is below ``bound``; on failure give the worst point."""
    bad = {k: v for k, v in errors.items() if not v < bound}
    worst = max(errors, key=lambda k: errors[k])
    assert not bad, (
        f"{what}: {len(bad)}/{len(errors)} points above {mpmath.nstr(bound, 3)}; "
        f"worst {worst}: {mpmath.nstr(errors[worst], 3)}"
    )


@pytest.mark.parametrize("dps", [15, 30, 50])
@pytest.mark.parametrize("name", list(ALPHAS))
def test_harmonic_number_against_direct_summation(name: str, dps: int) -> None:
    # Required accuracy: relative error < 10^-(dps-5). The reference is summed at
    # dps + 20 digits, so its own rounding (<= 3000 terms * 10^-(dps+20)) is far below that.
    alpha = ALPHAS[name]
    ref = _direct_mpmath(alpha, SMALL_M, dps + 20)
    errors = {m: _rel_err(harmonic_number(m, alpha, dps=dps), ref[m]) for m in SMALL_M}
    _assert_all(errors, mpf(10) ** -(dps - 5), f"H_m^({name}) at dps={dps}")


@pytest.mark.parametrize("name", ["one", "1+2^-27", "1-2^-27", "1+1e-5(float)", "0.5"])
def test_harmonic_tail_against_direct_summation(name: str) -> None:
    # Tails far out (lo ~ 1e12) are the worst case for the zeta difference: both Hurwitz
    # values are nearly equal. 64 and 65..200 terms straddle the direct/closed-form switch.
    alpha = ALPHAS[name]
    dps = DEFAULT_DPS
    errors = {}
    for lo in (0, 10, 10**6, 10**12):
        for count in (1, 64, 65, 200):
            with mpmath.workdps(dps + 20):
                ref = mpmath.fsum(mpf(k) ** (-alpha) for k in range(lo + 1, lo + count + 1))
            errors[(lo, count)] = _rel_err(harmonic_tail(lo, lo + count, alpha, dps=dps), ref)
    _assert_all(errors, mpf(10) ** -(dps - 5), f"tail of {name}")


@pytest.mark.parametrize("dps", [30, 50])
@pytest.mark.parametrize("name", list(ALPHAS))
def test_harmonic_number_against_euler_maclaurin(name: str, dps: int) -> None:
    # The Euler–Maclaurin bracket (Arb, rigorous remainder) at dps + 10 has width about
    # 10^-(dps+10) relative, so any point inside it is an independent reference accurate far
    # beyond the 10^-(dps-5) required of harmonic_number.
    alpha = ALPHAS[name]
    errors = {}
    for m in LARGE_M:
        lo, hi = euler_maclaurin_bracket(m, alpha, dps=dps + 10)
        with mpmath.workdps(dps + 20):
            assert (hi - lo) / lo < mpf(10) ** -(dps + 5), "reference bracket too wide"
            errors[m] = _rel_err(harmonic_number(m, alpha, dps=dps), (lo + hi) / 2)
    _assert_all(errors, mpf(10) ** -(dps - 5), f"H_m^({name}) vs Euler–Maclaurin, dps={dps}")


def test_direct_summation_to_1e5_in_arb() -> None:
    # m = 1e5 at delta = 2^-27: a certified direct sum (Arb balls, 200 bits) contains the
    # value and is narrower than 10^-40; the mpmath result must be within 10^-25 relative.
    alpha = ALPHAS["1+2^-27"]
    m = 10**5
    with flint.ctx.workprec(200):
        a = _arb_of(alpha)
        total = flint.arb(0)
        for k in range(1, m + 1):
            total += flint.arb(k) ** (-a)
        assert total.rel_accuracy_bits() > 140
        man, exp = total.mid().man_exp()
    with mpmath.workdps(60):
        ref = mpf((int(man), int(exp)))
    assert _rel_err(harmonic_number(m, alpha, dps=30), ref) < mpf(10) ** -25
    ball = harmonic_number_arb(m, alpha, prec=128)
    with flint.ctx.workprec(200):
        assert ball.overlaps(total), "Arb zeta-difference ball misses the direct sum"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["one", "1+2^-27", "1-2^-27", "1+1e-2(float)", "0.5"])
def test_direct_summation_to_1e5_mpmath(name: str) -> None:
    # Long sweep: mpmath direct summation at 50 digits up to m = 1e5 (about 7 s per alpha).
    alpha = ALPHAS[name]
    checkpoints = (10**4, 3 * 10**4, 10**5)
    ref = _direct_mpmath(alpha, checkpoints, 50)
    errors = {m: _rel_err(harmonic_number(m, alpha, dps=30), ref[m]) for m in checkpoints}
    _assert_all(errors, mpf(10) ** -25, f"H_m^({name}) to 1e5")


@pytest.mark.parametrize("delta_exp", [8, 12, 20, 40])
@pytest.mark.parametrize("m", [65, 10**6, 10**12, 10**15])
def test_arb_balls_contain_high_precision_value(delta_exp: int, m: int) -> None:
    # Ball must contain the mpmath value computed at 60 digits (which is itself checked
    # above against independent references) and be narrow: >= prec bits of relative
    # accuracy, as the docstring promises.
    alpha = 1 + mpf(2) ** -round(delta_exp * 3.3219)  # delta ~ 10^-delta_exp, exact binary
    ball = harmonic_number_arb(m, alpha, prec=128)
    assert ball.rel_accuracy_bits() >= 128
    ref = harmonic_number(m, alpha, dps=60)
    with flint.ctx.workprec(300):
        # the 60-digit reference is itself within 10^-58 relative
        point = flint.arb(_arb_of(ref), abs(_arb_of(ref)) * flint.arb(10) ** -58)
        assert ball.overlaps(point)
        assert abs(ball - point).upper() < abs(point).lower() * flint.arb(2) ** -120


@pytest.mark.parametrize("delta", [1e-8, 1e-12])
def test_arb_raises_working_precision_near_one(delta: float) -> None:
    # Near s = 1 the zeta difference loses about log2(1/delta) bits (plus log2 of
    # zeta/H ~ 1/(delta ln m)). Evaluated naively at prec bits it falls short of prec;
    # the library must raise the working precision and still deliver prec bits.
    alpha = 1.0 + delta  # the float is taken exactly
    m, prec = 10**12, 128
    with flint.ctx.workprec(prec):
        a = flint.arb(alpha)
        naive = a.zeta() - a.zeta(flint.arb(m + 1))
        naive_bits = naive.rel_accuracy_bits()
    assert naive_bits < prec, "no cancellation to recover: the test lost its point"
    ball = harmonic_number_arb(m, alpha, prec=prec)
    assert ball.rel_accuracy_bits() >= prec
    with flint.ctx.workprec(300):
        assert ball.overlaps(naive)


def test_arb_zeta_at_one_is_nan_and_digamma_is_used() -> None:
    # arb(1).zeta() is NaN (the pole); alpha = 1 must go through digamma: H_m = psi(m+1)+gamma.
    assert not flint.arb(1).zeta().is_finite()
    ball = harmonic_number_arb(10**12, 1, prec=128)
    with mpmath.workdps(50):
        ref = mpmath.digamma(10**12 + 1) + mpmath.euler
    assert ball.rel_accuracy_bits() >= 128
    assert abs(float(ball.mid()) - float(ref)) < 1e-12 * float(ref)
    with flint.ctx.workprec(200):
        assert ball.overlaps(flint.arb(_arb_of(ref), abs(_arb_of(ref)) * flint.arb(10) ** -48))


def test_arb_tail_matches_mpmath_far_out() -> None:
    # harmonic_tail_arb over (1e12, 1e12 + 1000]: both back ends agree to 10^-25 relative.
    lo, hi = 10**12, 10**12 + 1000
    alpha = ALPHAS["1+2^-27"]
    ball = harmonic_tail_arb(lo, hi, alpha, prec=128)
    ref = harmonic_tail(lo, hi, alpha, dps=40)
    assert abs(float(ball.mid()) / float(ref) - 1) < 1e-15
    with flint.ctx.workprec(200):
        assert ball.overlaps(flint.arb(_arb_of(ref), abs(_arb_of(ref)) * flint.arb(10) ** -38))


def test_better_than_scipy_float64_at_delta_1e6() -> None:
    # scipy's float64 zeta(s) - zeta(s, m+1) loses up to ~4e-11 relative at
    # s = 1 + 1e-6. Our dps=30 result must be accurate to 1e-25 there, i.e. many orders
    # of magnitude better than float64 could ever be (guards against a float64 regression).
    from scipy.special import zeta as sp_zeta

    s = 1 + 1e-6
    ours_worst, scipy_worst = mpf(0), mpf(0)
    for m in (10**2, 10**3, 10**4, 10**6, 10**9, 10**12):
        lo, hi = euler_maclaurin_bracket(m, s, dps=45)
        with mpmath.workdps(50):
            ref = (lo + hi) / 2
        ours_worst = max(ours_worst, _rel_err(harmonic_number(m, s, dps=30), ref))
        scipy_worst = max(scipy_worst, _rel_err(mpf(sp_zeta(s) - sp_zeta(s, m + 1)), ref))
    assert ours_worst < mpf(10) ** -25
    assert ours_worst < scipy_worst * mpf(10) ** -6


def test_power_sum_shift_against_direct() -> None:
    # shift != 1 (KERPLE-log): sum_{d=lo}^{hi-1} (d + 1/r2)^-alpha, direct at 50 digits.
    shift, alpha = mpf(1) / 3, ALPHAS["1+2^-20"]
    for lo, hi in ((0, 10), (0, 500), (7, 300)):
        with mpmath.workdps(50):
            ref = mpmath.fsum((d + shift) ** (-alpha) for d in range(lo, hi))
        assert _rel_err(power_sum(lo, hi, alpha, shift=shift, dps=30), ref) < mpf(10) ** -25


def test_precision_is_an_argument() -> None:
    # The result carries the requested digits and the global context is untouched.
    before = mpmath.mp.prec
    h15 = harmonic_number(10**9, 1.5, dps=15)
    h40 = harmonic_number(10**9, 1.5, dps=40)
    assert before == mpmath.mp.prec
    with mpmath.workdps(45):
        assert abs(h15 - h40) / h40 < mpf(10) ** -13
        assert abs(h15 - h40) / h40 > 0  # the 15-digit value really is rounded


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: harmonic_number(-1, 2), "m"),
        (lambda: harmonic_number(2.5, 2), "m"),
        (lambda: harmonic_number(True, 2), "m"),
        (lambda: harmonic_number(10**19, 2), "m"),
        (lambda: harmonic_number(10, float("nan")), "alpha"),
        (lambda: harmonic_number(10, float("inf")), "alpha"),
        (lambda: harmonic_number(10, "x"), "alpha"),
        (lambda: harmonic_number(10, 2, dps=2), "dps"),
        (lambda: harmonic_tail(5, 3, 2), "hi"),
        (lambda: power_sum(0, 5, 2, shift=0), "shift"),
        (lambda: harmonic_number_arb(10, 2, prec=8), "prec"),
        (lambda: as_count(-3, "window"), "window"),
        (lambda: as_real(None, "rho"), "rho"),
        (lambda: power_sum_arb(0, 5, 2, shift=0), "shift"),
        (lambda: power_sum_arb(0, 5, 2, shift=flint.arb(-1)), "shift"),
        (lambda: power_sum_arb(5, 3, 2), "hi"),
        (lambda: power_sum_arb(0, 5, 2, prec=8), "prec"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


def test_imports_no_heavy_modules() -> None:
    # priors.harmonic is on the margin CLI's path: no torch, sympy, matplotlib, scipy.
    code = (
        "import sys, priors.harmonic, priors.brackets, priors.scale_invariant;"
        "print(sorted(m for m in ('torch', 'sympy', 'matplotlib', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# The shifted power sum in both back ends: the Arb ball must contain the mpmath value
# computed at 20 more digits (an independent evaluation: mpmath zeta/digamma or direct
# terms against Arb's), across the regime switches (64 direct terms, alpha = 1, near 1)
# and for the KERPLE-log shift 1/r2 given as an exact fraction.
@pytest.mark.parametrize(
    ("lo", "hi", "alpha", "shift"),
    [
        (0, 64, 1.5, 1),
        (3, 70, 1.5, Fraction(10, 3)),
        (0, 10**12, 1, Fraction(1, 3)),
        (7, 10**9, 1 + 2.0**-27, Fraction(5, 1)),
        (0, 10**15, 0.5, Fraction(8, 7)),
        (16, 4096, 2.0, 0.5),
    ],
)
def test_power_sum_arb_contains_the_mpmath_value(lo, hi, alpha, shift) -> None:
    ball = power_sum_arb(lo, hi, alpha, shift=shift, prec=100)
    with mpmath.workdps(50):
        q = shift
        if isinstance(shift, Fraction):
            q = mpmath.mpf(shift.numerator) / shift.denominator
        ref = power_sum(lo, hi, alpha, shift=q, dps=50)
    # 50 digits of the reference against 100 bits (30 digits) of the ball: the reference
    # error (1e-49 relative) is far inside the ball's radius or its rounding
    assert ball.rel_accuracy_bits() >= 100
    lo_b, hi_b = ball.lower(), ball.upper()
    with mpmath.workdps(50):
        below = mpmath.mpf(lo_b.mid().str(60, radius=False))
        above = mpmath.mpf(hi_b.mid().str(60, radius=False))
        slack = abs(ref) * mpmath.mpf(10) ** -45  # decimal printing of the ends
        assert below - slack <= ref <= above + slack


def test_power_sum_arb_to_infinity_is_hurwitz_zeta() -> None:
    # hi = None: the whole tail, against Arb's own zeta(alpha, lo + shift) (closed form)
    ball = power_sum_arb(5, None, 1.5, shift=Fraction(1, 2), prec=120)
    with flint.ctx.workprec(300):
        ref = flint.arb(1.5).zeta(flint.arb(11) / 2)
    assert ball.overlaps(ref) and ball.rel_accuracy_bits() >= 120
    # summing to infinity needs a summable exponent: the negative control
    with pytest.raises(ValueError, match="alpha must be > 1"):
        power_sum_arb(0, None, 1, prec=64)


def test_harmonic_tail_arb_is_power_sum_arb_at_shift_one() -> None:
    # the named wrapper and the primitive are one code path: identical balls
    for lo, hi, alpha in [(0, 10, 2.0), (5, 10**6, 1.1), (0, 10**12, 1)]:
        a = harmonic_tail_arb(lo, hi, alpha, prec=80)
        b = power_sum_arb(lo, hi, alpha, shift=1, prec=80)
        assert a.mid() == b.mid() and a.rad() == b.rad()


def test_guarded_computes_with_guard_digits_and_rounds_back() -> None:
    # the decorator against the open-coded idiom it replaces (workdps(dps + guard), +value)
    from priors.precision import guarded, rounded

    seen = []

    @guarded(7)
    def f(x, *, dps=20):
        seen.append(mpmath.mp.dps)
        return mpmath.zeta(x), (mpmath.mpf(1) / 3,)

    before = mpmath.mp.prec
    value, (third,) = f(mpmath.mpf(3), dps=25)
    assert seen == [32] and mpmath.mp.prec == before
    with mpmath.workdps(32):
        ref = mpmath.zeta(mpmath.mpf(3))
    with mpmath.workdps(25):
        assert value == +ref and third == +(mpmath.mpf(1) / 3)
    # a value rounded to 25 digits is not the 32-digit one: the rounding really happened
    with mpmath.workdps(32):
        assert value != ref
    assert f(mpmath.mpf(3))[0] == rounded(ref, 20)  # the default dps
    assert rounded({"a": ref, "b": None}, 10)["b"] is None

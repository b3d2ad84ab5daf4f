"""Numbers that used to be silently wrong (issue 14), each against an independent method.

The reference values are direct mpmath summations at high precision (term by term, no
closed form, no tail formula), never the code under test.
"""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest

from priors.encodings import KerplePower, Sandwich
from priors.encodings import kerple as kerple_mod
from priors.window import mass_report


def _direct_kerple_power(r1: float, r2: float, window: int, length: int, dps: int = 60):
    """``(M, D)`` by summing ``exp(-r1 d^r2)`` term by term at ``dps`` digits."""
    with mpmath.workdps(dps):
        a, b = mpmath.mpf(r1), mpmath.mpf(r2)
        terms = [mpmath.exp(-a * mpmath.power(d, b)) for d in range(length)]
        s_w, tail = mpmath.fsum(terms[:window]), mpmath.fsum(terms[window:])
        return s_w / (s_w + tail), tail / (s_w + tail)


def _agree(value, ref, digits: int) -> bool:
    # `digits` correct significant digits: relative error below 10^(1-digits) (one unit
    # in the last printed place, the rounding of the printed value included)
    with mpmath.workdps(80):
        return abs(mpmath.mpf(value) - ref) <= abs(ref) * mpmath.mpf(10) ** (1 - digits)


@pytest.mark.parametrize(
    "r1,r2",
    [
        (1.0, 1e-300),  # the gamma arguments coincide at working precision (was 42x off)
        (1.0, 1e-30),  # was ~24 digits right
        (1.0, 1e-40),
        (1.0, 1e-50),
        (1e-10, 2.0),  # r2 > 1: was the integral-test midpoint, ~5 digits right
        (1e-6, 1.5),
        (1e-3, 0.5),
    ],
)
def test_kerple_power_masses_right_to_the_claimed_digits(r1, r2):
    # length 4096 > the 1024 terms summed directly: the tail formula is exercised
    window, length = 512, 4096
    ref_m, ref_d = _direct_kerple_power(r1, r2, window, length)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the stated bound is met
        r = mass_report(KerplePower(r1, r2), window, length, dps=30)
    assert r.digits == 30
    assert _agree(r.window_mass, ref_m, r.digits)
    assert _agree(r.distant_mass, ref_d, r.digits)


def test_kerple_power_issue_case_at_the_issue_length():
    # the issue's own command: --r1 1 --r2 1e-300 --window 512 --length 65536. With
    # r2 = 1e-300, d^r2 = 1 + r2 ln d + ... equals 1 to 300 digits, so the terms are
    # exp(-1) for d >= 1 and 1 at d = 0, to far more than 40 digits
    with mpmath.workdps(60):
        e = mpmath.exp(-1)
        ref = (1 + 511 * e) / (1 + 65535 * e)
    r = mass_report(KerplePower(1.0, 1e-300), 512, 65536, dps=30)
    assert r.digits == 30 and _agree(r.window_mass, ref, 30)


def test_kerple_power_lowers_its_digits_when_the_bound_is_not_met(monkeypatch):
    # negative control: starve the Euler-Maclaurin sum of correction terms, so that the
    # rigorous remainder bound cannot reach 10^-30; the report must then claim fewer
    # digits, and the digits it claims must still be right
    monkeypatch.setattr(kerple_mod, "_EM_MAX_TERMS", 2)
    with pytest.warns(RuntimeWarning, match="error bound"):
        r = mass_report(KerplePower(1e-6, 0.9), 8, 4096, dps=30)
    assert 1 <= r.digits < 30
    ref_m, _ = _direct_kerple_power(1e-6, 0.9, 8, 4096)
    assert _agree(r.window_mass, ref_m, r.digits)


def _direct_sandwich(enc: Sandwich, window: int, length: int, dps: int = 40):
    """``(M, D)`` from the float64 biases, each ``e^{b(d)}`` in mpmath (no underflow)."""
    b = enc.bias(np.arange(float(length)))
    with mpmath.workdps(dps):
        w = [mpmath.exp(mpmath.mpf(x)) for x in b.tolist()]
        s_w, tail = mpmath.fsum(w[:window]), mpmath.fsum(w[window:])
        return s_w / (s_w + tail), tail / (s_w + tail)


@pytest.mark.parametrize("kwargs", [{"scale": 20.0}, {"dim": 2000}, {"dim": 8}])
def test_sandwich_tiny_masses_do_not_underflow(kwargs):
    enc = Sandwich(**kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # also: no raw numpy under/overflow warning
        warnings.filterwarnings("ignore", message=".*float64-backed.*")
        r = mass_report(enc, 512, 8192, dps=30)
    ref_m, ref_d = _direct_sandwich(enc, 512, 8192)
    assert ref_d > 0 and r.distant_mass > 0
    assert 1 <= r.digits <= 13
    assert _agree(r.window_mass, ref_m, r.digits) and _agree(r.distant_mass, ref_d, r.digits)


def test_sandwich_digits_follow_the_float64_bias_error():
    # the stated digits shrink with the length (the phase d w_i carries d eps of error)
    short = Sandwich(dim=8).mass_digits(4, 100, 30)
    long = Sandwich(dim=128).mass_digits(512, 2**22, 30)
    assert short == 13 and 1 <= long < short


@pytest.mark.filterwarnings("ignore:.*float64-backed")
@pytest.mark.parametrize(
    "kwargs,length,needle",
    [
        ({"scale": 1e308}, 64, "no correct digit"),
        ({"dim": 10**6}, 65536, "cosines"),
    ],
)
def test_sandwich_refuses_what_it_cannot_compute(kwargs, length, needle):
    with pytest.raises(ValueError, match=needle):
        mass_report(Sandwich(**kwargs), 8, length)

"""Numbers that used to be silently wrong on hostile input, each against an independent method.

The reference values are direct mpmath summations at high precision (term by term, no
closed form, no tail formula), never the code under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings

import mpmath
import numpy as np
import pytest

from priors.encodings import KerplePower, Sandwich
from priors.encodings import kerple as kerple_mod
from priors.encodings.base import FewerDigitsWarning
from priors.mass import mass_report


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
    with pytest.warns(FewerDigitsWarning, match="error bound"):
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


# ------------------------------------------------------------- the mass command (items 6-9)


def _mass(capsys, *argv):
    from priors.mass.__main__ import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_integers_are_parsed_exactly(capsys):
    # float() would turn them into 1e18 and ...992; NoPE's M = W/l is the exact reference
    code, out, _ = _mass(capsys, "--encoding", "nope", "--window", "9007199254740993",
                         "--length", "999999999999999999", "--json")
    j = json.loads(out)
    assert code == 0 and j["window"] == 9007199254740993 and j["length"] == 999999999999999999
    with mpmath.workdps(60):
        ref = mpmath.mpf(9007199254740993) / 999999999999999999
        assert abs(mpmath.mpf(j["window_mass"]) - ref) <= ref * mpmath.mpf(10) ** -29


def test_user_bias_without_tail_has_an_unknown_limit(capsys, tmp_path):
    f = tmp_path / "u.txt"
    f.write_text("0 -1 -2 -3 -4 -5 -6 -7")
    code, out, _ = _mass(capsys, "--encoding", "user", "--values", str(f), "--window", "2",
                         "--length", "8", "--json")
    assert code == 0 and json.loads(out)["limit_window_mass"] is None
    code, out, _ = _mass(capsys, "--encoding", "user", "--values", str(f), "--window", "2",
                         "--length", "8")
    assert "limit M_inf(W) = unknown" in out and "0.0" not in out.split("limit")[1].split("\n")[0]
    from priors.encodings import UserBias

    with pytest.raises(ValueError, match="unknown"):
        UserBias([0.0, -1.0]).limit_window_mass(1)


@pytest.mark.parametrize("alpha", ["2", "1e6"])
def test_series_brackets_are_clipped_to_the_unit_interval(capsys, alpha):
    code, out, _ = _mass(capsys, "--encoding", "log-distance", "--alpha", alpha, "--window",
                         "512", "--length", "65536", "--json")
    assert code == 0
    j = json.loads(out)
    with mpmath.workdps(60):
        m = mpmath.mpf(j["window_mass"])
        for lo, hi in j["series_bracket"].values():
            assert 0 <= mpmath.mpf(lo) <= m <= mpmath.mpf(hi) <= 1


def test_decimals_float64_cannot_hold_are_refused(capsys):
    from fractions import Fraction

    from priors.encodings import LogDistance

    code, out, err = _mass(capsys, "--encoding", "log-distance", "--alpha",
                           "1.0000000000000000001", "--window", "4", "--length", "8")
    assert code == 2 and out == "" and "--alpha" in err and "float64" in err
    # the API: a value that float() would round is refused, never classified as 1.0
    with pytest.raises(ValueError, match="alpha"):
        LogDistance(Fraction(10**19 + 1, 10**19))
    with mpmath.workdps(30), pytest.raises(ValueError, match="alpha"):
        LogDistance(mpmath.mpf("1.0000000000000000001"))
    # a decimal that is the float it prints as is fine
    assert LogDistance(1.1).classify().label == "summable"


@pytest.mark.parametrize(
    "value,needle",
    [("1e400", "overflows"), ("1e-400", "underflows"), ("-inf", "finite"),
     ("9" * 400, "chars)")],
)
def test_messages_name_the_problem(capsys, value, needle):
    code, out, err = _mass(capsys, "--encoding", "log-distance", "--alpha", value,
                           "--window", "4", "--length", "8")
    assert code == 2 and out == "" and needle in err and len(err) < 300
    assert "expected one argument" not in err  # -inf is a value, not an option


def test_dps_is_capped_like_the_margin_command(capsys):
    code, _, err = _mass(capsys, "--encoding", "nope", "--window", "4", "--length", "8",
                         "--dps", "2000")
    assert code == 2 and "--dps" in err and "1000" in err


def test_help_shows_the_defaults_used_silently(capsys):
    from priors.encodings import ALiBi, CausalOTPrior, KerpleLog, LogDistance

    with pytest.raises(SystemExit):
        from priors.mass.__main__ import _parser

        _parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for default in (LogDistance.alpha, ALiBi.slope, KerpleLog.r1, CausalOTPrior.rho):
        assert f"default {default!r}" in out


def test_t5_far_max_distance_and_large_last_entry():
    from priors.encodings import T5Buckets, t5_bucket

    table = [-0.01 * k for k in range(31)] + [710.0]
    enc = T5Buckets(table=table, max_distance=10**18)
    sat = enc.saturation  # closed form; an arange to 1e18 would need exabytes
    assert int(t5_bucket(sat, 32, 10**18)) == 31 and int(t5_bucket(sat - 1, 32, 10**18)) < 31
    assert enc.classify().label == "dilutes"  # e^710 overflows a float: no OverflowError
    # against enumeration where it is possible
    small = T5Buckets(table=table, max_distance=1000)
    buckets = t5_bucket(np.arange(1001), 32, 1000)
    assert small.saturation == int(np.argmax(buckets == 31))


def test_huge_exponent_certify_finishes_and_agrees():
    # alpha = 1e308: S_W = 1 + 2^-alpha + ... = 1 to far beyond 30 digits, so D equals
    # sum_{k>W} k^-alpha = (W+1)^-alpha (1 + ((W+1)/(W+2))^alpha + ...) = (W+1)^-alpha
    from priors.certified import certified_masses
    from priors.encodings import LogDistance

    enc = LogDistance(1e308)
    with mpmath.workdps(40):
        ref = mpmath.power(mpmath.mpf(5), -mpmath.mpf(1e308))
    d = enc.distant_mass(4, 10**18)
    with mpmath.workdps(40):
        assert abs(d - ref) <= ref * mpmath.mpf(10) ** -28
    ball = certified_masses(enc, 4, 10**18).distant_mass
    assert ball.is_finite() and ball.rel_accuracy_bits() > 100


def test_kerple_log_huge_r1_limit_is_a_mass():
    from priors.encodings import KerpleLog

    # r1 = r2 = 1e308: the d = 0 term is 1 and every other (1 + r2 d)^-r1 is below
    # 10^-(1e308 * 308): M_inf(4) = 1 to any printed precision
    lim = KerpleLog(1e308, 1e308).limit_window_mass(4)
    assert lim == 1


def _log10_of_decimal(text: str) -> mpmath.mpf:
    """``log10`` of a positive decimal string whose exponent may exceed any float's."""
    mantissa, _, exponent = text.lower().partition("e")
    return mpmath.log10(mpmath.mpf(mantissa)) + int(exponent or 0)


@pytest.mark.parametrize("r", ["1e308", "1e50", "1e20"])
def test_kerple_log_huge_parameters_certify_in_seconds(r):
    """``--r1 = --r2 = r`` with ``--certify``: minutes before (Arb's zeta at such exponents
    does not finish); now the first terms plus a tail bound, the shift 1/r2 evaluated at
    the precision the exponent needs. The enclosure of ``D`` must hold the reference
    ``D = (1 + 512 r2)^-r1 (1 + ...)``: the ratio of the next term to the first is
    ``((1 + 513 r2) / (1 + 512 r2))^-r1 < 10^-(r1/600)``, so ``log10 D`` is
    ``-r1 log10(1 + 512 r2)`` to far more than the 25 digits compared (mpmath, 80 digits
    plus the digits of the exponent)."""
    argv = [sys.executable, "-m", "priors.mass", "--encoding", "kerple-log", "--r1", r,
            "--r2", r, "--window", "512", "--length", "65536", "--certify", "--json"]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-500:]
    assert time.perf_counter() - start < 60
    lo, hi = json.loads(proc.stdout)["distant_mass_ball"]
    with mpmath.workdps(80 + len(r)):
        r1 = r2 = mpmath.mpf(float(r))  # the float64 the command reads, exactly
        ref = -r1 * mpmath.log10(1 + 512 * r2)
        tol = abs(ref) * mpmath.mpf(10) ** -25
        assert _log10_of_decimal(lo) - tol <= ref <= _log10_of_decimal(hi) + tol
        assert _log10_of_decimal(hi) - _log10_of_decimal(lo) <= tol


@pytest.mark.parametrize("r2", [1e-308, 1e-310, 5e-324])
def test_kerple_log_huge_exponent_with_a_huge_shift(r2):
    """``r1 = 1e308`` with ``1/r2`` as large or larger: the terms fall by ``e^-(r1 r2)`` each
    (``e^-1``, ``e^-0.01``, ``e^-2e-16``), so neither a few terms nor a Hurwitz zeta did it
    (a hang): the first terms plus a tail bound, or Euler–Maclaurin. Reference: the terms
    ``(1 + r2 d)^-r1 = exp(-r1 log1p(r2 d))`` summed one by one by mpmath at 60 digits."""
    from priors.certified import certified_masses
    from priors.encodings import KerpleLog

    enc = KerpleLog(1e308, r2)
    start = time.perf_counter()
    d = enc.distant_mass(8, 4096)
    assert time.perf_counter() - start < 30
    with mpmath.workdps(60):
        r1, r2_ = mpmath.mpf(1e308), mpmath.mpf(r2)
        terms = [mpmath.exp(-r1 * mpmath.log1p(r2_ * k)) for k in range(4096)]
        ref = mpmath.fsum(terms[8:]) / mpmath.fsum(terms)
        assert abs(d - ref) <= ref * mpmath.mpf(10) ** -25
    if r2 == 1e-308:  # Arb: the first terms plus a tail bound, certified
        ball = certified_masses(enc, 8, 4096).distant_mass
        with mpmath.workdps(60):
            assert mpmath.mpf(ball.lower().str(40, radius=False)) <= ref * (1 + 1e-30)
            assert ref * (1 - 1e-30) <= mpmath.mpf(ball.upper().str(40, radius=False))
    else:  # no certified enclosure is reachable there: refused in one line, not a hang
        start = time.perf_counter()
        with pytest.raises(ValueError, match="no certified enclosure"):
            certified_masses(enc, 8, 4096)
        assert time.perf_counter() - start < 30

"""One numeric guard set at every door: the library's arguments and both commands' options.

The same value must be read, capped and worded the same way through the API
(``ValueError`` naming the argument), ``python -m priors.mass`` and ``python -m
priors.margin`` (one line, exit 2). Each refusal is checked at all the doors that take the
value; where a value is accepted, the answer is compared with an independent computation.
"""

from __future__ import annotations

import time
from decimal import Decimal

import mpmath
import pytest
from support import with_option

from priors.certified import certified_masses
from priors.encodings import ALiBi, KerpleLog, LogDistance, T5Buckets, UserBias
from priors.harmonic import power_sum
from priors.margin import MarginInputError, format_result, select_margin
from priors.margin.__main__ import main as margin_main
from priors.mass import mass_report
from priors.mass.__main__ import main as mass_main
from priors.validation import (
    DPS_MAX,
    MAX_LENGTH,
    MAX_SCORE_BOUND,
    count_from_text,
    decimal_from_text,
    real_from_text,
)

MASS = ["--encoding", "alibi", "--slope", "0.5", "--window", "8", "--length", "64"]
MARGIN = ["--window", "8", "--lmax", "64", "--tol", "0.1"]


def refused(main, argv, capsys) -> str:
    """The one line a command prints for bad input (exit 2, nothing on stdout)."""
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    return err


# ------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize("text", ["5_12", "\u0665\u0661\u0662", "0x10", "1e", "2**3", "\u00bd",
                                  "\uff15\uff11\uff12", "1,5", "", " "])
def test_only_ascii_decimals_are_numbers(text, capsys):
    """``Decimal`` alone reads ``5_12`` and Arabic-Indic or full-width digits as 512: the
    shared reader refuses them, and so does every door (here --window of both commands)."""
    with pytest.raises(ValueError, match="not a number"):
        decimal_from_text(text)
    with pytest.raises(ValueError, match="must be an integer"):
        count_from_text(text)
    for main, argv in ((mass_main, MASS), (margin_main, MARGIN)):
        assert "must be an integer" in refused(main, with_option(argv, "--window", text), capsys)
    with pytest.raises(MarginInputError, match="must be an integer"):
        select_margin(text, 64, 0.1)


def test_integers_and_decimals_are_read_exactly():
    # references: Python's own exact integer and Fraction arithmetic
    assert count_from_text("999999999999999999") == 999999999999999999
    assert count_from_text(" 1e15 ") == 10**15 and count_from_text("+7") == 7
    assert real_from_text("0.1") == 0.1 and real_from_text("-2.5E-3") == -0.0025
    assert decimal_from_text("0.1000000000000000000001") == Decimal("0.1000000000000000000001")


@pytest.mark.parametrize("option", ["--tol", "--score-bound"])
def test_a_decimal_float64_would_round_is_refused_by_margin_as_by_mass(option, capsys):
    value = "0.100000000000000001"  # float64 reads 0.1
    assert float(value) == 0.1 and Decimal(value) != Decimal(repr(0.1))  # the premise
    err = refused(margin_main, with_option(MARGIN, option, value), capsys)
    assert "is not a float64" in err and option in err
    mass_err = refused(mass_main, with_option(MASS, "--slope", value), capsys)
    assert err.split(": ", 3)[-1] == mass_err.split(": ", 3)[-1]  # the same words
    with pytest.raises(MarginInputError, match="is not a float64"):
        select_margin(8, 64, value)


@pytest.mark.parametrize("option", ["--window", "--lmax", "--lmin"])
def test_overflowing_integer_says_the_cap_not_inf(option, capsys):
    err = refused(margin_main, with_option(MARGIN, option, "1e400"), capsys)
    assert "must be <= 1e18" in err and "inf" not in err
    if option == "--window":
        mass_err = refused(mass_main, with_option(MASS, "--window", "1e400"), capsys)
        assert "must be <= 1e18" in mass_err


def test_overflowing_real_has_one_wording(capsys):
    expected = "'1e400' overflows the float range (|x| <= 1.8e308)"
    assert expected in refused(margin_main, with_option(MARGIN, "--tol", "1e400"), capsys)
    assert expected in refused(mass_main, with_option(MASS, "--slope", "1e400"), capsys)
    assert expected in refused(mass_main, with_option(MASS, "--score-bound", "1e400"), capsys)


# --------------------------------------------------------------------------------- caps


def test_dps_cap_is_the_same_through_api_and_commands(capsys):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"dps must be <= {DPS_MAX}, got 1000000"):
        LogDistance(1.1).window_mass(512, 65536, dps=10**6)
    assert time.perf_counter() - start < 1.0  # refused at once, not after 26 s of work
    for call in (lambda: power_sum(0, 10, 2.0, dps=DPS_MAX + 1),
                 lambda: mass_report(ALiBi(0.5), 8, 64, dps=DPS_MAX + 1),
                 lambda: ALiBi(0.5).limit_window_mass(8, dps=DPS_MAX + 1)):
        with pytest.raises(ValueError, match=f"dps must be <= {DPS_MAX}"):
            call()
    with pytest.raises(MarginInputError, match=f"must be <= {DPS_MAX}"):
        select_margin(8, 64, 0.1, dps=DPS_MAX + 1)
    for main, argv in ((mass_main, MASS), (margin_main, MARGIN)):
        assert f"must be <= {DPS_MAX}" in refused(main, with_option(argv, "--dps", "1e6"), capsys)


def test_the_largest_dps_runs_with_guard_digits_above_the_cap():
    """dps = DPS_MAX is accepted, and the library's own guard digits on top of it
    (``dps + 8`` inside ``mass_report``) pass its internals; the value agrees with a
    1100-digit direct sum of ``e^{-m d}``."""
    r = mass_report(KerpleLog(1.5, 0.5), 8, 64, dps=DPS_MAX)
    with mpmath.workdps(1100):
        terms = [(1 + mpmath.mpf("0.5") * d) ** mpmath.mpf("-1.5") for d in range(64)]
        exact = mpmath.fsum(terms[:8]) / mpmath.fsum(terms)
        # both carry at least DPS_MAX - 2 correct digits
        assert abs(r.window_mass - exact) <= mpmath.mpf(10) ** (2 - DPS_MAX) * exact


def test_score_bound_cap_is_the_same_everywhere(capsys):
    over = MAX_SCORE_BOUND + 1
    for call in (lambda: mass_report(ALiBi(0.5), 8, 64, score_bound=over),
                 lambda: certified_masses(ALiBi(0.5), 8, 64, score_bound=over)):
        with pytest.raises(ValueError, match="score_bound must be <= 1e6"):
            call()
    with pytest.raises(MarginInputError, match="must be <= 1e6"):
        select_margin(8, 64, 0.1, score_bound=over)
    for main, argv in ((mass_main, MASS), (margin_main, MARGIN)):
        err = refused(main, with_option(argv, "--score-bound", "1000001"), capsys)
        assert "--score-bound: must be <= 1e6, got '1000001'" in err
    # the cap itself is accepted at both commands' doors
    assert mass_main(with_option(MASS, "--score-bound", "1e6")) == 0
    capsys.readouterr()


def test_lengths_and_distances_are_capped_at_1e18():
    with pytest.raises(ValueError, match="max_distance must be <= 1e18"):
        T5Buckets(table=[0.0] * 32, max_distance=10**19)
    with pytest.raises(ValueError, match="length must be <= 1e18"):
        mass_report(ALiBi(0.5), 8, 10**19)
    assert T5Buckets(table=[0.0] * 32, max_distance=MAX_LENGTH).max_distance == MAX_LENGTH


@pytest.mark.parametrize("make", [
    lambda: T5Buckets(table=[[0.0] * 16] * 2),
    lambda: T5Buckets(num_buckets=2, table=[[0.0], [0.0]]),
    lambda: UserBias([[0.0, -1.0]]),
])
def test_nested_tables_are_refused_not_flattened(make):
    with pytest.raises(ValueError, match="must be one-dimensional"):
        make()


# ----------------------------------------------------------------------- margin printing


def test_margin_prints_tol_as_given(capsys):
    assert margin_main(["--window", "8", "--lmax", "64", "--tol", "0.999999999999"]) == 0
    out = capsys.readouterr().out
    assert "tol = 0.999999999999," in out and "tol = 1," not in out


def test_supremum_upper_end_never_exceeds_tol():
    """docs/theory.md §7: the supremum's proven upper end is ``<= tol``, as a float, as the
    decimal tol, and as printed; and it is an upper bound of ``G(1 + delta_hi)``, computed
    here independently with mpmath Hurwitz zeta at 40 digits."""
    w, l0, l1, tol, b = 35, 15057, 361560972, "0.572854", "0.5"
    r = select_margin(w, l1, tol, lmin=l0, score_bound=b)
    upper = r.sup_value[1]
    assert upper <= r.growth_tol and Decimal(upper) <= Decimal(tol)
    printed = format_result(r).split("of G over alpha >= 1 + delta_hi: in [")[1].split("]")[0]
    assert Decimal(printed.split(", ")[1]) <= Decimal(tol)
    with mpmath.workdps(40):
        a = 1 + mpmath.mpf(r.delta)
        s_w = mpmath.fsum(mpmath.mpf(k) ** -a for k in range(1, w + 1))
        head = mpmath.zeta(a, w + 1)
        t1, t0 = head - mpmath.zeta(a, l1 + 1), head - mpmath.zeta(a, l0 + 1)
        e = mpmath.exp(2 * mpmath.mpf(b))
        g = e * t1 / (s_w + e * t1) - t0 / (e * s_w + t0)
        assert g <= upper <= mpmath.mpf(tol)


def test_integers_beyond_the_float_range_are_refused_by_name():
    """``float(10**400)`` raises ``OverflowError``; every door says which argument
    overflows instead."""
    big = 10**400
    for call, name in ((lambda: ALiBi(big), "slope"), (lambda: KerpleLog(big, 1.0), "r1"),
                       (lambda: mass_report(ALiBi(0.5), 8, 64, score_bound=big), "score_bound"),
                       (lambda: select_margin(8, 64, big), "growth_tol")):
        with pytest.raises(ValueError, match=f"{name}.*overflows the float range"):
            call()


def test_subnormal_tol_is_refused(capsys):
    """Below the normal float range the largest float under tol can sit far below tol (for
    ``5e-324`` about 1% below), a band the search cannot decide in: refused."""
    with pytest.raises(MarginInputError, match="a normal float64"):
        select_margin(8, 64, "5e-324")
    assert "a normal float64" in refused(margin_main, with_option(MARGIN, "--tol", "1e-310"),
                                         capsys)
    assert select_margin(8, 64, 2.2250738585072014e-308).delta > 0  # the smallest normal

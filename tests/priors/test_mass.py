"""Window/distant masses with content-score brackets (docs/theory.md §5) and monotonicity.

The brackets are checked against an actual causal softmax row computed in numpy float64
with the extreme scores that attain them (-B on the window, +B outside, and the reverse)
and with random scores in [-B, B].
"""

from __future__ import annotations

import json
import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from priors.encodings import (
    ALiBi,
    CausalOTPrior,
    KerpleLog,
    KerplePower,
    LogDistance,
    NoPE,
    Sandwich,
    T5Buckets,
    UserBias,
)
from priors.encodings.base import FewerDigitsWarning
from priors.mass import MassReport, mass_report, masses

ENCODINGS = [
    NoPE(),
    ALiBi(0.2),
    LogDistance(1.1),
    LogDistance(0.8),
    KerpleLog(1.3, 0.5),
    KerplePower(0.5, 0.7),
    T5Buckets(table=[-0.1 * k for k in range(32)]),
    CausalOTPrior(0.4),
    UserBias(-0.7 * np.log1p(np.arange(300.0))),
]


def softmax_window_mass(bias: np.ndarray, scores: np.ndarray, window: int) -> float:
    """Window mass of one causal softmax row; entry d is the key at distance d."""
    logits = bias + scores
    p = np.exp(logits - logits.max())
    p /= p.sum()
    return float(p[:window].sum())


@pytest.mark.parametrize("enc", ENCODINGS, ids=lambda e: e.name)
@pytest.mark.parametrize("b", [0.0, 0.5, 2.0])
def test_brackets_are_attained_by_extreme_scores(enc, b):
    w, n = 7, 300
    bias = enc.bias(np.arange(n, dtype=float), length=n if enc.length_dependent else None)
    (m_lo, m_hi), (d_lo, d_hi), m, d = masses(enc, w, n, score_bound=b)
    low_scores = np.where(np.arange(n) < w, -b, b)  # -B on the window, +B elsewhere
    got_lo = softmax_window_mass(bias, low_scores, w)
    got_hi = softmax_window_mass(bias, -low_scores, w)
    # float64 softmax of 300 terms: relative rounding below ~1e-13; the exact brackets are
    # mpf at dps 30, so 1e-12 relative is a safe, still discriminating tolerance
    assert got_lo == pytest.approx(float(m_lo), rel=1e-12)
    assert got_hi == pytest.approx(float(m_hi), rel=1e-12)
    assert (1 - got_hi) == pytest.approx(float(d_lo), rel=1e-10, abs=1e-15)
    assert (1 - got_lo) == pytest.approx(float(d_hi), rel=1e-10, abs=1e-15)
    # random bounded scores stay inside; at B = 0 everything collapses onto the exact value
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = rng.uniform(-b, b, n)
        mm = softmax_window_mass(bias, s, w)
        assert float(m_lo) * (1 - 1e-12) <= mm <= float(m_hi) * (1 + 1e-12)
    if b == 0:
        assert m_lo == m_hi == m and d_lo == d_hi == d
        with mpmath.workdps(40):
            assert abs(m + d - 1) < mpmath.mpf(10) ** -29


def test_series_bracket_for_log_distance_contains_exact_and_is_nested():
    r = mass_report(LogDistance(1.05), 512, 10**12)
    ilo, ihi = r.series_bracket["integral"]
    elo, ehi = r.series_bracket["euler_maclaurin"]
    assert ilo <= elo <= r.window_mass <= ehi <= ihi
    assert ehi - elo < (ihi - ilo) * mpmath.mpf(10) ** -10
    assert mass_report(ALiBi(0.5), 4, 8).series_bracket is None


def test_near_one_law_theory_section6():
    # delta -> 0: M_n(W) -> H_W / H_n = 0.24165 at W = 512, n = 1e12 (docs/theory.md §6)
    got = LogDistance(1 + 1e-12).window_mass(512, 10**12)
    with mpmath.workdps(40):
        ref = (mpmath.digamma(513) + mpmath.euler) / (mpmath.digamma(10**12 + 1) + mpmath.euler)
        # delta ln n ~ 3e-11: the finite-delta mass differs from the limit at that order
        assert abs(got - ref) < 1e-9
        assert abs(ref - mpmath.mpf("0.24165")) < 5e-6


def test_report_dict_has_the_documented_keys():
    r = mass_report(LogDistance(1.1), 512, 65536, score_bound=0.5, dps=20)
    assert isinstance(r, MassReport)
    j = r.to_dict()
    assert json.loads(r.to_json()) == j  # to_json is the JSON text of to_dict
    for key in ["encoding", "params", "window", "length", "window_mass", "distant_mass",
                "window_mass_bracket", "limit_window_mass", "class", "dps"]:
        assert key in j
    assert j["encoding"] == "log-distance" and j["params"] == {"alpha": 1.1}
    assert j["class"] == "summable" and j["dps"] == 20
    # the strings carry the digits: parse back at high precision and compare
    with mpmath.workdps(40):
        assert abs(mpmath.mpf(j["window_mass"]) - r.window_mass) < mpmath.mpf(10) ** -19
    assert mass_report(KerplePower(), 4, 100).summation is not None


def test_mass_report_bad_input():
    with pytest.raises(ValueError, match="score_bound"):
        mass_report(NoPE(), 4, 8, score_bound=-1.0)
    with pytest.raises(ValueError, match="score_bound"):
        mass_report(NoPE(), 4, 8, score_bound=float("inf"))
    with pytest.raises(ValueError, match="enc"):
        mass_report("alibi", 4, 8)  # type: ignore[arg-type]


# --- monotonicity (docs/theory.md §7 relies on it): property tests ------------------------------
# Values at dps 30 carry ~1e-30 relative error each; a tolerance of 1e-25 relative is far
# above that rounding yet far below any real decrease the tests could catch (a genuine
# violation would be of the size of one prior term, >= 1e-20 for these parameters).
TOL = mpmath.mpf(10) ** -25


@settings(max_examples=40, deadline=None)
@given(
    alpha=st.floats(0.5, 3.0),
    w=st.integers(1, 2000),
    n=st.integers(1, 10**9),
    k=st.integers(1, 10**6),
)
def test_distant_mass_nondecreasing_in_length(alpha, w, n, k):
    n = max(n, w)
    enc = LogDistance(alpha)
    d1, d2 = enc.distant_mass(w, n), enc.distant_mass(w, n + k)
    with mpmath.workdps(40):  # compare at more than the values' precision
        assert d2 >= d1 * (1 - TOL)


@settings(max_examples=40, deadline=None)
@given(
    alpha=st.floats(1.0, 3.0),
    step=st.floats(1e-6, 0.5),
    w=st.integers(1, 2000),
    n=st.integers(1, 10**12),
)
def test_distant_mass_nonincreasing_in_alpha(alpha, step, w, n):
    n = max(n, w)
    d1 = LogDistance(alpha).distant_mass(w, n)
    d2 = LogDistance(alpha + step).distant_mass(w, n)
    with mpmath.workdps(40):
        assert d2 <= d1 * (1 + TOL)


@settings(max_examples=25, deadline=None)
@given(slope=st.floats(1e-3, 5.0), w=st.integers(1, 500), n=st.integers(1, 10**6))
def test_alibi_and_causal_ot_distant_mass_nondecreasing(slope, w, n):
    n = max(n, w)
    for enc in (ALiBi(slope), CausalOTPrior(min(slope / 5.0, 0.99))):
        d1, d2 = enc.distant_mass(w, n), enc.distant_mass(w, n + 1)
        with mpmath.workdps(40):
            assert d2 >= d1 * (1 - TOL)


def test_dilution_rates_match_classification():
    # NoPE: M = W/l exactly; causal-OT: M ~ (W/l)^(1-rho)/Gamma(2-rho); summable: M -> M_inf
    m = NoPE().window_mass(8, 8 * 10**9)
    with mpmath.workdps(30):
        assert m == mpmath.mpf(1) / 10**9
    m = CausalOTPrior(0.5).window_mass(8, 8 * 10**12)
    with mpmath.workdps(30):
        assert abs(m * mpmath.gamma(1.5) / mpmath.mpf(10) ** -6 - 1) < 1e-5
    lim = ALiBi(0.01).limit_window_mass(100)
    assert abs(ALiBi(0.01).window_mass(100, 10**6) - lim) < mpmath.mpf(10) ** -29
    assert math.isclose(float(LogDistance(0.5).window_mass(1, 10**12)), 1 / float(
        LogDistance(0.5).partial_sum(10**12)), rel_tol=1e-15)


def test_json_series_brackets_are_rounded_outward():
    # The certified brackets are printed as decimals rounded down (lower) and up (upper): the
    # printed strings must still enclose the exact value, computed here at 60 digits.
    enc = LogDistance(1.1)
    js = mass_report(enc, 512, 65536).to_dict()
    with mpmath.workdps(60):
        exact = enc.window_mass(512, 65536, dps=60)
        for name, (lo, hi) in js["series_bracket"].items():
            assert mpmath.mpf(lo) <= exact <= mpmath.mpf(hi), (name, lo, hi, exact)


# --- what a report asks of the encoding: declared hooks, not names --------------------


class _RenamedLogDistance(LogDistance):
    """The log-distance prior under another name: the report must still find its series
    brackets (they come from ``Encoding.series_brackets``, not from the name)."""

    name = "renamed-log-distance"


def _log_distance_mass(alpha: float, w: int, n: int) -> mpmath.mpf:
    # independent of power_sum and the brackets: H_m^(a) = zeta(a) - zeta(a, m + 1) at 60
    # digits (a > 1, no cancellation at these sizes)
    with mpmath.workdps(60):
        a = mpmath.mpf(alpha)
        return (mpmath.zeta(a) - mpmath.zeta(a, w + 1)) / (mpmath.zeta(a) - mpmath.zeta(a, n + 1))


@pytest.mark.parametrize("enc", [LogDistance(1.3), _RenamedLogDistance(1.3)],
                         ids=["log-distance", "renamed"])
def test_series_brackets_come_from_the_encoding(enc):
    r = mass_report(enc, 16, 4096, dps=25)
    assert r.series_bracket == enc.series_brackets(16, 4096, dps=25)
    assert set(r.series_bracket) == {"integral", "euler_maclaurin"}
    exact = _log_distance_mass(1.3, 16, 4096)
    with mpmath.workdps(60):
        for name, (lo, hi) in r.series_bracket.items():
            assert 0 <= lo <= exact <= hi <= 1, name


@pytest.mark.parametrize("enc", [NoPE(), ALiBi(0.2), LogDistance(0.0), KerpleLog(1.3, 0.5)],
                         ids=lambda e: f"{e.name}{e.params}")
def test_no_series_brackets_without_the_hook(enc):
    assert enc.series_brackets(4, 64, dps=20) is None
    assert mass_report(enc, 4, 64, dps=20).series_bracket is None


@pytest.mark.parametrize("enc", ENCODINGS, ids=lambda e: e.name)
def test_summation_note_comes_from_the_encoding(enc):
    assert mass_report(enc, 4, 64, dps=20).summation == enc.summation_note()


def test_summation_note_declared_default_and_overrides():
    assert NoPE().summation_note() is None and LogDistance(1.1).summation_note() is None
    assert "Euler-Maclaurin" in KerplePower().summation_note()
    assert "given values" in UserBias([0.0, -1.0, -2.0]).summation_note()


@pytest.mark.parametrize("call", [mass_report, masses], ids=["mass_report", "masses"])
def test_fewer_digits_warning_has_its_class_and_names_the_caller(call):
    enc = Sandwich(dim=16)
    assert enc.max_digits is not None
    with pytest.warns(FewerDigitsWarning, match="float64-backed") as record:
        call(enc, 4, 64, dps=enc.max_digits + 5)
    assert issubclass(FewerDigitsWarning, RuntimeWarning)  # old filters still apply
    assert [w.filename for w in record] == [__file__]  # the caller's line, not the library's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call(enc, 4, 64, dps=enc.max_digits)  # as many digits as it carries: no warning



def test_mass_report_validates_the_window_once(monkeypatch):
    """The public door validates; nothing behind it validates the window again (counted on
    every module that holds ``check_window_length``), and the numbers are those of the
    public methods, which validate for themselves."""
    import priors.brackets
    import priors.encodings.base
    import priors.mass
    import priors.validation

    calls = []
    real = priors.validation.check_window_length

    def counted(window, length):
        calls.append((window, length))
        return real(window, length)

    for module in (priors.mass, priors.encodings.base, priors.brackets, priors.validation):
        monkeypatch.setattr(module, "check_window_length", counted)
    enc = LogDistance(alpha=1.1)
    r = mass_report(enc, 64, 4096, score_bound=0.5, dps=25)
    assert calls == [(64, 4096)]
    assert r.window_mass == enc.window_mass(64, 4096, dps=25)
    assert r.series_bracket == enc.series_brackets(64, 4096, dps=25)
    assert r.limit_window_mass == enc.limit_window_mass(64, dps=25)
    assert len(calls) == 3  # the public methods each validated once (control)

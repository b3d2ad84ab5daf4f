"""Certified (Arb ball) masses: ``priors.certified`` and ``python -m priors.mass --certify``.

References are computed by other methods: the mpmath library path at dps 60 (Hurwitz
zeta / expm1 / exact sums in mpmath, ``enc.window_mass(..., dps=60)``) and, for
``l <= 2e4``, direct mpmath summation at dps 50 of the weights written out below. A
reference is a point with its own small error (1e-57 relative for the dps-60 library
value, 1e-47 for the dps-50 sums of positive terms), so the check is that the ball,
widened by exactly that error, contains the reference point. The balls are at most
2^-120 ~ 1e-36 relative wide, so the check still pins them far below their radius when
the radius is that large, and to 1e-47 when a precision doubling made them tighter.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from functools import cache

import flint
import mpmath
import numpy as np
import pytest

import priors.certified as certified_mod
from priors.certified import (
    CERTIFIED_ENCODINGS,
    certified_masses,
    outward_decimal,
    prec_for_digits,
)
from priors.encodings import (
    ALiBi,
    KerpleLog,
    KerplePower,
    LogDistance,
    NoPE,
    T5Buckets,
)
from priors.mass.__main__ import main

_T5_TABLE = tuple(float(x) for x in np.random.default_rng(7).normal(-1.0, 1.5, size=32))

ENCODINGS = {
    "nope": NoPE(),
    "alibi-0.5": ALiBi(0.5),
    "alibi-1e-3": ALiBi(1e-3),
    "alibi-2": ALiBi(2.0),
    "logd-0": LogDistance(0.0),
    "logd-0.5": LogDistance(0.5),
    "logd-1": LogDistance(1.0),  # alpha = 1 exactly: digamma
    "logd-1+1e-8": LogDistance(1.0 + 1e-8),  # cancellation in zeta differences
    "logd-1.1": LogDistance(1.1),
    "logd-2": LogDistance(2.0),
    "kerple-1-1": KerpleLog(1.0, 1.0),  # r1 = 1 exactly: digamma
    "kerple-1+1e-8-0.3": KerpleLog(1.0 + 1e-8, 0.3),  # inexact shift 1/r2, near 1
    "kerple-1.5-0.7": KerpleLog(1.5, 0.7),
    "kerple-0.5-3": KerpleLog(0.5, 3.0),
    "t5": T5Buckets(table=_T5_TABLE),
    "t5-small": T5Buckets(num_buckets=8, max_distance=20, table=_T5_TABLE[:8]),
}
#: Longest direct summation per encoding (kept short where the test budget needs it).
_DIRECT_LONG = {"nope", "alibi-1e-3", "logd-1+1e-8", "kerple-1+1e-8-0.3", "t5"}
PAIRS = [
    (1, 1),
    (1, 2),
    (7, 70),
    (64, 3000),
    (512, 20000),
    (512, 65536),
    (512, 10**15),
    (10**12, 10**12 + 1000),  # the tail is a difference of two huge zeta values
    (10**15, 10**15),
]
CASES = [
    pytest.param(key, w, n, id=f"{key}-W{w}-l{n}")
    for key in ENCODINGS
    for w, n in PAIRS
    if (w, n) != (512, 20000) or key in _DIRECT_LONG
]
PREC = 128


# ----------------------------------------------------------------------------- references


def _bucket(d: int, nb: int, md: int) -> int:
    """Unidirectional T5 bucket, written from the definition (float64 logarithm)."""
    exact = nb // 2
    if d < exact:
        return d
    return min(exact + math.floor(math.log(max(d, 1) / exact) / math.log(md / exact)
                                  * (nb - exact)), nb - 1)


def _weight(enc, d: int) -> mpmath.mpf:
    """``e^{b(d)}`` at the current mpmath precision, from the bias formulas."""
    if isinstance(enc, NoPE):
        return mpmath.mpf(1)
    if isinstance(enc, ALiBi):
        return mpmath.exp(-mpmath.mpf(enc.slope) * d)
    if isinstance(enc, LogDistance):
        return mpmath.power(1 + d, -mpmath.mpf(enc.alpha))
    if isinstance(enc, KerpleLog):
        return mpmath.power(1 + mpmath.mpf(enc.r2) * d, -mpmath.mpf(enc.r1))
    if isinstance(enc, T5Buckets):
        return mpmath.exp(mpmath.mpf(enc.table[_bucket(d, enc.num_buckets, enc.max_distance)]))
    raise AssertionError(enc)


@cache
def _weights(key: str, n: int) -> tuple[mpmath.mpf, ...]:
    with mpmath.workdps(50):
        return tuple(_weight(ENCODINGS[key], d) for d in range(n))


def _direct(key: str, w: int, n: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    """``(M, D)`` by direct summation at dps 50 (fsum: exactly rounded)."""
    ws = _weights(key, 20000 if key in _DIRECT_LONG else 3000)
    with mpmath.workdps(50):
        s_w = mpmath.fsum(ws[:w])
        tail = mpmath.fsum(ws[w:n])
        return s_w / (s_w + tail), tail / (s_w + tail)


def _encloses(ball: flint.arb, ref: mpmath.mpf, rel: float) -> bool:
    """``ball`` widened by ``rel |ref|`` (the reference's own error) contains ``ref``."""
    point = flint.arb(ref)  # exact: an mpf is a dyadic number
    with flint.ctx.workprec(4000):
        return bool((ball + flint.arb(0, abs(point) * rel)).contains(point))


def _rel_radius_ok(ball: flint.arb, bits: int) -> bool:
    """``rad <= 2^-bits |mid|``, decided exactly (mid, rad and the power of 2 are dyadic)."""
    with flint.ctx.workprec(4000):
        return bool(ball.rad() <= abs(ball.mid()) * flint.arb(2) ** -bits)


# ----------------------------------------------------------------------------- library


@pytest.mark.parametrize("key,w,n", CASES)
def test_balls_contain_independent_references(key, w, n):
    enc = ENCODINGS[key]
    c = certified_masses(enc, w, n, prec=PREC)
    refs = {
        "window_mass": enc.window_mass(w, n, dps=60),
        "distant_mass": enc.distant_mass(w, n, dps=60),
        "limit_window_mass": enc.limit_window_mass(w, dps=60),
    }
    for name, ref in refs.items():
        ball = getattr(c, name)
        assert _encloses(ball, ref, 1e-57), (name, ball.str(40, radius=True), ref)
        # tolerance of the contract: relative radius <= 2^-(prec-8)
        assert _rel_radius_ok(ball, PREC - 8), (name, ball.str(10, radius=True))
    # at B = 0 the content-score brackets are the exact masses
    for lo_hi, ref in ((c.window_mass_bracket, refs["window_mass"]),
                       (c.distant_mass_bracket, refs["distant_mass"])):
        assert all(_encloses(x, ref, 1e-57) for x in lo_hi)
    if n <= 20000:
        m, d = _direct(key, w, n)
        assert _encloses(c.window_mass, m, 1e-47) and _encloses(c.distant_mass, d, 1e-47)


def test_higher_and_lower_precision_near_alpha_one():
    enc = LogDistance(1.0 + 1e-8)
    ref = enc.distant_mass(512, 10**15, dps=110)
    for prec in (40, 300):
        c = certified_masses(enc, 512, 10**15, prec=prec)
        assert _encloses(c.distant_mass, ref, 1e-107)
        assert _rel_radius_ok(c.distant_mass, prec - 8)
        assert c.prec == prec


def test_limits_against_closed_forms():
    # M_inf(W) = 1 - e^{-m W} (ALiBi) and 1/zeta(2) = 6/pi^2 at W = 1, in Arb at 400 bits
    with flint.ctx.workprec(400):
        alibi = 1 - (-flint.arb(0.25) * 8).exp()
        six_over_pi2 = 6 / flint.arb.pi() ** 2
    assert certified_masses(ALiBi(0.25), 8, 100).limit_window_mass.contains(alibi)
    assert certified_masses(LogDistance(2.0), 1, 10).limit_window_mass.contains(six_over_pi2)
    # diluting priors: exactly 0
    for enc in (NoPE(), LogDistance(1.0), KerpleLog(0.9, 2.0), T5Buckets(table=_T5_TABLE)):
        assert certified_masses(enc, 4, 8).limit_window_mass.is_zero()


def _softmax_window(bias: np.ndarray, scores: np.ndarray, w: int) -> tuple[float, float]:
    logits = bias + scores
    p = np.exp(logits - logits.max())
    p /= p.sum()
    return float(p[:w].sum()), float(p[w:].sum())


@pytest.mark.parametrize(
    "enc,w,n",
    [(LogDistance(1.1), 4, 12), (ALiBi(0.5), 3, 9), (T5Buckets(table=_T5_TABLE), 5, 40),
     (KerpleLog(1.0, 0.3), 2, 16)],
)
@pytest.mark.parametrize("bound", [0.5, 15.0])
def test_content_score_balls_contain_softmax_masses(enc, w, n, bound):
    c = certified_masses(enc, w, n, score_bound=bound)
    bias = enc.bias(np.arange(n, dtype=np.float64))
    m_lo, m_hi = (float(x.mid()) for x in c.window_mass_bracket)
    d_lo, d_hi = (float(x.mid()) for x in c.distant_mass_bracket)
    in_window = np.arange(n) < w
    # extreme scores attain the brackets (docs/theory.md §5): equal up to float64 softmax
    # rounding over n <= 40 terms (a few ulps; 64 ulps allowed)
    tol = 64 * np.finfo(np.float64).eps
    m, d = _softmax_window(bias, np.where(in_window, -bound, bound), w)
    assert abs(m - m_lo) <= tol * m_lo and abs(d - d_hi) <= tol * d_hi
    m, d = _softmax_window(bias, np.where(in_window, bound, -bound), w)
    assert abs(m - m_hi) <= tol * m_hi and abs(d - d_lo) <= tol * d_lo
    # random scores |s| <= B: inside the certified brackets (they are far from the extremes)
    rng = np.random.default_rng(0)
    with flint.ctx.workprec(200):
        lo_m, hi_m = c.window_mass_bracket[0].lower(), c.window_mass_bracket[1].upper()
        lo_d, hi_d = c.distant_mass_bracket[0].lower(), c.distant_mass_bracket[1].upper()
    for _ in range(200):
        m, d = _softmax_window(bias, rng.uniform(-bound, bound, n), w)
        assert lo_m <= flint.arb(m) <= hi_m and lo_d <= flint.arb(d) <= hi_d


@pytest.mark.parametrize(
    "ball",
    [flint.arb(2) / 3, -flint.arb(2) / 3, flint.arb(0), flint.arb(0.5), flint.arb(1, 0.25),
     flint.arb(10) ** -300 / 7, (-flint.arb(10) ** 6).exp(), flint.arb(123456789) / 1000],
    ids=lambda b: b.str(5, radius=True),
)
@pytest.mark.parametrize("digits", [1, 5, 30])
def test_outward_decimal_encloses(ball, digits):
    lo, hi = outward_decimal(ball, digits)
    with flint.ctx.workprec(8000):  # decimal strings parse to tight balls at 8000 bits
        a, b = flint.arb(lo), flint.arb(hi)
        assert a <= ball.lower() and ball.upper() <= b
        assert len(re.sub(r"[^0-9]", "", re.sub(r"e.*", "", lo)).lstrip("0")) <= digits
        if ball.is_exact() and ball.mid_rad_10exp(digits + 5)[0] != 0:
            # no wider than one unit in the last digit on each side
            unit = flint.arb(10) ** (math.floor(float(abs(ball).log_base(10).mid())) - digits + 1)
            assert b - a <= 2 * unit


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match=r"certified masses are available for nope.*kerple-power"):
        certified_masses(KerplePower(), 4, 8)
    with pytest.raises(ValueError, match="got str"):
        certified_masses("nope", 4, 8)
    for kwargs, needle in [({"window": 0, "length": 8}, "window"),
                           ({"window": 8, "length": 4}, "length"),
                           ({"window": 4, "length": 8, "prec": 8}, "prec"),
                           ({"window": 4, "length": 8, "score_bound": -1.0}, "score_bound"),
                           ({"window": 4, "length": 8, "score_bound": math.inf}, "score_bound")]:
        with pytest.raises(ValueError, match=needle):
            certified_masses(NoPE(), **kwargs)
    with pytest.raises(ValueError, match="finite"):
        outward_decimal(flint.arb("nan"), 5)
    with pytest.raises(ValueError, match="digits"):
        prec_for_digits(0)


def test_precision_loss_warns(monkeypatch):
    monkeypatch.setattr(certified_mod, "_accurate", lambda ball, prec: False)
    monkeypatch.setattr(certified_mod, "_MAX_DOUBLINGS", 1)
    enc = LogDistance(1.5)
    with pytest.warns(RuntimeWarning, match="bits of relative accuracy"):
        c = certified_masses(enc, 8, 1000)
    assert _encloses(c.window_mass, enc.window_mass(8, 1000, dps=60), 1e-57)


# ----------------------------------------------------------------------------- command line


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _mp(text: str) -> mpmath.mpf:
    return mpmath.mpf(text)


_LINE = re.compile(r"(M|D|M_inf\(W\)) = (\S+)\s+ball (\[(\S+) \+/- (\S+)\]|(\S+))")


def test_text_certify_prints_enclosing_balls(capsys):
    code, out, err = run(capsys, "--encoding", "log-distance", "--alpha", "1.00000001",
                         "--window", "512", "--length", "65536", "1e15", "--certify",
                         "--score-bound", "0.5")
    assert code == 0 and err == ""
    found = _LINE.findall(out)
    assert len(found) == 6  # M, D, M_inf for each of the two lengths
    with mpmath.workdps(60):
        for _name, value, _b, mid, rad, exact in found:
            if exact:
                assert _mp(value) == _mp(exact)
            else:
                assert _mp(mid) - _mp(rad) <= _mp(value) <= _mp(mid) + _mp(rad)
                # printed to 30 digits: the ball is as narrow as the printed value
                assert _mp(rad) <= mpmath.mpf(10) ** -29 * abs(_mp(value))
    assert "certified: Arb balls" in out and "bracket certified" in out
    code, out, _ = run(capsys, "--encoding", "nope", "--window", "4", "--length", "8")
    assert code == 0 and "ball" not in out and "certified" not in out


def _write_table(tmp_path) -> str:
    path = tmp_path / "t5.txt"
    path.write_text(" ".join(repr(t) for t in _T5_TABLE))
    return str(path)


@pytest.mark.parametrize(
    "enc_args",
    [["nope"], ["alibi", "--slope", "0.25"], ["log-distance", "--alpha", "1"],
     ["kerple-log", "--r1", "1.5", "--r2", "0.7"], ["t5", "--table", "T5"]],
    ids=lambda a: a[0],
)
def test_json_certify_balls_enclose_the_values(capsys, tmp_path, enc_args):
    enc_args = [_write_table(tmp_path) if a == "T5" else a for a in enc_args]
    code, out, err = run(capsys, "--encoding", *enc_args, "--window", "8", "--length", "8",
                         "100", "1e15", "--score-bound", "0.5", "--json", "--certify",
                         "--dps", "25")
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert len(rows) == 3
    with mpmath.workdps(60):
        for r in rows:
            assert r["certified"] is True and r["prec"] == prec_for_digits(25)
            for key in ("window_mass", "distant_mass", "limit_window_mass"):
                lo, hi = (_mp(x) for x in r[key + "_ball"])
                value = _mp(r[key])
                assert lo <= value <= hi, (key, r[key + "_ball"], r[key])
                # outward rounding to 25 digits: at most a few units in the last digit wide
                if value != 0:
                    unit = mpmath.mpf(10) ** (mpmath.floor(mpmath.log10(abs(value))) - 24)
                    assert hi - lo <= 3 * unit
            for key in ("window_mass", "distant_mass"):
                lo, hi = (_mp(x) for x in r[key + "_bracket_ball"])
                blo, bhi = (_mp(x) for x in r[key + "_bracket"])
                assert lo <= blo <= bhi <= hi


def test_json_without_certify_says_so(capsys):
    code, out, _ = run(capsys, "--encoding", "alibi", "--window", "4", "--length", "8",
                       "--json")
    j = json.loads(out)
    assert code == 0 and j["certified"] is False and "window_mass_ball" not in j


@pytest.mark.parametrize(
    "enc_args",
    [["kerple-power"], ["sandwich", "--dim", "8"], ["causal-ot", "--rho", "0.3"],
     ["user", "--values", "VALUES"]],
    ids=lambda a: a[0],
)
def test_certify_unsupported_encoding_exit_2(capsys, tmp_path, enc_args):
    values = tmp_path / "v.txt"
    values.write_text("0 -1 -2")
    enc_args = [str(values) if a == "VALUES" else a for a in enc_args]
    code, out, err = run(capsys, "--encoding", *enc_args, "--window", "2", "--length", "3",
                         "--certify")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "certified masses are available" in err
    assert enc_args[0] in err and "Traceback" not in err
    assert all(name in err for name in CERTIFIED_ENCODINGS)


def test_subprocess_certify_and_imports():
    res = subprocess.run(
        [sys.executable, "-m", "priors.mass", "--encoding", "kerple-log", "--r1", "1.00000001",
         "--r2", "0.3", "--window", "512", "--length", "1e15", "--certify", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr
    j = json.loads(res.stdout)
    ref = KerpleLog(1.00000001, 0.3).window_mass(512, 10**15, dps=40)
    with mpmath.workdps(60):
        lo, hi = (_mp(x) for x in j["window_mass_ball"])
        assert j["certified"] is True and lo <= ref <= hi
    bad = subprocess.run(
        [sys.executable, "-m", "priors.mass", "--encoding", "kerple-power", "--window", "4",
         "--length", "8", "--certify"],
        capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "certified masses are available" in bad.stderr
    probe = (
        "import sys, io, contextlib\n"
        "from priors.mass.__main__ import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--encoding', 'log-distance', '--alpha', '1.1', '--window', '8',\n"
        "                 '--length', '64', '1e15', '--certify', '--json']) == 0\n"
        "print(sorted(m for m in ('torch','sympy','matplotlib','scipy') if m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_certified_mode_is_asked_of_the_encoding_not_its_type():
    # a prior of its own (b(d) = ln 2 for d < 3, else 0) that states its Arb sums is
    # certified without certified.py knowing its type; the exact masses are rationals
    from dataclasses import dataclass

    from priors.encodings.base import Encoding

    @dataclass(frozen=True)
    class Step(Encoding):
        name = "step"
        arb_method = "exact integers"

        def _bias(self, d, length):
            return np.where(d < 3, math.log(2), 0.0)

        def _weight_sum(self, lo, hi, length, dps):
            return mpmath.mpf(2 * max(0, min(hi, 3) - lo) + max(0, hi - max(lo, 3)))

        def _weight_sum_arb(self, lo, hi):
            if hi is None:
                return None
            return flint.arb(2 * max(0, min(hi, 3) - lo) + max(0, hi - max(lo, 3)))

        def classify(self):  # pragma: no cover - not used here
            raise NotImplementedError

    c = certified_masses(Step(), 2, 10)
    # S_W = 2 + 2 = 4, T = 2 + 7 = 9: M = 4/13, D = 9/13 exactly (closed form by hand),
    # as balls far tighter (300 bits) than the certified ones (128 bits)
    with flint.ctx.workprec(300):
        assert c.window_mass.contains(flint.arb(4) / 13)
        assert c.distant_mass.contains(flint.arb(9) / 13)
    assert c.window_mass.rel_accuracy_bits() >= 128
    assert c.method.startswith("exact integers; working precision")
    # the negative control: the same prior without arb_method has no certified mode
    with pytest.raises(ValueError, match="certified masses are available for nope"):
        certified_masses(dataclass(frozen=True)(type("Plain", (Step,), {"arb_method": None}))(),
                         2, 10)

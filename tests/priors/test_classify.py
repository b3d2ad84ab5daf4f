"""The classification table of docs/theory.md §5, reproduced three ways.

Each row's label is checked (a) as the encoding states it, (b) by sympy's convergence test
on ``e^{b(d)}`` where a closed form exists, and (c) against the masses themselves: a
summable prior keeps ``D_l(W) <= 1 - S_W/S_inf`` at ``l = 1e15`` (and its limit is positive),
a diluting one has ``M_l(W)`` falling at the stated rate.
"""

from __future__ import annotations

import json
import subprocess
import sys

import mpmath
import numpy as np
import pytest

from priors.classify import Classification, classify_values
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
from priors.symbolic import classify

# (encoding, label, rate) -- docs/theory.md §5 table
TABLE = [
    (NoPE(), "dilutes", "W/l"),
    (ALiBi(0.3), "summable", "e^{-m l}"),
    (LogDistance(1.2), "summable", "l^-(alpha-1)"),
    (LogDistance(1.0), "dilutes", "ln W/ln l"),
    (LogDistance(0.6), "dilutes", "l^-(1-alpha)"),
    (KerpleLog(1.5, 0.2), "summable", "l^-(r1-1)"),
    (KerpleLog(0.9, 3.0), "dilutes", "l^-(1-r1)"),
    (KerplePower(0.5, 0.5), "summable", "exp(-r1 l^r2)"),
    (KerplePower(0.2, 2.0), "summable", "exp(-r1 l^r2)"),
    (T5Buckets(table=[-0.2 * k for k in range(32)]), "dilutes", "W/l"),
    (Sandwich(dim=16), "dilutes", "W/l"),
    (CausalOTPrior(0.5), "dilutes", "l^-(1-rho)"),
]
SYMBOLIC = (NoPE, ALiBi, LogDistance, KerpleLog, KerplePower)


@pytest.mark.parametrize("enc,label,rate", TABLE, ids=lambda x: getattr(x, "name", None))
def test_theory_table_labels(enc, label, rate):
    c = enc.classify()
    assert isinstance(c, Classification)
    assert (c.label, c.rate) == (label, rate)
    assert c.to_dict()["label"] == label
    assert json.loads(c.to_json()) == c.to_dict()


@pytest.mark.parametrize(
    "enc,label",
    [(e, lab) for e, lab, _ in TABLE if isinstance(e, SYMBOLIC)],
    ids=lambda x: getattr(x, "name", None),
)
def test_symbolic_classification_agrees(enc, label):
    c = classify(enc, symbolic=True)
    assert c.label == label and c.method == "symbolic"


@pytest.mark.parametrize(
    "enc,label",
    [(e, lab) for e, lab, _ in TABLE if not isinstance(e, Sandwich)],
    ids=lambda x: getattr(x, "name", None),
)
def test_labels_agree_with_the_masses(enc, label):
    w = 16
    n = 10**15
    if label == "summable":
        lim = enc.limit_window_mass(w)
        assert lim > 0
        # docs/theory.md §5 at B = 0: D_l(W) <= 1 - S_W / S_inf = D_inf for every l
        d_inf, d_n, d_6 = enc.limit_distant_mass(w), enc.distant_mass(w, n), enc.distant_mass(
            w, 10**6
        )
        with mpmath.workdps(40):  # values have 30 digits: compare above that precision
            assert d_n <= d_inf * (1 + mpmath.mpf(10) ** -25)
            assert d_6 <= d_inf * (1 + mpmath.mpf(10) ** -25)
    else:
        assert enc.limit_window_mass(w) == 0
        # diluting: the window mass keeps falling; at rate >= 1/ln l it is at least
        # 10x smaller at l = 1e15 than at l = 1e3 for these parameters... except ln-rates
        m3, m15 = enc.window_mass(w, 10**3), enc.window_mass(w, n)
        factor = 2 if "ln" in enc.classify().rate else 10
        assert m15 * factor < m3


def test_sandwich_dilutes_like_w_over_l():
    enc = Sandwich(dim=16)
    m1 = enc.window_mass(16, 10**4, dps=13)
    m2 = enc.window_mass(16, 10**6, dps=13)
    # bounded bias: M_l(W) = S_W / S_l with S_l = l * (mean of e^b over d < l); the ratio
    # of the two masses is 100 times the ratio of the two means, which the quasi-periodic
    # bias keeps within a factor 4 (a summable prior would give a ratio near 1)
    ratio = float(m1 / m2)
    assert 25 < ratio < 400


def test_numeric_evidence_for_user_biases():
    d = np.arange(4096.0)
    assert classify_values(-1.5 * np.log1p(d)).label == "summable"
    assert classify_values(-0.5 * np.log1p(d)).label == "dilutes"
    assert classify_values(-0.1 * d).label == "summable"  # exponential decay: p grows with d
    assert classify_values(np.zeros(4096)).label == "dilutes"
    near = classify_values(-1.02 * np.log1p(d))
    assert near.label == "inconclusive" and abs(near.evidence["tail_exponent"] - 1.02) < 1e-9
    # the margin is stated and controls the decision
    assert classify_values(-1.02 * np.log1p(d), margin=0.01).label == "summable"
    assert classify_values(np.zeros(8)).label == "inconclusive"  # too short to say
    # partial sums in the evidence are exact float64 sums of e^b
    ev = classify_values(np.zeros(64)).evidence
    assert ev["partial_sums"]["64"] == 64.0


def test_user_bias_class_follows_stated_tail_with_evidence():
    vals = -0.5 * np.log1p(np.arange(1000.0))
    c = UserBias(vals, tail="power", tail_exponent=2.0).classify()
    assert c.label == "summable" and c.method == "assumed-tail"
    assert c.evidence["numeric_label"] == "dilutes"  # the data alone disagree: reported
    assert UserBias(vals).classify().label == "dilutes"
    assert UserBias(vals, tail="constant").classify().label == "dilutes"


def test_bad_classification_inputs():
    with pytest.raises(ValueError, match="label"):
        Classification("maybe", "x")
    with pytest.raises(ValueError, match="values"):
        classify_values([])
    with pytest.raises(ValueError, match="margin"):
        classify_values([0.0] * 20, margin=1.5)


def test_classification_rates_hold_quantitatively():
    # log-distance alpha < 1: M_l ~ H_W / (l^(1-alpha)/(1-alpha)); check the exponent
    enc = LogDistance(0.6)
    m1, m2 = enc.window_mass(4, 10**10), enc.window_mass(4, 10**14)
    with mpmath.workdps(30):
        slope = mpmath.log(m1 / m2) / mpmath.log(10**4)
    assert abs(float(slope) - 0.4) < 1e-3


def test_classification_is_a_leaf_and_the_cycle_is_gone():
    # fresh interpreters: the encodings' base imports the value type at top level, the
    # value type imports no encoding, and neither pulls in sympy
    probes = {
        "import priors.encodings.base as b, priors.classify as c, sys\n"
        "assert b.Classification is c.Classification\n"
        "print('sympy' in sys.modules)": "False",
        "import priors.classify, sys\n"
        "print(sorted(m for m in sys.modules if m.startswith('priors')))":
        "['priors', 'priors.classify']",
    }
    for code, expected in probes.items():
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == expected


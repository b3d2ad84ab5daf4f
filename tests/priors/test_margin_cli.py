"""``python -m priors.margin``: output, tables, JSON, bad input, imports (docs/theory.md §7).

Values printed by the command are compared with ``select_margin`` (same code) only for
plumbing; the numbers themselves are checked against independent references in
``test_margin.py``. Here the bracket printed in JSON is re-checked by direct mpmath
summation, so a formatting bug that shifted digits would fail.
"""

from __future__ import annotations

import json
import subprocess
import sys

import mpmath
import pytest

from priors.margin.__main__ import main


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def direct_d(w: int, l1: int, delta: float) -> mpmath.mpf:
    """Exact distant mass ``D_L1(W) = sum_{W<k<=L1} k^-a / sum_{k<=L1} k^-a`` (40 digits)."""
    with mpmath.workdps(40):
        a = 1 + mpmath.mpf(delta)
        terms = [mpmath.mpf(k) ** -a for k in range(1, l1 + 1)]
        return mpmath.fsum(terms[w:]) / mpmath.fsum(terms)


def test_json_single(capsys):
    rc, out, err = run(["--window", "64", "--lmax", "4096", "--tol", "0.1", "--json"], capsys)
    assert rc == 0 and err == ""
    d = json.loads(out)
    for key in ("window", "lmin", "lmax", "tol", "score_bound", "delta", "alpha",
                "delta_bracket", "growth", "distant_mass_lmin", "distant_mass_lmax", "dps",
                "certified"):
        assert key in d, key
    assert (d["window"], d["lmin"], d["lmax"], d["tol"], d["dps"]) == (64, 64, 4096, 0.1, 30)
    lo, hi = d["delta_bracket"]
    assert d["delta"] == hi and d["certified"] is False
    # the JSON floats round-trip: the printed bracket is the proven one (40-digit sums
    # resolve G - tol far below G' (hi - lo) ~ 1e-13)
    assert direct_d(64, 4096, hi) <= mpmath.mpf("0.1") < direct_d(64, 4096, lo)


def test_text_report(capsys):
    rc, out, err = run(["--window", "64", "--lmax", "4096", "--tol", "0.1"], capsys)
    assert rc == 0 and err == ""
    # docs/theory.md §7 reference 0.4589094374, to its 10 printed digits
    assert "delta*     0.458909437" in out
    assert "alpha*     1.458909437" in out
    # the printed delta* is delta_hi rounded UP, so it is still safe: check it directly
    printed = next(line for line in out.splitlines() if "delta*  " in line).split()[1]
    assert direct_d(64, 4096, float(printed)) <= mpmath.mpf("0.1")
    for phrase in ("bracket", "KERPLE-log r1 = 1.458909437", "softplus(theta)",
                   "monotone (proved)", "bits (dps 30)", "L0 = 64 .. L1 = 4096"):
        assert phrase in out, phrase


def test_text_no_margin(capsys):
    rc, out, _ = run(["--window", "64", "--lmax", "4096", "--tol", "0.9"], capsys)
    assert rc == 0 and "no margin needed" in out


def test_certify_prints_balls(capsys):
    rc, out, _ = run(["--window", "8", "--lmin", "16", "--lmax", "512", "--tol", "0.2",
                      "--score-bound", "0.25", "--certify"], capsys)
    assert rc == 0
    assert "enclosures" in out and "+/-" in out and "cross-check mpmath" in out
    assert "certified sweep" in out  # L0 > W: the sup is established by the sweep


def test_table_cartesian_product(capsys):
    argv = ["--window", "16", "64", "--lmax", "4096", "1e6", "--tol", "0.1", "0.05"]
    rc, out, _ = run(argv, capsys)
    assert rc == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1 + 8 + 1  # header, 2 x 2 x 2 rows, footnote
    rc, out, _ = run([*argv, "--json"], capsys)
    rows = json.loads(out)
    assert [(r["window"], r["lmax"], r["tol"]) for r in rows] == [
        (w, l1, t) for w in (16, 64) for l1 in (4096, 10**6) for t in (0.1, 0.05)
    ]
    # delta* grows as tol shrinks and as lmax grows (exact statement on the proven brackets)
    by = {(r["window"], r["lmax"], r["tol"]): r["delta_bracket"] for r in rows}
    for w in (16, 64):
        for l1 in (4096, 10**6):
            assert by[w, l1, 0.05][1] > by[w, l1, 0.1][0]
        for t in (0.1, 0.05):
            assert by[w, 10**6, t][1] > by[w, 4096, t][0]


BAD = [
    (["--window", "0", "--lmax", "100", "--tol", "0.1"], "--window"),
    (["--window", "-3", "--lmax", "100", "--tol", "0.1"], "--window"),
    (["--window", "1.5", "--lmax", "100", "--tol", "0.1"], "--window"),
    (["--window", "abc", "--lmax", "100", "--tol", "0.1"], "--window"),
    (["--window", "100", "--lmax", "100", "--tol", "0.1"], "--lmax"),
    (["--window", "100", "--lmax", "50", "--tol", "0.1"], "--lmax"),
    (["--window", "10", "--lmax", "1e19", "--tol", "0.1"], "--lmax"),
    (["--window", "10", "--lmax", "1e17", "--tol", "0.1", "--dps", "16"], "--lmax"),
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--lmin", "5"], "--lmin"),
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--lmin", "100"], "--lmin"),
    (["--window", "10", "--lmax", "100", "--tol", "0"], "--tol"),
    (["--window", "10", "--lmax", "100", "--tol", "1"], "--tol"),
    (["--window", "10", "--lmax", "100", "--tol", "1.5"], "--tol"),
    (["--window", "10", "--lmax", "100", "--tol", "nan"], "--tol"),
    (["--window", "10", "--lmax", "100", "--tol", "x"], "--tol"),
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--score-bound", "-1"], "--score-bound"),
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--score-bound", "inf"], "--score-bound"),
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--score-bound", "nan"], "--score-bound"),
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--dps", "8"], "--dps"),
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--dps", "ten"], "--dps"),
    (["--window", "10", "--lmax", "100"], "--tol"),  # missing option (argparse)
    (["--window", "10", "--lmax", "100", "--tol", "0.1", "--bogus"], "--bogus"),
    # one bad setting in a table: nothing computed, nothing printed
    (["--window", "10", "200", "--lmax", "100", "--tol", "0.1"], "--lmax"),
]


@pytest.mark.parametrize(("argv", "flag"), BAD)
def test_bad_input(argv, flag, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.endswith("\n")
    assert flag in err and "Traceback" not in err


def test_help(capsys):
    rc, out, _ = run(["--help"], capsys)
    assert rc == 0 and "--score-bound" in out


def test_subprocess_bad_input():
    proc = subprocess.run(
        [sys.executable, "-m", "priors.margin", "--window", "0", "--lmax", "10", "--tol", "0.1"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--window" in lines[0]


def test_subprocess_imports_stay_light():
    """The real ``-m`` process must not import torch, sympy, matplotlib (nor scipy, numpy)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "priors.margin",
         "--window", "512", "--lmax", "1e15", "--tol", "0.1", "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "priors" in imported and "flint" in imported  # the parse itself works
    for heavy in ("torch", "sympy", "matplotlib", "scipy", "numpy"):
        assert heavy not in imported, heavy
    d = json.loads(proc.stdout)
    assert d["lmax"] == 10**15 and 0 < d["delta_bracket"][0] < d["delta"]


def test_missing_flint_one_line(monkeypatch, capsys):
    """Without python-flint: one clear line naming it, exit status 1, nothing on stdout."""
    import priors.margin

    monkeypatch.setitem(sys.modules, "priors.margin.search", None)  # import now fails
    monkeypatch.delattr(priors.margin, "search", raising=False)
    rc, out, err = run(["--window", "8", "--lmax", "64", "--tol", "0.1"], capsys)
    assert rc == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "python-flint" in err

"""``python -m priors.mass``: output checked against the library, bad input, imports."""

from __future__ import annotations

import json
import subprocess
import sys

import mpmath
import pytest

from priors.encodings import ALiBi, LogDistance, T5Buckets, UserBias
from priors.mass.__main__ import main

DOCUMENTED_KEYS = {"encoding", "params", "window", "length", "window_mass", "distant_mass",
              "window_mass_bracket", "limit_window_mass", "class", "dps"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_single_length_matches_library(capsys):
    code, out, err = run(capsys, "--encoding", "log-distance", "--alpha", "1.1", "--window",
                         "512", "--length", "65536", "--json")
    assert code == 0 and err == ""
    j = json.loads(out)
    assert DOCUMENTED_KEYS <= set(j)
    ref = LogDistance(1.1).window_mass(512, 65536, dps=30)
    with mpmath.workdps(40):
        assert abs(mpmath.mpf(j["window_mass"]) - ref) < mpmath.mpf(10) ** -29
    assert j["class"] == "summable" and j["dps"] == 30 and j["length"] == 65536


def test_json_several_lengths_is_a_list_with_brackets(capsys, tmp_path):
    code, out, _ = run(capsys, "--encoding", "alibi", "--slope", "0.25", "--window", "8",
                       "--length", "8", "100", "1e15", "--score-bound", "0.5", "--json",
                       "--dps", "20")
    assert code == 0
    rows = json.loads(out)
    assert [r["length"] for r in rows] == [8, 100, 10**15]
    ref = ALiBi(0.25).limit_window_mass(8, dps=20)
    with mpmath.workdps(40):  # parse the 20-digit strings without rounding them
        for r in rows:
            lo, hi = (mpmath.mpf(x) for x in r["window_mass_bracket"])
            assert lo <= mpmath.mpf(r["window_mass"]) <= hi
        # printed with 20 significant digits: equal to the library value to 1e-20 relative
        assert abs(mpmath.mpf(rows[2]["limit_window_mass"]) - ref) < mpmath.mpf(10) ** -20
    assert rows[0]["window_mass"] == "1.0"  # l = W: the window is everything


def test_text_output_and_files(capsys, tmp_path):
    table = tmp_path / "t5.txt"
    table.write_text(" ".join(str(-0.1 * k) for k in range(32)))
    code, out, _ = run(capsys, "--encoding", "t5", "--table", str(table), "--window", "16",
                       "--length", "4096")
    assert code == 0 and "class: dilutes" in out and "30 significant digits" in out
    ref = T5Buckets(table=[-0.1 * k for k in range(32)]).window_mass(16, 4096)
    assert mpmath.nstr(ref, 30, min_fixed=-4, max_fixed=6) in out
    values = tmp_path / "u.json"
    values.write_text(json.dumps([0.0, -1.0, -1.5, -2.0]))
    code, out, _ = run(capsys, "--encoding", "user", "--values", str(values), "--tail",
                       "constant", "--window", "2", "--length", "10", "--json")
    j = json.loads(out)
    assert code == 0 and j["class"] == "dilutes" and "assumed" in j["summation"]
    ref = UserBias([0.0, -1.0, -1.5, -2.0], tail="constant").window_mass(2, 10)
    with mpmath.workdps(40):
        assert abs(mpmath.mpf(j["window_mass"]) - ref) < mpmath.mpf(10) ** -29


def test_sandwich_reports_its_digits(capsys):
    code, out, err = run(capsys, "--encoding", "sandwich", "--dim", "8", "--window", "4",
                         "--length", "100", "--json")
    assert code == 0 and err == "" and json.loads(out)["digits"] == 13


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--encoding", "alibi", "--window", "0", "--length", "8"], "window"),
        (["--encoding", "alibi", "--window", "4", "--length", "0"], "length"),
        (["--encoding", "alibi", "--window", "8", "--length", "4"], "length"),
        (["--encoding", "alibi", "--window", "4", "--length", "8", "--slope", "-1"], "slope"),
        (["--encoding", "alibi", "--window", "4", "--length", "8", "--slope", "nan"], "slope"),
        (["--encoding", "causal-ot", "--window", "4", "--length", "8", "--rho", "1"], "rho"),
        (["--encoding", "kerple-log", "--window", "4", "--length", "8", "--r2", "0"], "r2"),
        (["--encoding", "kerple-power", "--window", "4", "--length", "8", "--r2", "3"], "r2"),
        (["--encoding", "log-distance", "--window", "4", "--length", "8", "--alpha", "inf"],
         "alpha"),
        (["--encoding", "alibi", "--window", "4", "--length", "8", "--alpha", "2"], "--alpha"),
        (["--encoding", "t5", "--window", "4", "--length", "8"], "--table"),
        (["--encoding", "t5", "--window", "4", "--length", "8", "--table", "/nonexistent"],
         "--table"),
        (["--encoding", "nope", "--window", "4", "--length", "8", "--score-bound", "-1"],
         "--score-bound"),
        (["--encoding", "nope", "--window", "4", "--length", "8", "--dps", "1"], "dps"),
        (["--encoding", "nope", "--window", "2.5", "--length", "8"], "window"),
        (["--encoding", "what", "--window", "4", "--length", "8"], "encoding"),
        (["--window", "4", "--length", "8"], "encoding"),
        (["--encoding", "sandwich", "--window", "4", "--length", "1e9"], "length"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_subprocess_bad_input_and_no_heavy_imports():
    bad = subprocess.run(
        [sys.executable, "-m", "priors.mass", "--encoding", "alibi", "--slope", "-1",
         "--window", "4", "--length", "8"],
        capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "slope" in bad.stderr
    probe = (
        "import sys, io, contextlib\n"
        "from priors.mass.__main__ import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    for e in (['log-distance','--alpha','1.1'], ['causal-ot','--rho','0.3'],\n"
        "              ['kerple-power'], ['alibi']):\n"
        "        assert main(['--encoding', *e, '--window', '8', '--length', '64', '1e15']) == 0\n"
        "print(sorted(m for m in ('torch','sympy','matplotlib','scipy') if m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_library_does_not_load_the_command_line():
    # the library (priors.mass) apart from the command (priors.mass.__main__, priors.cli,
    # argparse): importing it loads none of them, and it does not reach into the command
    probe = (
        "import sys\n"
        "import priors.mass\n"
        "print([m for m in ('priors.mass.__main__', 'priors.cli', 'argparse',\n"
        "                   'priors.mass.format') if m in sys.modules])\n"
        "print(hasattr(priors.mass, 'main'))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["[]", "False"]

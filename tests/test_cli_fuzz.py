"""Hostile input for every command line: the contract of ``priors.cli``.

Each example gives one option of one command a value from a grammar of hostile values
(huge, tiny, negative, nan, +-inf, long decimals, huge integers, empty, non-numeric,
binary and oversized files) and checks the contract:

* exit 0 with output that passes sanity checks (JSON parses; masses in ``[0, 1]``;
  ``M + D = 1`` to the stated digits), or
* exit 2 with exactly one line on stderr, no traceback, nothing on stdout, nothing
  written.

Commands run in-process (``main(argv)``) for speed, each example under a wall-clock
alarm (a hang fails the test instead of stalling the suite); a few subprocess cases
cover a closed pipe and a full disk. The heavy paths are never reached: proofs_check is
fuzzed with ``--list`` only, paper_figs and benchmarks on their refusal paths only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import mpmath
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import alarm, snapshot, with_option

ROOT = Path(__file__).resolve().parent.parent
#: Seconds one example may take before it counts as a hang.
ALARM_S = 20
FUZZ = settings(
    max_examples=100,
    deadline=None,  # the alarm below is the deadline (hypothesis' would flake on 2 cores)
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # CI-size and reproducible
)

_SPECIAL = [
    "", " ", "-", "--", "nan", "-nan", "inf", "-inf", "+inf", "Infinity", "1e400", "-1e400",
    "1e-400", "4.9e-324", "1e-320", "1.7976931348623157e308", "1e308", "-1e308", "0", "-0",
    "-1", "1", "2", "0.5", "0.999999999999", "1.0000000000000000001", "1.0000000000000002",
    "999999999999999999", "1000000000000000001", "9007199254740993", "1e18", "1e19",
    "9" * 400, "-" + "9" * 400, "0x10", "1_000", "1e", "e5", "1,5", "abc", "\u00e9", "\x00",
    "1000", "1001", "2.5e-7", "3", "7", "65536",
]


def hostile() -> st.SearchStrategy[str]:
    """Strings a user could type for a number, most of them wrong."""
    return st.one_of(
        st.sampled_from(_SPECIAL),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
        st.decimals(allow_nan=False, allow_infinity=False, places=25).map(str),
        st.text(max_size=6),
    )


def call(main, argv, capsys):
    with alarm(ALARM_S):
        code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code, out, err, argv):
    assert code == 2, (argv, code, out[-300:], err[-300:])
    assert out == "", (argv, out[-300:])
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and "error:" in lines[0], (argv, err[-500:])
    assert "Traceback" not in err, (argv, err)


def _digits_close(a: str, b: str, digits: int) -> bool:
    with mpmath.workdps(max(40, digits + 10)):
        total = mpmath.mpf(a) + mpmath.mpf(b)
        # both printed to `digits` significant digits: each off by half a unit in its
        # last place, the larger one (~1) dominates: 10^(1-digits) covers the two
        return abs(total - 1) <= mpmath.mpf(10) ** (1 - digits)


def check_mass_json(out: str, argv) -> None:
    doc = json.loads(out)
    for row in doc if isinstance(doc, list) else [doc]:
        digits = row["digits"]
        assert 1 <= digits <= row["dps"], argv
        with mpmath.workdps(60):
            m, d = mpmath.mpf(row["window_mass"]), mpmath.mpf(row["distant_mass"])
            assert 0 <= m <= 1 and 0 <= d <= 1, (argv, row)
            for lo, hi in (row["window_mass_bracket"], row["distant_mass_bracket"]):
                assert 0 <= mpmath.mpf(lo) <= mpmath.mpf(hi) <= 1, (argv, row)
            for lo, hi in (row["series_bracket"] or {}).values():
                assert 0 <= mpmath.mpf(lo) <= mpmath.mpf(hi) <= 1, (argv, row)
            if row["limit_window_mass"] is not None:
                assert 0 <= mpmath.mpf(row["limit_window_mass"]) <= 1, (argv, row)
        assert _digits_close(row["window_mass"], row["distant_mass"], digits), (argv, row)


# ------------------------------------------------------------------------ priors.mass

_T5_TABLE = " ".join(repr(-0.1 * k) for k in range(32))
_BASE = {
    "nope": [],
    "alibi": ["--slope", "0.5"],
    "log-distance": ["--alpha", "1.1"],
    "kerple-log": ["--r1", "1.5", "--r2", "0.5"],
    "kerple-power": ["--r1", "1", "--r2", "0.5"],
    "t5": ["--table", "{table}"],
    "sandwich": ["--dim", "8"],
    "causal-ot": ["--rho", "0.5"],
    "user": ["--values", "{values}", "--tail", "power", "--tail-exponent", "2"],
}
_OPTIONS = {
    "nope": [],
    "alibi": ["--slope"],
    "log-distance": ["--alpha"],
    "kerple-log": ["--r1", "--r2"],
    "kerple-power": ["--r1", "--r2"],
    "t5": ["--num-buckets", "--max-distance"],
    "sandwich": ["--dim", "--base", "--scale", "--compress"],
    "causal-ot": ["--rho"],
    "user": ["--tail-exponent", "--tail"],
}
_COMMON = ["--window", "--length", "--score-bound", "--dps"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mass")
    (d / "t5.txt").write_text(_T5_TABLE)
    (d / "u.txt").write_text("0 -1 -1.5 -2 -2.5 -3")
    return d


@settings(FUZZ, max_examples=300)
@given(
    enc=st.sampled_from(sorted(_BASE)),
    which=st.integers(min_value=0, max_value=10),
    value=hostile(),
    as_json=st.booleans(),
)
def test_mass_options(enc, which, value, as_json, files, capsys):
    from priors.mass.__main__ import main

    options = _COMMON + _OPTIONS[enc]
    option = options[which % len(options)]
    base = [a.format(table=files / "t5.txt", values=files / "u.txt") for a in _BASE[enc]]
    argv = ["--encoding", enc, "--window", "4", "--length", "64", *base]
    argv = with_option(argv, option, value)
    if as_json:
        argv.append("--json")
    code, out, err = call(main, argv, capsys)
    if code == 0:
        assert "Traceback" not in err and "Warning" not in err, (argv, err)
        if as_json:
            check_mass_json(out, argv)
        else:
            assert "window mass" in out, argv
    else:
        assert_refused(code, out, err, argv)


_CONTENTS = [
    b"", b"\x00\xff\xfe" * 10, b"[]", b"[1, 2", b'["a"]', b"[[1]]", b"{}", b"nan " * 32,
    b"1e400 " * 32, b"[" * 5000, b"1,,2", ("0 " * 31 + "710").encode(), b"-1 " * 32,
    b"[true, 1]", b"[1e999]", ("9" * 400 + " ") .encode() * 32,
]


@FUZZ
@given(content=st.one_of(st.sampled_from(_CONTENTS), st.binary(max_size=64)),
       enc=st.sampled_from(["t5", "user"]))
def test_mass_files(content, enc, tmp_path, capsys):
    from priors.mass.__main__ import main

    path = tmp_path / "f.bin"
    path.write_bytes(content)
    opt = "--table" if enc == "t5" else "--values"
    argv = ["--encoding", enc, opt, str(path), "--window", "2", "--length", "64", "--json"]
    if enc == "user":
        argv += ["--tail", "constant"]
    code, out, err = call(main, argv, capsys)
    if code == 0:
        check_mass_json(out, argv)
    else:
        assert_refused(code, out, err, argv)


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "/nonexistent/x", "/", "fifo",
                                  "dangling", ""])
def test_mass_special_files(path, capsys, tmp_path):
    """Input files that are not regular files are refused before they are opened (a FIFO
    with no writer would block the read forever; the alarm catches that)."""
    from priors.mass.__main__ import main

    if path == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)
    elif path == "dangling":
        path = str(tmp_path / "link")
        os.symlink(tmp_path / "gone", path)
    elif path.startswith("/dev/") and not os.path.exists(path):
        pytest.skip(f"no {path} here")
    before = snapshot(path) if path else None
    for option, encoding in (("--table", "t5"), ("--values", "user")):
        argv = ["--encoding", encoding, option, path, "--window", "2", "--length", "8"]
        assert_refused(*call(main, argv, capsys), argv)
    assert (snapshot(path) if path else None) == before


# ---------------------------------------------------------------------- priors.margin


@FUZZ
@given(option=st.sampled_from(["--window", "--lmax", "--tol", "--lmin", "--score-bound",
                               "--dps"]), value=hostile())
def test_margin_options(option, value, capsys):
    from priors.margin.__main__ import main

    argv = with_option(["--window", "8", "--lmax", "4096", "--tol", "0.1", "--json"], option, value)
    code, out, err = call(main, argv, capsys)
    if code == 0:
        doc = json.loads(out)
        assert doc["delta"] >= 0, argv
    else:
        assert_refused(code, out, err, argv)


# -------------------------------------------------------------------- priors.diagnose

BLOOM = {"model_type": "bloom", "n_layer": 2, "n_head": 4, "hidden_size": 16}


@FUZZ
@given(option=st.sampled_from(["--window", "--length", "--score-bound", "--tol", "--lmin",
                               "--dps", "--digits"]), value=hostile())
def test_diagnose_options(option, value, tmp_path, capsys):
    from priors.diagnose.__main__ import main

    (tmp_path / "config.json").write_text(json.dumps(BLOOM))
    argv = [str(tmp_path), "--window", "8", "--length", "64", "4096", "--json"]
    if option == "--lmin":
        argv += ["--tol", "0.1"]
    argv = with_option(argv, option, value)
    before = sorted(os.listdir(tmp_path))
    code, out, err = call(main, argv, capsys)
    if code == 0:
        json.loads(out)
    else:
        assert_refused(code, out, err, argv)
    assert sorted(os.listdir(tmp_path)) == before  # nothing written


@FUZZ
@given(content=st.one_of(st.sampled_from([b"", b"{", b"[]", b"\xff\xfe", b"null",
                                          json.dumps({**BLOOM, "n_head": "x"}).encode(),
                                          json.dumps({**BLOOM, "n_head": 10**400}).encode(),
                                          json.dumps({**BLOOM, "n_head": -1}).encode(),
                                          b"[" * 100000]),
                         st.binary(max_size=32)))
def test_diagnose_configs(content, tmp_path, capsys):
    from priors.diagnose.__main__ import main

    (tmp_path / "config.json").write_bytes(content)
    argv = [str(tmp_path), "--json"]
    code, out, err = call(main, argv, capsys)
    if code == 0:
        json.loads(out)
    else:
        assert_refused(code, out, err, argv)


# ------------------------------------------------------------------------ proofs_check


@FUZZ
@given(option=st.sampled_from(["--only", "--dtype"]), value=hostile(),
       as_json=st.booleans())
def test_proofs_check_list_options(option, value, as_json, capsys):
    from proofs_check.report import main

    argv = ["--list", option, value] + (["--json"] if as_json else [])
    code, out, err = call(main, argv, capsys)
    if code == 0:
        if as_json:
            assert isinstance(json.loads(out), list)
        else:
            assert out.startswith("check"), argv
    else:
        assert_refused(code, out, err, argv)


# ---------------------------------------------------------- paper_figs and benchmarks


def _read_only_dir(tmp: Path) -> str | None:
    """A directory no file can be created in, or None where none can be made (as root a
    mode-0500 directory is still writable, so that case is left out there)."""
    ro = tmp / "read_only"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o500)
    try:
        (ro / "probe").write_text("")
    except PermissionError:
        return str(ro)
    (ro / "probe").unlink()
    return None


def _bad_outs(tmp: Path, *, directory: bool) -> st.SearchStrategy[str]:
    """``--out`` values that must be refused: paper_figs wants a directory (so a file is
    wrong), benchmarks a ``.json`` file (so a directory is wrong); both refuse devices,
    FIFOs, dangling links and links to FIFOs, empty paths, missing or read-only
    directories."""
    a_file = tmp / "a_file"
    a_file.write_text("x")
    fifo = tmp / "pipe.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    dangling = tmp / "dangling.json"
    if not os.path.lexists(dangling):
        dangling.symlink_to(tmp / "gone" / "x.json")
    to_fifo = tmp / "to_pipe.json"
    if not os.path.lexists(to_fifo):
        to_fifo.symlink_to(fifo)
    wrong_kind = str(a_file) if directory else str(tmp)
    special = ["", " ", wrong_kind, "/proc/1/none/x", "/sys/none", str(fifo), str(dangling),
               str(to_fifo)]
    if not directory:  # paper_figs creates a missing directory under a writable one
        special.append(str(tmp / "missing" / "x.json"))
    special += [d for d in ("/dev/null", "/dev/full", "/dev/zero") if os.path.exists(d)]
    read_only = _read_only_dir(tmp)
    if read_only is not None:
        special.append(read_only if directory else f"{read_only}/results.json")
    return st.one_of(
        st.sampled_from(special),
        st.text(min_size=1, max_size=8).map(lambda t: f"{a_file}/{t}"),
    )


def _fuzz_out_refusals(main, tmp_path, capsys, strategy, argv_of) -> None:
    """Every hostile ``--out`` is one line, exit 2, and leaves the path and the directory
    as they were (a device stays a device, a FIFO a FIFO, a link the same link)."""

    def state(out: str) -> tuple:
        return sorted(os.listdir(tmp_path)), snapshot(out) if out.strip() else None

    @FUZZ
    @given(out=strategy)
    def inner(out):
        before = state(out)
        argv = argv_of(out)
        assert_refused(*call(main, argv, capsys), argv)
        assert state(out) == before

    inner()


def test_paper_figs_bad_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import paper_figs

    _fuzz_out_refusals(paper_figs.main, tmp_path, capsys, _bad_outs(tmp_path, directory=True),
                       lambda out: ["--out", out, "--only", "margin", "--quick"])


def test_benchmarks_refusals(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from benchmarks.__main__ import AREAS, main

    assert "margin" in AREAS
    _fuzz_out_refusals(main, tmp_path, capsys, _bad_outs(tmp_path, directory=False),
                       lambda out: ["--quick", "--only", "margin", "--out", out])

    @FUZZ
    @given(only=hostile())
    def bad_areas(only):
        before = sorted(os.listdir(tmp_path))
        argv = ["--quick", "--only", only, "--out", str(tmp_path / "r.json")]
        assert_refused(*call(main, argv, capsys), argv)
        assert sorted(os.listdir(tmp_path)) == before

    bad_areas()


# ------------------------------------------------------------- the API's numeric guards


def _api_calls() -> dict:
    """Each library door, keyed by the argument a hostile value goes to."""
    from priors.certified import certified_masses
    from priors.encodings import ALiBi, KerpleLog, LogDistance, T5Buckets, UserBias
    from priors.harmonic import power_sum
    from priors.margin import select_margin
    from priors.mass import mass_report

    return {
        "window": lambda v: LogDistance(1.1).window_mass(v, 4096),
        "length": lambda v: ALiBi(0.5).distant_mass(4, v),
        "dps": lambda v: ALiBi(0.5).window_mass(4, 64, dps=v),
        "score_bound": lambda v: mass_report(ALiBi(0.5), 4, 64, score_bound=v),
        "max_distance": lambda v: T5Buckets(table=[0.0] * 32, max_distance=v),
        "table": lambda v: T5Buckets(num_buckets=2, table=[0.0, v]),
        "values": lambda v: UserBias([0.0, v], tail="constant"),
        "r1": lambda v: KerpleLog(v, 1.0).window_mass(4, 64),
        "hi": lambda v: power_sum(0, v, 2.0),
        "certified score_bound": lambda v: certified_masses(ALiBi(0.5), 4, 64, score_bound=v),
        "growth_tol": lambda v: select_margin(8, 64, v),
    }


_API_VALUES = st.one_of(
    st.sampled_from([None, True, -1, 0, 1, 2.5, 10**19, 10**400, -(10**19), 1e308, 1e400,
                     float("nan"), float("inf"), "7", "5_12", "\u0665", [1, 2], [[0.0]],
                     1e-320, 10**6, 1000001, 1e6 + 1]),
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
)


@FUZZ
@given(which=st.sampled_from(sorted(_api_calls())), value=_API_VALUES)
def test_api_numeric_guards(which, value):
    """A hostile value at a library door: a ``ValueError`` naming the argument, or an answer
    that is a number in its range, within the alarm: never another exception
    type, a hang, or a numpy overflow."""
    func = _api_calls()[which]
    argument = which.split()[-1]
    try:
        with alarm(ALARM_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = func(value)
    except ValueError as exc:
        assert argument in str(exc), (which, value, exc)
        return
    if isinstance(result, mpmath.mpf):
        # a mass lies in [0, 1]; the power sum sum_{k <= hi} k^-2 below zeta(2) = pi^2/6,
        # which the 30-digit result may meet after rounding (1e-12: far above that)
        ceiling = mpmath.pi**2 / 6 * (1 + mpmath.mpf(10) ** -12) if which == "hi" else 1
        assert 0 <= result <= ceiling, (which, value, result)


# ----------------------------------------------------- pipes and a full disk (subprocess)

_COMMANDS = [
    [sys.executable, "-m", "priors.mass", "--encoding", "log-distance", "--window", "4",
     "--length", "8", "16", "--json"],
    [sys.executable, "-m", "priors.margin", "--window", "8", "--lmax", "64", "--tol", "0.1"],
    [sys.executable, "-m", "proofs_check", "--list"],
    [sys.executable, "paper_figs.py", "--help"],
    [sys.executable, "-m", "benchmarks", "--help"],
]


@pytest.mark.skipif(not os.path.exists("/dev/full") or not os.path.exists("/bin/bash"),
                    reason="needs /dev/full and bash (Linux)")
@pytest.mark.parametrize("argv", _COMMANDS, ids=lambda a: a[2] if a[1] == "-m" else a[1])
def test_closed_pipe_and_full_disk(argv):
    # closed pipe: the reader exits at once; the command must end quietly, status 0
    pipe = subprocess.run(
        " ".join(f"'{a}'" for a in argv) + " | true; exit ${PIPESTATUS[0]}",
        shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )
    assert pipe.returncode == 0 and "Traceback" not in pipe.stderr, pipe.stderr
    with open("/dev/full", "w") as full:
        proc = subprocess.run(argv, cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left" in lines[0], proc.stderr

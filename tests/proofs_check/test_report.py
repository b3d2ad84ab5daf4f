"""The report command ``python -m proofs_check`` (``proofs_check.report.main``).

The registry is replaced by a few fake checks (monkeypatch; each a ``theorem_check`` like
the real ones), so these tests exercise the command itself -- table, JSON, exit codes,
selection, what reaches the checks -- in milliseconds; one real subprocess runs a real
(fast) check end to end.
"""

import functools
import json
import math
import subprocess
import sys

import pytest
import torch

from proofs_check import report
from proofs_check.result import CheckSpec, Measurement, theorem_check
from proofs_check.tf32 import tf32_enabled


def _fake(name, *, holds=True, section="§9", torch_args=False, progress_arg=False,
          raises=False, seen=None):
    def body(size, **passed):
        if seen is not None:
            seen.append({"kwargs": {"size": size, **passed}, "tf32": tf32_enabled(),
                         "flags": _flags()})
        if raises:
            raise RuntimeError("boom")
        return Measurement("q", 0.5, 1.0 if holds else 0.25, "<=")

    run = theorem_check(name, "Fake (§9)")(body)
    return CheckSpec(name=name, theorem="Fake (§9)", section=section, run=run,
                     ci={"size": "ci"}, default={"size": "default"}, full={"size": "full"},
                     negative={"size": "neg"}, torch_args=torch_args, progress_arg=progress_arg)


@pytest.fixture
def registry(monkeypatch):
    """Install fake checks as the registry; returns the list so tests can append."""
    specs = [_fake("fake_pass", section="§4"), _fake("fake_other", section="§4.2")]
    monkeypatch.setattr(report, "all_checks", lambda: list(specs))
    return specs


def _bad(capsys, argv):
    rc = report.main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (argv, rc, err)
    assert out == "", out
    assert len(err.strip().splitlines()) == 1 and err.startswith("proofs_check: error:"), err
    return err


def test_table_output_and_exit_zero(registry, capsys):
    rc = report.main([])
    out, err = capsys.readouterr()
    assert rc == 0
    header = out.splitlines()[0].split()
    for col in ("check", "theorem", "measured", "bound/ref", "slack", "holds", "time"):
        assert col in header, header
    rows = [line for line in out.splitlines() if line.startswith("fake_")]
    assert len(rows) == 2 and all(" yes " in r for r in rows), out
    assert "2/2 checks hold" in out and "TF32 off" in out and "4 significant digits" in out
    # slack printed to 4 significant digits: reference 1.0 - measured 0.5 = 0.5.
    assert " 0.5 " in rows[0]
    # progress goes to stderr, a line when each check starts and one when it finishes
    assert err.count("fake_") == 4 and err.count(": running") == 2 and "holds" in err


def test_text_and_json_report_the_same_allowance(monkeypatch, capsys):
    # A check granting an allowance: measured 1.25 <= reference 1.0 + allowance 0.5, so the
    # slack is 1.0 + 0.5 - 1.25 = 0.25 (computed here by hand). The table shows the
    # allowance and the slack to 4 significant digits, the JSON the same values in full.
    @theorem_check("fake_allowance", "Fake (§9)")
    def run():
        return Measurement("q", 1.25, 1.0, "<=", allowance=0.5)

    spec = CheckSpec(name="fake_allowance", theorem="Fake (§9)", section="§9", run=run,
                     torch_args=False)
    monkeypatch.setattr(report, "all_checks", lambda: [spec])
    assert report.main([]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    row = next(line for line in out.splitlines() if line.startswith("fake_allowance")).split()
    assert "allowance" in header, header
    # the row's columns after the check and theorem follow the header's ("Fake (§9)" and
    # "measured quantity" are two words each, so align from the right)
    cells = dict(zip(reversed(header), reversed(row), strict=False))
    assert (cells["allowance"], cells["slack"]) == ("0.5", "0.25"), out
    assert report.main(["--json"]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert (result["allowance"], result["slack"]) == (0.5, 0.25)
    assert "tol" not in result


def test_default_sizes_are_used(registry, capsys):
    assert report.main(["--only", "fake_pass", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["size"] == "default" and doc["results"][0]["params"]["size"] == "default"
    assert report.main(["--only", "fake_pass", "--json", "--full"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["params"]["size"] == "full"


def test_json_parses(registry, capsys):
    assert report.main(["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["all_hold"] is True and doc["tf32"] is False
    assert {"size", "dtype", "device", "tf32_restored_to", "seconds"} <= set(doc)
    assert [r["check"] for r in doc["results"]] == ["fake_pass", "fake_other"]
    first = doc["results"][0]
    assert first["measured"] == 0.5 and first["reference"] == 1.0 and first["holds"] is True
    assert first["tf32"] is False


def test_failing_check_exits_one(registry, capsys):
    registry.append(_fake("fake_fail", holds=False))
    rc = report.main([])
    out, _ = capsys.readouterr()
    assert rc == 1
    assert "FAILED fake_fail" in out and "2/3 checks hold" in out
    row = next(line for line in out.splitlines() if line.startswith("fake_fail"))
    assert " NO " in row
    assert report.main(["--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["all_hold"] is False
    assert [r["holds"] for r in doc["results"]] == [True, True, False]


def test_raising_check_is_a_failed_row(registry, capsys):
    registry.append(_fake("fake_raises", raises=True))
    assert report.main(["--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    bad = doc["results"][-1]
    assert bad["check"] == "fake_raises" and bad["holds"] is False
    assert "RuntimeError: boom" in bad["details"]["error"]
    assert bad["seconds"] == "nan"  # not timed: the check never made its record
    assert report.main([]) == 1
    out, err = capsys.readouterr()
    row = next(line for line in out.splitlines() if line.startswith("fake_raises"))
    assert row.rstrip().endswith(" -"), row  # no time shown for a check that raised
    assert "fake_raises: FAILS (raised)" in err


def test_rows_shown_are_the_checks_own_records():
    # The report adds nothing to a check's record: what run_checks returns is the very
    # object the check's theorem_check made (its own timing and TF32 state included).
    made = []
    inner = _fake("fake_recorded").run

    @functools.wraps(inner)  # keeps check_name: still the theorem_check the spec requires
    def recording_run(**kwargs):
        made.append(inner(**kwargs))
        return made[-1]

    spec = CheckSpec(name="fake_recorded", theorem="Fake (§9)", section="§9",
                     run=recording_run, default={"size": "default"}, torch_args=False)
    results = report.run_checks([spec], progress=None)
    assert len(made) == 1 and results[0] is made[0]
    assert math.isfinite(results[0].seconds) and results[0].seconds >= 0


def test_stream_rows_reach_only_the_checks_that_take_progress(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(report, "all_checks",
                        lambda: [_fake("fake_stream", progress_arg=True, seen=seen),
                                 _fake("fake_plain", seen=seen)])
    assert report.main(["--json"]) == 0
    assert report.main(["--json", "--full"]) == 0
    capsys.readouterr()
    assert [s["kwargs"] for s in seen] == [
        {"size": "default", "progress": False}, {"size": "default"},
        {"size": "full", "progress": True}, {"size": "full"},
    ]


def test_a_spec_must_be_a_theorem_check_of_its_name():
    with pytest.raises(ValueError, match="theorem_check"):
        CheckSpec(name="plain", theorem="T", section="§1", run=lambda: None)
    with pytest.raises(ValueError, match="theorem_check named 'other'"):
        CheckSpec(name="other", theorem="T", section="§1", run=_fake("fake_a").run)


def test_only_by_name_and_section(registry, capsys):
    registry.append(_fake("fake_s5", section="§5"))
    for argv, expected in [
        (["--only", "fake_s5"], ["fake_s5"]),
        (["--only", "§4"], ["fake_pass", "fake_other"]),  # section includes §4.2
        (["--only", "4.2"], ["fake_other"]),
        (["--only", "fake_s5,fake_pass"], ["fake_pass", "fake_s5"]),  # registry order
        (["--only", "fake_s5", "--only", "§4.2"], ["fake_other", "fake_s5"]),
    ]:
        assert report.main([*argv, "--json"]) == 0
        names = [r["check"] for r in json.loads(capsys.readouterr().out)["results"]]
        assert names == expected, (argv, names)


def test_list(registry, capsys):
    assert report.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "fake_pass" in out and "§4.2" in out
    assert report.main(["--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [x["check"] for x in listed] == ["fake_pass", "fake_other"]


def test_torch_checks_get_dtype_and_device(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(report, "all_checks",
                        lambda: [_fake("fake_torch", torch_args=True, seen=seen),
                                 _fake("fake_pure", torch_args=False, seen=seen)])
    assert report.main(["--dtype", "float32", "--json"]) == 0
    capsys.readouterr()
    assert seen[0]["kwargs"] == {"size": "default", "dtype": torch.float32, "device": "cpu"}
    assert seen[1]["kwargs"] == {"size": "default"}  # pure-priors checks take no torch args


def test_each_row_states_the_precision_it_was_computed_in(monkeypatch, capsys):
    # A --dtype float32 run printed "dtype float32" for every row, also for checks that run
    # in mpmath at 30 digits: each row must state its own precision (CheckResult.dtype).
    def mp_body():
        return Measurement("q", 0.5, 1.0, "<=", dtype="mpmath dps 30")

    def torch_body(*, dtype=torch.float64, device="cpu"):
        return Measurement("q", 0.5, 1.0, "<=")

    mp_spec = CheckSpec(name="fake_mp", theorem="Fake (§9)", section="§9",
                        run=theorem_check("fake_mp", "Fake (§9)")(mp_body), torch_args=False)
    torch_spec = CheckSpec(name="fake_torch", theorem="Fake (§9)", section="§9",
                           run=theorem_check("fake_torch", "Fake (§9)")(torch_body))
    monkeypatch.setattr(report, "all_checks", lambda: [torch_spec, mp_spec])
    assert report.main(["--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("fake_")}
    assert " float32 " in rows["fake_torch"] and "mpmath" not in rows["fake_torch"], out
    assert " mpmath dps 30 " in rows["fake_mp"] and "float32" not in rows["fake_mp"], out


def _flags():
    b = torch.backends
    return (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, torch.get_float32_matmul_precision())


def test_tf32_forced_off_and_restored(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(report, "all_checks", lambda: [_fake("fake_tf32", seen=seen)])
    before = _flags()
    try:
        # a user who switched TF32 on before running the report (each check's theorem_check
        # forces it off for the check and gives the user's setting back afterwards)
        user_setting = True
        torch.backends.cuda.matmul.allow_tf32 = user_setting
        torch.backends.cudnn.allow_tf32 = user_setting
        assert tf32_enabled()
        assert report.main(["--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert seen[0]["tf32"] is False and seen[0]["flags"] == (False, False, "highest")
        assert doc["tf32"] is False and doc["results"][0]["tf32"] is False
        assert doc["tf32_restored_to"] is True
        assert _flags()[:2] == (True, True)  # restored
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[:2]
        torch.set_float32_matmul_precision(before[2])
    assert _flags() == before


@pytest.mark.parametrize(
    "argv",
    [
        ["--only", "no_such_check"],
        ["--only", "§42"],
        ["--only", ""],  # an empty selection is refused, not read as "everything"
        ["--only", "a,,b"],
        ["--dtype", "float16"],
        ["--device", "tpu"],
        ["--device", "not a device"],
        ["--bogus"],
        ["--full", "--ci"],
        ["--list", "--device", "tpu"],  # refused with --list too, as --dtype is
        ["--list", "--device", "not a device"],
    ],
)
def test_bad_arguments_exit_two(registry, capsys, argv):
    _bad(capsys, argv)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here: not a bad argument")
def test_cuda_without_cuda_is_a_bad_argument(registry, capsys):
    err = _bad(capsys, ["--device", "cuda"])
    assert "CUDA is not available" in err


def test_help_exits_zero(capsys):
    assert report.main(["--help"]) == 0
    assert "--only" in capsys.readouterr().out


def test_real_subprocess_fast_check():
    # A real check, run the way a user runs it: exit 0, a table on stdout, progress on stderr.
    proc = subprocess.run(
        [sys.executable, "-m", "proofs_check", "--only", "thm4_near_one_limit", "--ci"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "thm4_near_one_limit" in proc.stdout and "1/1 checks hold" in proc.stdout
    assert "thm4_near_one_limit" in proc.stderr  # progress line


def test_real_subprocess_bad_argument():
    proc = subprocess.run(
        [sys.executable, "-m", "proofs_check", "--only", "no_such_check"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_missing_torch_is_one_line_and_exit_2():
    # sys.modules["torch"] = None makes ``import torch`` raise ImportError, as without torch
    code = (
        "import sys, runpy; sys.modules['torch'] = None; sys.argv = ['proofs_check'];"
        "runpy.run_module('proofs_check', run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "torch" in proc.stderr

"""Keep the benchmark scripts from rotting (they are not tests; this runs tiny pieces of them).

Each naive baseline is also checked against the library it is compared with, by a different
method (direct float64 summation vs Hurwitz zeta / Arb), so a broken baseline cannot make
the library look fast by computing something else.
"""

import json
import os
import stat
import subprocess
import sys
import types

import pytest
from support import snapshot

# ``python -m pytest`` from the repository root puts the root on sys.path: benchmarks/ is a
# top-level folder there, not part of the installed package.
from benchmarks import __main__ as bench_main


def test_bad_area_is_one_line_exit_2(capsys):
    assert bench_main.main(["--only", "bogus"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["--only", ""], ["--only", ","], ["--out", ""],
                                  ["--only", "margin", "--out", "/proc/none/x.json"]])
def test_refusals_run_and_write_nothing(capsys, tmp_path, argv):
    results = bench_main.ROOT / "benchmarks" / "results.json"
    before = results.stat().st_mtime_ns
    assert bench_main.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "running" not in captured.err  # refused before any benchmark ran
    assert results.stat().st_mtime_ns == before


def _fake_margin(monkeypatch, rows):
    """``benchmarks.margin`` replaced by a stub returning ``rows`` (no minutes of timing)."""
    fake = types.SimpleNamespace(run=lambda quick=False: rows)
    real_import = bench_main.importlib.import_module
    monkeypatch.setattr(bench_main.importlib, "import_module",
                        lambda name: fake if name == "benchmarks.margin" else real_import(name))


def _make(kind, tmp_path):
    path = tmp_path / "results.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "gone" / "r.json")
    elif kind == "issue's malformed file":
        path.write_text('{"areas": {"margin": "x"}, "machine_by_area": [], "quick": false}')
    elif kind == "not JSON":
        path.write_text("these are my notes, not results\n")
    elif kind == "JSON of another form":
        path.write_text('{"areas": {"margin": "x"}, "machine_by_area": []}')
    elif kind == "wrong suffix":
        path = tmp_path / "results.txt"
    return path


@pytest.mark.parametrize("kind, words", [
    ("fifo", "FIFO"), ("directory", "a directory"), ("dangling link", "dangling"),
    ("issue's malformed file", "['areas']['margin'] must be an array"),
    ("not JSON", "is not a JSON file"), ("JSON of another form", "has no key 'quick'"),
    ("wrong suffix", "must end in .json"),
])
def test_out_that_is_not_a_results_file_is_refused_untouched(kind, words, tmp_path,
                                                               monkeypatch, capsys):
    path = _make(kind, tmp_path)
    before = snapshot(path) if os.path.lexists(path) else None
    _fake_margin(monkeypatch, [{"new": 1}])
    assert bench_main.main(["--only", "margin", "--out", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("benchmarks: error: --out: ") and words in captured.err
    assert "running" not in captured.err
    assert (snapshot(path) if os.path.lexists(path) else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ([path.name] if before else [])


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_out_a_device_is_refused_without_reading_it(monkeypatch, capsys):
    before = os.stat("/dev/null")
    _fake_margin(monkeypatch, [{"new": 1}])
    assert bench_main.main(["--only", "margin", "--out", "/dev/null"]) == 2
    assert "character device" in capsys.readouterr().err
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_previous_results_are_read_with_a_size_cap(tmp_path, monkeypatch, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"quick": False, "areas": {"margin": [{"x": "y" * 200}]}}))
    monkeypatch.setattr(bench_main, "RESULTS_LIMIT", 100)
    _fake_margin(monkeypatch, [{"new": 1}])
    assert bench_main.main(["--only", "margin", "--out", str(path)]) == 2
    assert "larger than 100 bytes" in capsys.readouterr().err


def test_quick_run_never_touches_full_results(tmp_path, monkeypatch, capsys):
    """A --quick run goes to its own default file; into a full-run file it is refused (and
    a full run into a quick file), the file left as it was."""
    full, quick = tmp_path / "results.json", tmp_path / "results_quick.json"
    monkeypatch.setattr(bench_main, "DEFAULT_OUT", {False: full, True: quick})
    full.write_text(json.dumps({"quick": False, "areas": {"masses": [{"full": 1}]}}))
    before = snapshot(full)
    _fake_margin(monkeypatch, [{"quick_row": 2}])
    assert bench_main.main(["--quick", "--only", "margin", "--out", str(full)]) == 2
    err = capsys.readouterr().err
    assert "holds full-run results" in err and err.count("\n") == 1
    assert snapshot(full) == before
    assert bench_main.main(["--quick", "--only", "margin"]) == 0
    capsys.readouterr()
    assert snapshot(full) == before
    data = json.loads(quick.read_text())
    assert data["quick"] is True and data["areas"] == {"margin": [{"quick_row": 2}]}
    before_quick = snapshot(quick)
    assert bench_main.main(["--only", "margin", "--out", str(quick)]) == 2
    assert "holds --quick results" in capsys.readouterr().err
    assert snapshot(quick) == before_quick


def test_committed_results_file_has_the_form_the_command_reads():
    path = bench_main.DEFAULT_OUT[False]
    data = bench_main.read_json_file(path, "--out", shape=bench_main.RESULTS_SHAPE)
    assert data["quick"] is False and set(data["areas"]) <= set(bench_main.AREAS)


def test_machine_description_names_cores_and_versions():
    info = bench_main.describe_machine()
    assert info["cores"] >= 1
    assert info["numpy"] and info["mpmath"]


def test_table_prints_union_of_keys(capsys):
    bench_main.print_table("demo", [{"a": 1.23456789, "b": "x"}, {"a": 2.0, "c": 3}])
    out = capsys.readouterr().out
    assert "a" in out and "c" in out and "1.235" in out


def test_naive_margin_baseline_agrees_with_select_margin():
    from benchmarks.margin import _NAIVE
    from priors.margin import select_margin

    proc = subprocess.run(
        [sys.executable, "-c", _NAIVE, "64", "4096", "0.1"],
        capture_output=True, text=True, check=True,
    )
    naive = float(proc.stdout.strip())
    exact = select_margin(64, 4096, 0.1).delta
    # the naive bisection stops at relative width 1e-9; float64 sums add ~1e-13
    assert abs(naive - exact) <= 2e-9 * exact


def test_naive_mass_baseline_agrees_with_hurwitz():
    from benchmarks.masses import _numpy_mass
    from priors.encodings import LogDistance

    naive = _numpy_mass(512, 10**5, 1.1)
    exact = float(LogDistance(alpha=1.1).window_mass(512, 10**5))
    # 1e5 float64 terms summed in chunks: relative error well below 1e-12
    assert abs(naive - exact) <= 1e-12 * exact


def test_operator_benchmark_rows_at_tiny_size():
    torch = pytest.importorskip("torch")
    from benchmarks.operators import dense_rows

    rows = dense_rows([16], [0.5], [torch.float64], ["newton", "sinkhorn"], 200)
    assert [r["method"] for r in rows] == ["newton", "sinkhorn"]
    assert all(r["converged"] for r in rows)
    assert all(r["ratio_to_softmax"] > 0 for r in rows)


def test_each_shape_and_dtype_warms_its_softmax_before_its_first_timed_row(monkeypatch):
    """Eight untimed masked softmaxes of the group's own tensor before its first operator call.

    (The first timed softmax of a shape ran at half speed after other shapes' rows, which
    flattered that row's ratio; the size-level warm-up uses another shape, (max heads, n, n)
    in float64, so it does not count here.)
    """
    torch = pytest.importorskip("torch")
    import benchmarks.operators as bench
    import proofs_check.operators as ops

    log = []
    real_sm, real_op = bench._masked_softmax_fn, ops.causal_ot_attention

    def counting_sm(s, mask):
        f = real_sm(s, mask)
        return lambda: (log.append(("sm", tuple(s.shape), s.dtype)), f())[1]

    def counting_op(s, rho, **kw):
        log.append(("op", tuple(s.shape), s.dtype))
        return real_op(s, rho, **kw)

    monkeypatch.setattr(bench, "_masked_softmax_fn", counting_sm)
    monkeypatch.setattr(ops, "causal_ot_attention", counting_op)
    bench.dense_rows([24], [0.3, 0.9], [torch.float64, torch.float32], ["newton"],
                     heads=(1, 2), repeats=1)
    groups = [(1, torch.float64), (1, torch.float32), (2, torch.float64), (2, torch.float32)]
    for h, dtype in groups:
        first = next(i for i, e in enumerate(log) if e == ("op", (h, 24, 24), dtype))
        run = 0  # softmaxes of this shape and dtype right before the group's first call
        for e in reversed(log[:first]):
            if e != ("sm", (h, 24, 24), dtype):
                break
            run += 1
        # the group's eight softmaxes, then the first of its three untimed rounds of both
        assert run >= 8 + 1, (h, dtype, run)


def test_operator_rows_say_how_many_rows_the_team_shared():
    torch = pytest.importorskip("torch")
    from benchmarks.operators import dense_rows
    from proofs_check.operators.causal_ot import _compiled as compiled

    ext = compiled.load_extension()
    if ext is None or ext.__name__.endswith("_serial"):
        pytest.skip("no compiled OpenMP kernel on this machine (no team of two without it)")
    # the team's waiting check off (a busy machine may dissolve it); the first shared row
    # follows the measured cost of an exchange: 256 fixed here, then 1024 for a cost of 170 ns
    # (at most n = 300: only the last row shared)
    first = compiled.KernelOptions(team_from=256, team_give_up=1e9)
    costly = compiled.KernelOptions(exchange_ns=170.0, team_give_up=1e9)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        (row,) = dense_rows([300], [0.5], [torch.float64], ["newton"], repeats=1,
                            team_options=first)
        (late,) = dense_rows([300], [0.5], [torch.float64], ["newton"], repeats=1,
                             team_options=costly)
    finally:
        torch.set_num_threads(before)
    assert row["threads"] == 2 and row["team_rows"] == 300 - 255  # rows 256..299
    assert row["team_from"] == 256 and row["exchange_ns"] > 0  # (measured all the same)
    assert late["team_from"] == 300 and late["team_rows"] == 1 and late["exchange_ns"] == 170


def test_warm_allocator_says_what_it_did():
    from benchmarks.operators import warm_allocator

    said = warm_allocator()
    assert said.startswith(("warm", "default"))
    # idempotent: a second call leaves the same state
    assert warm_allocator() == said


def test_only_updates_its_area_and_keeps_the_rest(tmp_path, monkeypatch, capsys):
    out = tmp_path / "results.json"
    out.write_text(json.dumps({
        "machine": {"cores": 1}, "quick": False, "notes": {"margin": "kept"},
        "recorded_runs": [{"command": "x"}],
        "areas": {"margin": [{"old": 1}], "masses": [{"kept": 2}]},
    }))
    _fake_margin(monkeypatch, [{"new": 3}])
    assert bench_main.main(["--only", "margin", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["areas"] == {"margin": [{"new": 3}], "masses": [{"kept": 2}]}
    assert data["notes"] == {"margin": "kept"} and data["recorded_runs"] == [{"command": "x"}]
    assert data["machine"]["cores"] >= 1
    # each area says where it was measured: the kept one on the file's old machine
    assert data["machine_by_area"]["masses"] == {"cores": 1}
    assert data["machine_by_area"]["margin"] == data["machine"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux")
def test_stream_peak_rss_sees_growth_after_the_reset():
    # The stream child's memory figure: its peak RSS above the RSS it starts from, with the
    # high-water mark reset first (ru_maxrss, used before, carries a parent's peak through
    # fork and exec and reported 0 growth under a 5 GB parent whatever the child did).
    from benchmarks import operators as bench_ops

    if not bench_ops._reset_peak_rss():
        pytest.skip("/proc/self/clear_refs not writable here: the child falls back to ru_maxrss")
    base, peak0 = bench_ops._rss_now_and_peak()
    assert peak0 - base < 16 << 20  # the reset put the mark at the current RSS (+ noise)
    block = bytearray(256 << 20)  # 256 MiB, touched (zero-filled by the allocation)
    block[:: 4096] = b"\1" * len(block[:: 4096])
    _, peak1 = bench_ops._rss_now_and_peak()
    del block
    # the mark rose by about the block: at least half of it (in the full suite the block can
    # reuse pages the process already holds; measured 240 MiB of 256 there, and ru_maxrss
    # under a big parent showed 0)
    assert peak1 - base >= 128 << 20


def test_cuda_areas_need_a_device(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "operators_cuda" not in bench_main._areas(None)  # left out of a default run
    assert bench_main.main(["--only", "operators_cuda", "--quick"]) == 2  # named: refused
    assert "needs a CUDA device" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert bench_main._areas(None)[-1] == "operators_cuda"


@pytest.mark.parametrize("argv, match", [
    (["--stream-rhos", "x", "--only-stream"], "--stream-rhos"),
    (["--stream-rhos", "1.5", "--only-stream"], "[0, 1)"),
    (["--stream-rhos", ",", "--only-stream"], "--stream-rhos"),
    (["--stream-n", "-5", "--only-stream"], "--stream-n"),
    (["--sinkhorn-cap", "0", "--skip-stream"], "--sinkhorn-cap"),
    (["--methods", "bogus", "--skip-stream"], "--methods"),
    (["--quick", "--methods", "sinkhorn"], "--quick"),  # quick ran newton whatever was asked
    (["--quick", "--stream-rhos", "0.9"], "--quick"),  # and its own stream rho
    (["--only-stream", "--skip-stream"], "contradict"),
])
def test_operators_bad_arguments_are_one_line_exit_2(argv, match, capsys, monkeypatch):
    """``python -m benchmarks.operators`` refuses a bad or contradictory option in one
    line with exit 2 before any benchmark starts (no traceback from the child stream,
    no option silently ignored)."""
    import benchmarks.operators as bench

    def started(*args, **kwargs):
        raise AssertionError("a benchmark started")

    monkeypatch.setattr(bench, "run", started)
    monkeypatch.setattr(bench, "stream_row", started)
    assert bench.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("python -m benchmarks.operators: error")
    assert match in captured.err

"""The experiment's corpus, results, predictions, figure and command line (CI size).

The end-to-end run uses a generated corpus of a few hundred KB (``--corpus-root``), one
seed, three training steps and one held-out window: it checks the plumbing (device
argument, atomic results, cache reuse, figure), not the science; the science is the slow
test in ``test_extrapolation_slow.py``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from proofs_check.extrapolation.cli import main
from proofs_check.extrapolation.data import (
    corpus_files,
    default_cache_dir,
    heldout_windows,
    is_heldout,
    load_corpus,
)
from proofs_check.extrapolation.predictions import check_predictions
from proofs_check.extrapolation.results import summarize_variant, write_json_atomic

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory):
    """A directory of generated ``.py`` files with > 2049 held-out bytes."""
    root = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    words = ["def", "return", "self", "import", "class", "for", "in", "if", "else", "x", "y"]
    for k in range(60):
        sub = root / f"pkg{k % 3}"
        sub.mkdir(exist_ok=True)
        text = " ".join(rng.choice(words, 1500)) + "\n"
        (sub / f"mod{k}.py").write_text(text)
    (root / "site-packages").mkdir()
    (root / "site-packages" / "skipped.py").write_text("x = 1\n")
    return root


def test_split_is_by_file_and_deterministic(corpus_root, tmp_path):
    files = corpus_files(corpus_root)
    rels = [r for r, _ in files]
    assert rels == sorted(rels) and not any("site-packages" in r for r in rels)
    held = [r for r in rels if is_heldout(r, 0.05)]
    assert 0 < len(held) < len(rels)
    c1 = load_corpus(cache_dir=tmp_path, root=corpus_root)
    c2 = load_corpus(cache_dir=tmp_path, root=corpus_root)  # from the cache
    assert np.array_equal(c1.train, c2.train) and np.array_equal(c1.heldout, c2.heldout)
    assert c1.n_files_heldout == len(held)
    # every held-out file's bytes are in the held-out stream and not in the train stream
    sample = (corpus_root / held[0]).read_bytes()
    assert sample in c1.heldout.tobytes() and sample not in c1.train.tobytes()
    assert c1.train.size + c1.heldout.size + 1 == sum(p.stat().st_size for _, p in files) + (
        len(files) - 1
    )  # each stream: its files joined by one separator byte (n_files - 1 per stream)
    assert REPO not in default_cache_dir().parents


def test_heldout_windows_are_paired_suffixes():
    stream = np.arange(1000, dtype=np.uint8)
    w = heldout_windows(stream, 99, 5)
    assert w.shape == (5, 100)
    assert np.array_equal(w[1], stream[200:300].astype(np.int64))
    with pytest.raises(ValueError, match="held-out stream"):
        heldout_windows(stream, 999, 2)


def _fake_eval(bpb_l0, bpb_l1, m0, m1, exact0, exact1):
    def entry(length, bpb, m, ex):
        return {"length": length, "bpb": list(bpb), "window_mass": [[m]],
                "distant_mass": [[1 - m]], "exact_window_mass": [ex],
                "exact_distant_mass": [1 - ex]}

    return {"lengths": [8, 64], "priors": [{"name": "nope", "params": {}, "class": "dilutes"}],
            "per_length": [entry(8, bpb_l0, m0, exact0), entry(64, bpb_l1, m1, exact1)]}


def test_summary_standard_errors_match_a_hand_computation():
    a = _fake_eval([1.0, 2.0, 3.0], [1.5, 2.1, 3.6], 0.5, 0.1, 0.5, 0.12)
    b = _fake_eval([1.0, 2.0, 3.0], [1.3, 2.3, 3.2], 0.4, 0.1, 0.5, 0.12)
    s = summarize_variant([a, b])
    d = np.array([[0.5, 0.1, 0.6], [0.3, 0.3, 0.2]])  # paired changes (seed, window)
    last = s["per_length"][1]
    assert last["change"] == pytest.approx(d.mean())
    assert last["se_windows"] == pytest.approx(d.mean(0).std(ddof=1) / np.sqrt(3))
    assert last["se_seeds"] == pytest.approx(d.mean(1).std(ddof=1) / np.sqrt(2))
    assert last["se"] == max(last["se_windows"], last["se_seeds"])
    assert s["distant_growth_measured"] == pytest.approx(0.9 - 0.55)


def test_predictions_fail_for_a_model_that_does_not_degrade():
    """Negative control: a diluting prior whose loss does not change must fail the
    degradation prediction (the check is fed a wrong system, not a rescaled verdict)."""
    flat = _fake_eval([2.0] * 4, [2.0, 2.01, 1.99, 2.0], 0.5, 0.1, 0.5, 0.12)
    worse = _fake_eval([2.0] * 4, [2.5, 2.6, 2.4, 2.5], 0.5, 0.1, 0.5, 0.12)
    for evals, want in (([flat, flat], False), ([worse, worse], True)):
        res = {"variants": {"nope": summarize_variant(evals)}}
        preds = {("change" if "change@Lmax" in p.claim else p.claim.split()[0]): p
                 for p in check_predictions(res)}
        assert preds["change"].claim.startswith("G > ")  # exact growth 0.38 > 0.1
        assert preds["change"].holds is want
        assert preds["window"].holds  # 0.4 lost > max(0.38 / 2, 3 se = 0)


def test_loss_prediction_follows_the_exact_growth_not_the_class():
    """A summable prior whose exact distant mass grows by 0.3 over [L0, Lmax] (beyond
    FLAT_GROWTH) is predicted to degrade: a model whose loss stays flat must fail that
    claim, one whose loss grows must pass; with an exact growth of 0.02 the same flat
    model must pass the 'holds' claim and the degrading one fail it."""
    def summable(bpb_l1, exact1):
        ev = _fake_eval([2.0] * 3, bpb_l1, 0.9, exact1, 0.9, exact1)
        ev["priors"] = [{"name": "alibi", "params": {}, "class": "summable"}]
        return ev

    flat, worse = [2.0, 1.99, 2.01], [2.3, 2.29, 2.31]
    for bpb_l1, exact1, start, want in ((flat, 0.6, "G > ", False), (worse, 0.6, "G > ", True),
                                         (flat, 0.88, "G <= ", True),
                                         (worse, 0.88, "G <= ", False)):
        res = {"variants": {"alibi": summarize_variant([summable(bpb_l1, exact1)] * 2)}}
        (loss,) = [p for p in check_predictions(res) if "change@Lmax" in p.claim]
        assert loss.claim.startswith(start) and loss.holds is want, (exact1, loss)


def test_growth_prediction_fails_when_measured_mass_drifts_from_the_prior():
    """Negative control for a summable prior: the exact growth is 0.02 (M 0.9 -> 0.88);
    a model whose measured window mass falls 0.9 -> 0.6 must fail, 0.9 -> 0.87 must pass."""
    def summable(m1):
        ev = _fake_eval([2.0] * 3, [2.0, 1.99, 2.01], 0.9, m1, 0.9, 0.88)
        ev["priors"] = [{"name": "alibi", "params": {}, "class": "summable"}]
        return ev

    for m1, want in ((0.6, False), (0.87, True)):
        res = {"variants": {"alibi": summarize_variant([summable(m1), summable(m1)])}}
        growth = [p for p in check_predictions(res) if "growth" in p.claim]
        assert len(growth) == 1 and growth[0].holds is want


def test_ot_variants_are_checked_against_their_constant_score_prior():
    """The causal OT variants get the diluting predictions of their CausalOTPrior (Theorem 2);
    negative control: an OT model that keeps its window mass fails the mass claim."""
    def ot(m1):
        ev = _fake_eval([2.0] * 3, [2.5, 2.4, 2.6], 0.5, m1, 0.5, 0.12)
        ev["priors"] = [{"name": "causal-ot", "params": {"rho": 0.3}, "class": "dilutes"}]
        return ev

    for m1, want in ((0.1, True), (0.48, False)):
        res = {"variants": {"ot-0.3": summarize_variant([ot(m1), ot(m1)])}}
        preds = check_predictions(res)
        assert len(preds) == 2 and preds[1].holds  # degrades: +0.5 bits/byte, G = 0.38
        assert preds[0].claim.startswith("window mass lost") and preds[0].holds is want


def test_write_json_atomic_leaves_no_partial_file(tmp_path):
    out = tmp_path / "r.json"
    write_json_atomic({"a": 1}, out)
    with pytest.raises(TypeError):
        write_json_atomic({"a": object()}, out)  # not serialisable: old file survives
    assert json.loads(out.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--seeds", "x"], "not an integer"),
        (["--seeds", "1,1"], "distinct"),
        (["--variants", "bogus"], "variant must be one of"),
        (["--steps", "0"], "must be >= 1"),
        (["--device", "nonsense"], "--device"),
        (["--device", "cuda"] if not torch.cuda.is_available() else ["--steps", "-1"], ""),
        (["--unknown"], "unrecognized"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m proofs_check.extrapolation: error")
    assert match in err


def _refused_before_work(argv, tmp_path, capsys, match):
    """``main(argv)`` exits 2 with one line naming the problem and has done no work: the
    cache directory it was given was never created."""
    cache = tmp_path / "never-created"
    assert main([*argv, "--cache-dir", str(cache)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m proofs_check.extrapolation: error")
    assert match in err, err
    assert not cache.exists()


@pytest.mark.parametrize(
    "option, value, match",
    [
        ("--figure", "fig.xyz", "--figure: cannot write 'fig.xyz': the name must end in"),
        ("--figure", "", "--figure: empty path"),
        ("--out", "", "--out: empty path"),
        ("--out", "missing-dir/r.json", "missing-dir' does not exist"),
        ("--out", ".", "--out: '.' is a directory, not a regular file"),
        ("--out", "/proc/r.json", "cannot write in"),  # not writable, even by root
        ("--device", "meta", "must be cpu or cuda"),
    ],
)
def test_bad_output_or_device_is_refused_before_any_work(option, value, match, tmp_path,
                                                         capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _refused_before_work(["--quick", option, value], tmp_path, capsys, match)


def test_cache_dir_naming_a_file_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["--quick", "--cache-dir", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cache-dir:" in err and "not a directory" in err
    assert blocker.read_text() == "x"


def _special_files(tmp_path):
    """A FIFO, a dangling link and (where mknod is permitted) a character device made
    here, so that a failing check could only ever replace these."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    out = [(fifo, stat.S_ISFIFO), (link, stat.S_ISLNK)]
    try:
        dev = tmp_path / "null-device"
        os.mknod(dev, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        out.append((dev, stat.S_ISCHR))
    except PermissionError:  # not root: the FIFO and the link still cover the check
        pass
    return out


@pytest.mark.parametrize("option", ["--out", "--figure"])
def test_special_files_are_never_replaced(option, tmp_path, capsys):
    for path, is_kind in _special_files(tmp_path):
        target = str(path) + ("" if option == "--out" or path.suffix else ".png")
        if target != str(path):
            os.rename(path, target)
        _refused_before_work(["--quick", option, target], tmp_path, capsys, f"{option}: ")
        assert is_kind(os.lstat(target).st_mode)


def test_atomic_writer_refuses_to_replace_a_fifo(tmp_path):
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        write_json_atomic({"a": 1}, fifo, "--out")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_end_to_end_tiny_run_on_cpu(corpus_root, tmp_path, capsys):
    out, fig = tmp_path / "res.json", tmp_path / "fig7.png"
    argv = ["--quick", "--variants", "alibi,nope", "--seeds", "0", "--steps", "3",
            "--windows", "1", "--device", "cpu", "--corpus-root", str(corpus_root),
            "--cache-dir", str(tmp_path / "cache"), "--details", "--out", str(out),
            "--figure", str(fig)]
    assert main(argv) == 0
    res = json.loads(out.read_text())
    assert res["device"] == "cpu" and fig.stat().st_size > 0
    assert set(res["variants"]) == {"alibi", "nope"}
    v = res["variants"]["alibi"]
    assert [e["length"] for e in v["per_length"]] == [64, 128, 256, 512, 1024, 2048]
    assert v["classes"] == ["summable"] and res["variants"]["nope"]["classes"] == ["dilutes"]
    printed = capsys.readouterr().out
    assert "predictions" in res and "window W = 16" in printed and "bracket full" in printed
    # a second run reuses the cached evaluations: identical numbers
    assert main(argv[:-2]) == 0
    assert json.loads(out.read_text())["variants"] == res["variants"]
    # two worker processes (fresh cache) compute the same numbers as one process
    out2 = tmp_path / "res2.json"
    cut = argv.index("--cache-dir")
    argv2 = [*argv[:cut], "--cache-dir", str(tmp_path / "cache2"), "--jobs", "2",
             "--out", str(out2)]
    assert main(argv2) == 0
    assert json.loads(out2.read_text())["variants"] == res["variants"]
    # --cached-only summarises the finished runs only: seed 1 was never trained
    argv3 = [*argv[:-2], "--seeds", "0,1", "--cached-only"]
    assert main(argv3) == 0
    part = json.loads(out.read_text())
    assert part["partial"] is True and part["variants"]["alibi"]["seed_list"] == [0]
    assert part["variants"]["alibi"]["per_length"] == res["variants"]["alibi"]["per_length"]


def test_module_runs_as_a_script():
    proc = subprocess.run(
        [sys.executable, "-m", "proofs_check.extrapolation", "--seeds", "-3"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_fig7_draws_the_committed_quick_results_on_a_paper_column():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from proofs_check.extrapolation.figure import fig7_data, load_results, plot_fig7

    data = fig7_data(load_results(REPO / "benchmarks" / "extrapolation_quick.json"))
    fig = Figure(figsize=(3.5, 5.2), layout="constrained")
    FigureCanvasAgg(fig)
    plot_fig7(data, fig)
    ax_l, ax_m = fig.axes
    assert ax_l.get_position().y0 > ax_m.get_position().y0  # stacked on a narrow figure
    assert len(ax_m.lines) == 2 * len(data["variants"])  # measured and exact per prior
    for d in data["variants"].values():
        assert d["change"][0] == 0.0 and len(d["length"]) == len(d["window_mass"])

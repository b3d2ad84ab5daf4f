"""The experiment's corpus, results, predictions, figure and command line (CI size).

The end-to-end run uses a generated corpus of a few hundred KB (``--corpus-root``), one
seed, three training steps and one held-out window: it checks the plumbing (device
argument, atomic results, cache reuse, figure), not the science; the science is the slow
test in ``test_extrapolation_slow.py``.
"""

from __future__ import annotations

import hashlib
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
    is_heldout,
    load_corpus,
    window_ends,
)
from proofs_check.extrapolation.experiment import QUICK, with_overrides
from proofs_check.extrapolation.lossmodel import Z90, LossModel
from proofs_check.extrapolation.predictions import check, register
from proofs_check.extrapolation.results import bootstrap_mean, write_json_atomic
from proofs_check.extrapolation.variants import parse_variant, parse_variants

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
    # the spans locate each held-out file's bytes in the held-out stream, in order
    assert len(c1.heldout_spans) == len(held)
    for rel, (a, b) in zip(held, c1.heldout_spans, strict=True):
        assert c1.heldout[a:b].tobytes() == (corpus_root / rel).read_bytes()
    # the results say which corpus: this root, not the standard library
    assert c1.describe()["root"] == str(corpus_root)
    assert "--corpus-root" in c1.describe()["source"]


def test_window_ends_spread_over_files_with_targets_inside():
    spans = [(0, 50), (51, 400), (401, 420), (421, 900), (901, 1500), (1501, 2000)]
    ends, files = window_ends(spans, 3, max_context=300, score_bytes=16)
    # eligible: files of >= 17 bytes whose last byte is >= 300 -> 1..5; spread: 1, 3, 5
    assert files.tolist() == [1, 3, 5]
    for e, f in zip(ends.tolist(), files.tolist(), strict=True):
        a, b = spans[f]
        assert a <= e - 15 and e <= b - 1 and e >= 300  # targets inside, context available
    assert ends.tolist() == sorted(ends.tolist())
    again = window_ends(spans, 3, max_context=300, score_bytes=16)
    assert np.array_equal(again[0], ends) and np.array_equal(again[1], files)
    ends9, files9 = window_ends(spans, 9, max_context=300, score_bytes=16)
    assert np.bincount(files9, minlength=6).tolist() == [0, 2, 2, 2, 2, 1]
    assert len(set(ends9.tolist())) == 9  # several windows in a file are distinct
    with pytest.raises(ValueError, match="no held-out file"):
        window_ends(spans, 2, max_context=5000, score_bytes=16)


def test_bootstrap_se_matches_the_analytic_standard_errors():
    """The two-way bootstrap against closed forms: independent windows (one per file,
    one seed): se = sqrt((N-1)/N) sd / sqrt(N); windows that repeat within a file count
    once per file (the naive window count would halve the error: the negative control);
    seeds alone: sqrt((S-1)/S) sd_seeds / sqrt(S). Tolerance 6%: the standard error of a
    2000-replicate bootstrap estimate of an se is about 1/sqrt(2 * 2000) = 1.6%."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, 64)
    got = bootstrap_mean(x[None, :], list(range(64)))
    want = np.sqrt(63 / 64) * x.std(ddof=1) / 8
    assert abs(got["se"] / want - 1) < 0.06 and got["mean"] == pytest.approx(x.mean())
    assert got["ci95"][0] < x.mean() < got["ci95"][1]
    clustered = np.repeat(x[:16], 4)  # 16 files of 4 identical windows
    got = bootstrap_mean(clustered[None, :], np.repeat(np.arange(16), 4).tolist())
    want = np.sqrt(15 / 16) * x[:16].std(ddof=1) / 4
    assert abs(got["se"] / want - 1) < 0.06
    naive = clustered.std(ddof=1) / 8
    assert got["se"] > 1.6 * naive  # counting windows would understate the error
    seeds = rng.normal(0, 1, 5)
    got = bootstrap_mean(np.repeat(seeds[:, None], 8, axis=1), list(range(8)))
    want = np.sqrt(4 / 5) * seeds.std(ddof=1) / np.sqrt(5)
    assert abs(got["se"] / want - 1) < 0.06


def _tiny_cfg(**kw):
    base = with_overrides(QUICK, steps=3, n_windows=2, longest=256)
    return with_overrides(base, **kw)


def _fake_variant(cfg, name, *, change=0.0, se=0.01, lost=0.0, lost_se=0.01, classes=None,
                  accuracy=0.5):
    v = parse_variant(name)
    encs = v.constant_score_priors(cfg.n_heads, v.exponent(cfg.window, cfg.design_length))
    per_length = []
    for n in cfg.lengths:
        mass = float(np.mean([float(e.window_mass(cfg.window, n)) for e in encs]))
        per_length.append({"length": n, "change": change if n > cfg.train_length else 0.0,
                           "se": se, "exact_window_mass": mass})
    return {"per_length": per_length, "window_mass_lost": lost, "window_mass_lost_se": lost_se,
            "classes": classes or sorted({e.classify().label for e in encs}),
            "probe": [{"distances": [16, 64, 256, 1024, 2046], "accuracy": [accuracy] * 5}]}


def test_registered_mass_claims_can_fail():
    """Negative controls: a diluting prior whose measured window mass does not fall, and a
    summable one whose distant mass grows by 0.3, fail their registered claims."""
    cfg = _tiny_cfg(variants=("nope", "logd-2", "margin-0.1"))
    reg = register(cfg)
    for lost_nope, lost_logd, lost_margin, want in ((0.2, 0.0, 0.05, True),
                                                    (0.0, 0.3, 0.3, False)):
        res = {"config": cfg.to_dict(), "variants": {
            "nope": _fake_variant(cfg, "nope", change=0.5, lost=lost_nope),
            "logd-2": _fake_variant(cfg, "logd-2", lost=lost_logd),
            "margin-0.1": _fake_variant(cfg, "margin-0.1", lost=lost_margin)}}
        verdicts = {v.id: v for v in check(reg, res)}
        assert verdicts["nope/mass"].holds is want
        assert verdicts["logd-2/mass"].holds is want
        assert verdicts["margin-0.1/mass"].holds is want
        assert verdicts["margin-0.1/mass"].bound == f"<= {0.1 + 0.03:.4f}"  # tol + 3 se
        assert verdicts["nope/loss"].holds  # +0.5 > 3 se


def test_registered_loss_intervals_come_from_the_model_and_skip_fitted_points():
    cfg = _tiny_cfg(variants=("logd-0.8", "logd-1.4"))
    model = LossModel((0.0, 0.5, 0.0), ((1e-6, 0, 0), (0, 1e-6, 0), (0, 0, 1e-6)), 0.01,
                      {"variants": ["logd-0.8"], "lengths": [128, 256]})
    reg = register(cfg, loss_model=model)
    ids = {c["id"] for c in reg["claims"]}
    assert "logd-1.4/loss@128" in ids and "logd-0.8/loss@128" not in ids  # fitted: in sample
    claim = next(c for c in reg["claims"] if c["id"] == "logd-1.4/loss@256")
    lam = reg["priors"]["logd-1.4"]["dilution"]["256"]
    assert claim["predicted"] == pytest.approx(0.5 * lam, rel=1e-12)
    half = Z90 * np.hypot(claim["sd"], 0.01)
    for offset, want in ((0.9 * half, True), (1.1 * half, False), (-1.1 * half, False)):
        v = _fake_variant(cfg, "logd-1.4", change=claim["predicted"] + offset)
        res = {"config": cfg.to_dict(), "variants": {"logd-1.4": v}}
        verdict = next(x for x in check(reg, res) if x.id == "logd-1.4/loss@256")
        assert verdict.holds is want, offset


def test_rank_claims_follow_the_order_not_the_size():
    cfg = _tiny_cfg(variants=("alibi", "logd-0.8", "logd-1.2", "logd-2"))
    reg = register(cfg)
    lam = {n: reg["priors"][n]["dilution"]["256"] for n in ("logd-0.8", "logd-1.2", "logd-2")}
    for sign, want in ((1, True), (-1, False)):
        res = {"config": cfg.to_dict(), "variants": {
            n: _fake_variant(cfg, n, change=sign * 0.1 * lam.get(n, 0.0) + 1e-4 * k,
                             accuracy=1.0 - 0.2 * k * sign)
            for k, n in enumerate(("alibi", "logd-2", "logd-1.2", "logd-0.8"))}}
        verdicts = {v.id: v for v in check(reg, res)}
        assert verdicts["rank/loss"].holds is want


def test_check_refuses_results_made_with_other_settings():
    cfg = _tiny_cfg(variants=("nope", "alibi", "logd-2"))
    res = {"config": {**cfg.to_dict(), "steps": 4}, "variants": {}}
    with pytest.raises(ValueError, match="steps"):
        check(register(cfg), res)


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
        (["run", "--seeds", "x"], "must be an integer"),
        (["run", "--seeds", "1,1"], "distinct"),
        (["run", "--variants", "bogus"], "variant must be one of"),
        (["run", "--variants", "alibi,alibi"], "distinct"),
        (["run", "--steps", "0"], "must be >= 1"),
        (["run", "--threads", "1000000"], "<= 1024"),  # torch hangs at a million threads
        (["run", "--jobs", "1025"], "<= 1024"),
        (["run", "--device", "nonsense"], "--device"),
        (["run", "--device", "cuda"] if not torch.cuda.is_available()
         else ["run", "--steps", "-1"], ""),
        (["run", "--unknown"], "unrecognized"),
        (["run", "--preset", "quick", "--longest", "100"], "power of 2"),
        (["run", "--preset", "quick", "--longest", "8192"], "max_context"),
        (["run", "--registered", "/nonexistent/reg.json"], "--registered"),
        (["register"], "required"),
        (["fit", "--results", "/nonexistent/r.json", "--out", "m.json"], "does not exist"),
        (["check", "--results", "/dev/zero", "--registered", "x.json"], "--registered"),
        ([], "required"),
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
    _refused_before_work(["run", "--preset", "quick", option, value], tmp_path, capsys, match)


def test_cache_dir_naming_a_file_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["run", "--preset", "quick", "--cache-dir", str(blocker / "sub")]) == 2
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
        _refused_before_work(["run", "--preset", "quick", option, target], tmp_path, capsys,
                             f"{option}: ")
        assert is_kind(os.lstat(target).st_mode)


def test_atomic_writer_refuses_to_replace_a_fifo(tmp_path):
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        write_json_atomic({"a": 1}, fifo, "--out")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


_COMMON = ["--preset", "quick", "--variants", "alibi,logd-2,logd-1.0,nope", "--seeds", "0",
           "--steps", "3", "--windows", "2", "--longest", "256"]


@pytest.fixture(scope="module")
def tiny_run(corpus_root, tmp_path_factory):
    """register, then run against the registration, on the generated corpus: one seed,
    three training steps, two held-out windows, lengths 64..256 (the plumbing, not the
    science: the science is the slow test and the committed runs)."""
    tmp = tmp_path_factory.mktemp("run")
    reg, out = tmp / "reg.json", tmp / "res.json"
    assert main(["register", *_COMMON, "--out", str(reg)]) == 0
    argv = ["run", *_COMMON, "--device", "cpu", "--corpus-root", str(corpus_root),
            "--cache-dir", str(tmp / "cache"), "--registered", str(reg), "--out", str(out)]
    assert main([*argv, "--details", "--figure", str(tmp / "fig7.png")]) == 0
    return {"tmp": tmp, "reg": reg, "out": out, "argv": argv,
            "results": json.loads(out.read_text())}


def test_tiny_run_writes_the_paired_design(tiny_run):
    res = tiny_run["results"]
    assert res["device"] == "cpu" and (tiny_run["tmp"] / "fig7.png").stat().st_size > 0
    assert set(res["variants"]) == {"alibi", "logd-2", "logd-1.0", "nope"}
    v = res["variants"]["alibi"]
    assert [e["length"] for e in v["per_length"]] == [64, 128, 256]
    assert v["classes"] == ["summable"] and res["variants"]["nope"]["classes"] == ["dilutes"]
    for e in v["per_length"]:  # the change is against the sliding baseline, per seed stored
        got = np.mean(e["bpb_by_seed_window"]) - np.mean(v["baseline_bpb_by_seed_window"])
        assert e["change"] == pytest.approx(got, abs=1e-12)
        assert len(e["change_by_seed"]) == 1 and e["ci95"][0] <= e["change"] <= e["ci95"][1]
    assert [p["length"] for p in v["probe"]] == [64, 2048]
    assert v["probe"][1]["distances"] == [16, 64, 256, 1024, 2046]
    assert res["windows"]["distinct_files"] >= 1 and len(res["windows"]["ends"]) == 2
    verdicts = res["registered"]["verdicts"]
    assert {d["id"] for d in verdicts} >= {"alibi/mass", "nope/mass", "nope/loss",
                                           "rank/loss", "rank/retrieval"}
    digest = hashlib.sha256(tiny_run["reg"].read_bytes()).hexdigest()
    assert res["registered"]["sha256"] == digest


def test_cache_reuse_longer_lengths_and_parallel_runs_agree(tiny_run, tmp_path):
    argv, out = tiny_run["argv"], tiny_run["out"]
    runs = tiny_run["tmp"] / "cache" / "runs"
    ckpts = {p: p.stat().st_mtime_ns for p in runs.glob("*/ckpt.pt")}
    assert main(argv) == 0  # everything cached: the same numbers, nothing trained
    assert json.loads(out.read_text())["variants"] == tiny_run["results"]["variants"]
    longer = [a if a != "256" else "512" for a in argv]
    longer = [*longer[: longer.index("--registered")], "--out", str(tmp_path / "long.json")]
    assert main(longer) == 0  # one more length: evaluated, not retrained
    assert {p: p.stat().st_mtime_ns for p in runs.glob("*/ckpt.pt")} == ckpts
    long = json.loads((tmp_path / "long.json").read_text())["variants"]["logd-1.0"]
    short = tiny_run["results"]["variants"]["logd-1.0"]
    assert [e["length"] for e in long["per_length"]] == [64, 128, 256, 512]
    assert long["per_length"][:3] == short["per_length"]
    cut = argv.index("--cache-dir")
    par = [*argv[:cut], "--cache-dir", str(tmp_path / "cache2"), "--jobs", "2",
           "--out", str(tmp_path / "par.json")]
    assert main(par) == 0  # two worker processes, fresh cache: the same numbers
    got = json.loads((tmp_path / "par.json").read_text())["variants"]
    assert got == tiny_run["results"]["variants"]
    only = [a if a != "0" else "0,1" for a in argv[: argv.index("--registered")]]
    only += ["--cached-only", "--out", str(tmp_path / "part.json")]
    assert main(only) == 0  # seed 1 was never trained: a partial summary of seed 0
    part = json.loads((tmp_path / "part.json").read_text())
    assert part["partial"] is True and part["variants"]["alibi"]["seed_list"] == [0]


def test_fit_then_register_then_check(tiny_run, tmp_path, capsys):
    model = tmp_path / "model.json"
    assert main(["fit", "--results", str(tiny_run["out"]), "--out", str(model)]) == 0
    fitted = json.loads(model.read_text())
    assert fitted["fitted_on"]["variants"] == ["alibi", "logd-1.0", "logd-2"]  # file order
    assert fitted["fitted_on"]["lengths"] == [128, 256]
    reg2 = tmp_path / "reg2.json"
    common = [a if a != "256" else "512" for a in _COMMON]
    assert main(["register", *common, "--loss-model", str(model), "--out", str(reg2)]) == 0
    claims = {c["id"]: c for c in json.loads(reg2.read_text())["claims"]}
    assert "logd-1.0/loss@512" in claims and "logd-1.0/loss@256" not in claims
    capsys.readouterr()
    assert main(["check", "--results", str(tiny_run["out"]), "--registered",
                 str(tiny_run["reg"])]) == 0
    printed = capsys.readouterr().out
    assert "registered predictions" in printed and "rank/loss" in printed
    # a registration of other settings is refused before the run
    assert main([*tiny_run["argv"][:-2], "--steps", "4", "--registered", str(reg2)]) == 2


def test_module_runs_as_a_script():
    proc = subprocess.run(
        [sys.executable, "-m", "proofs_check.extrapolation", "run", "--seeds", "-3"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_fig7_colours_follow_names_and_panels_group_families(tiny_run):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from proofs_check.extrapolation.figure import fig7_data, plot_fig7, variant_colour

    res = tiny_run["results"]
    data = fig7_data(res)
    shuffled = {**res, "variants": dict(reversed(list(res["variants"].items())))}
    assert fig7_data(shuffled)["variants"] == data["variants"]  # order does not matter
    assert data["variants"]["alibi"]["colour"] == variant_colour("alibi")
    assert variant_colour("alibi") != variant_colour("alibi-x0.25")
    fig = Figure(figsize=(3.5, 7), layout="constrained")
    FigureCanvasAgg(fig)
    plot_fig7(data, fig)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any(t.startswith("(a)") for t in titles) and any(t.startswith("(c)") for t in titles)
    assert sum(t.startswith("(b)") for t in titles) == 4  # one panel per family


_TINY_FLAGS = ["--preset", "quick", "--steps", "3", "--windows", "2", "--longest", "256",
               "--variants", "nope,alibi,logd-0.8,logd-1.2,logd-2", "--seeds", "0"]


def _garble(doc, how):
    """A copy of the registration ``doc`` with one claim broken as ``how`` says."""
    doc = json.loads(json.dumps(doc))
    claims = doc["claims"]
    kinds = [c["kind"] for c in claims]
    if how == "not-an-object":
        claims.append(5)
    elif how == "unknown-kind":
        claims[0]["kind"] = "mass-vanishes"
    elif how == "no-length":
        del claims[kinds.index("mass-dilutes")]["length"]
    elif how == "point-of-two":
        claims[kinds.index("rank-loss")]["points"][0] = ["alibi", 128]
    elif how == "weights-short":
        claims[kinds.index("rank-retrieval")]["log_weight"].pop()
    return doc


@pytest.fixture(scope="module")
def tiny_registration():
    """The registration of ``_TINY_FLAGS`` (the priors only: no training), with a claim
    of every kind that ``check`` reads except the loss model's."""
    flags = dict(zip(_TINY_FLAGS[::2], _TINY_FLAGS[1::2], strict=True))
    cfg = _tiny_cfg(variants=parse_variants(flags["--variants"].split(",")), seeds=(0,))
    reg = register(cfg)
    assert {"mass-dilutes", "rank-loss", "rank-retrieval"} <= {c["kind"] for c in reg["claims"]}
    return reg


@pytest.mark.parametrize("how", ["not-an-object", "unknown-kind", "no-length", "point-of-two",
                                 "weights-short"])
def test_garbled_registration_is_refused_before_any_work(how, tiny_registration, tmp_path,
                                                         capsys):
    """A registration whose claims ``check`` cannot read is bad input, refused by ``run``
    before it trains (no cache directory made, no results written) and by ``check``: one
    line, exit 2, never a traceback after hours of training."""
    reg = tmp_path / "reg.json"
    reg.write_text(json.dumps(_garble(tiny_registration, how)))
    out = tmp_path / "res.json"
    _refused_before_work(["run", *_TINY_FLAGS, "--cached-only", "--registered", str(reg),
                          "--out", str(out)], tmp_path, capsys, "--registered: ")
    assert not out.exists()
    res = tmp_path / "results.json"
    res.write_text(json.dumps({"config": tiny_registration["config"], "variants": {}}))
    assert main(["check", "--results", str(res), "--registered", str(reg)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--registered: " in err and "not a registration" in err


@pytest.mark.parametrize("variant, check_reads_it", [
    ({"per_length": [1, 2]}, True),
    ({}, True),
    ({"per_length": [{"length": 256}]}, True),  # the registered length, nothing measured
    ({"per_length": [{"length": 64}]}, False),  # no registered length: check skips it
    ({"per_length": [{"length": 128, "dilution": None, "change": 0.0, "se": 0.1}]}, False),
])
def test_check_and_fit_refuse_garbled_results(variant, check_reads_it, tiny_registration,
                                              tmp_path, capsys):
    """A results file with the registered settings whose entry of ``alibi`` is not what
    ``run`` writes: ``fit`` (and ``check``, where it reads the entry) gives one line and
    exit 2, and ``fit`` writes no loss model."""
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"config": tiny_registration["config"],
                               "variants": {"alibi": variant}}))
    reg = tmp_path / "reg.json"
    reg.write_text(json.dumps(tiny_registration))
    model = tmp_path / "model.json"
    commands = [["fit", "--results", str(res), "--out", str(model)]]
    if check_reads_it:
        commands.append(["check", "--results", str(res), "--registered", str(reg)])
    for argv in commands:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--results: " in err and "not a results file" in err
    assert not model.exists()


def test_check_refuses_results_whose_windows_are_no_object(tiny_registration, tmp_path,
                                                          capsys):
    """``windows`` (the held-out files the bootstrap resamples) that is not an object: one
    line and exit 2, not an AttributeError."""
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"config": tiny_registration["config"], "variants": {},
                               "windows": 5}))
    reg = tmp_path / "reg.json"
    reg.write_text(json.dumps(tiny_registration))
    assert main(["check", "--results", str(res), "--registered", str(reg)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--results: " in err and "not a results file" in err


@pytest.mark.parametrize("config", [{}, {"design_length": "2048"}])
def test_fit_refuses_results_without_a_design_length(config, tmp_path, capsys):
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"config": config, "variants": {}}))
    assert main(["fit", "--results", str(res), "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "['config']" in err and "design_length" in err
    assert not (tmp_path / "m.json").exists()


def _loss_model_doc(**changes):
    """A loss model document as ``fit`` writes it (``LossModel.to_dict``), with ``changes``."""
    model = LossModel((0.0, 0.1, 0.0), ((1e-6, 0, 0), (0, 1e-6, 0), (0, 0, 1e-6)), 0.01,
                      {"variants": ["alibi"], "lengths": [128], "source_variants": ["alibi"]})
    return {**model.to_dict(), **changes}


@pytest.mark.parametrize("changes, match", [
    ({"fitted_on": {"variants": 5, "lengths": [128]}}, "['fitted_on']['variants']"),
    ({"fitted_on": {"variants": ["alibi"], "lengths": 128}}, "['fitted_on']['lengths']"),
    ({"fitted_on": {"source_variants": [["alibi"]]}}, "['fitted_on']['source_variants'][0]"),
    ({"coef": ["0", "0.1", "0"]}, "['coef'][0] must be a number"),
    ({"tau": 1e200}, "not finite"),  # tau^2 overflows: every interval infinite
    # x' Cov x = 1.7e308 (1 + Lambda + Lambda^2)^2 overflows at logd-1.0's Lambda = 0.23
    ({"cov": [[1.7e308] * 3] * 3}, "not finite"),
])
def test_register_refuses_a_garbled_loss_model(changes, match, tmp_path, capsys):
    """A loss model ``fit`` did not write (its ``fitted_on`` not lists of names and lengths,
    numbers as strings, or numbers whose predictions overflow) is refused by name before a
    registration is written: one line, exit 2, never a traceback or a file with NaN."""
    model = tmp_path / "model.json"
    model.write_text(json.dumps(_loss_model_doc(**changes)))
    out = tmp_path / "reg.json"
    argv = ["register", "--preset", "quick", "--steps", "3", "--windows", "2", "--longest",
            "256", "--variants", "alibi,logd-2,logd-1.0", "--loss-model", str(model),
            "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--loss-model: " in err and match in err, err
    assert not out.exists()


@pytest.mark.parametrize("scale", [1e200, 1e100])
def test_fit_refuses_dilutions_that_overflow(scale, tmp_path, capsys):
    """Dilutions whose square (1e200) or whose normal equations (1e100: Lambda^4 = 1e400)
    overflow float64 give no finite fit: ``fit`` says so in one line (exit 2) and writes no
    model, instead of a traceback from writing NaN into JSON."""
    def per_length(step):
        return [{"length": 64, "dilution": 0.0, "change": 0.0, "se": 0.01}] + [
            {"length": n, "dilution": step * k, "change": 0.01 * k, "se": 0.01}
            for k, n in enumerate((128, 256, 512), 1)]

    res = tmp_path / "res.json"
    res.write_text(json.dumps({"config": {"design_length": 512}, "variants": {
        "alibi": {"per_length": per_length(scale)},
        "logd-2": {"per_length": per_length(2 * scale)}}}))
    model = tmp_path / "model.json"
    assert main(["fit", "--results", str(res), "--out", str(model)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--results: " in err and "finite" in err, err
    assert not model.exists()


def test_an_output_naming_an_input_or_another_output_is_refused(tiny_registration, tmp_path,
                                                                capsys):
    """``--out`` (or ``--figure``) naming the file the command reads (the registration, the
    results, the loss model: by the same path, a symbolic or a hard link) or its other
    output is bad input before any work; the input is left byte for byte as it was."""
    reg = tmp_path / "reg.json"
    reg.write_text(json.dumps(tiny_registration))
    (tmp_path / "reg-link.json").symlink_to(reg)
    os.link(reg, tmp_path / "reg-hard.json")
    before = reg.read_bytes()
    for out in ("reg.json", "reg-link.json", "reg-hard.json"):
        _refused_before_work(["run", *_TINY_FLAGS, "--cached-only", "--registered", str(reg),
                              "--out", str(tmp_path / out)], tmp_path, capsys,
                             "--out and --registered name the same file")
    _refused_before_work(["run", *_TINY_FLAGS, "--cached-only", "--out",
                          str(tmp_path / "r.png"), "--figure", str(tmp_path / "r.png")],
                         tmp_path, capsys, "--figure and --out name the same file")
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"config": {"design_length": 512}, "variants": {}}))
    model = tmp_path / "model.json"
    model.write_text(json.dumps(_loss_model_doc()))
    for argv, match in (
            (["fit", "--results", str(res), "--out", str(res)], "--out and --results"),
            (["register", *_TINY_FLAGS[:-4], "--loss-model", str(model), "--out", str(model)],
             "--out and --loss-model")):
        kept = Path(argv[argv.index("--out") + 1]).read_bytes()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and match in err, err
        assert Path(argv[argv.index("--out") + 1]).read_bytes() == kept
    assert reg.read_bytes() == before


@pytest.mark.parametrize("names", ["logd-1.0,logd-1", "margin-0.10,margin-0.1",
                                   "kerple-2-0.02,kerple-2.0-0.020", "ot-0.5,ot-0.50"])
def test_two_spellings_of_one_variant_are_refused(names, tmp_path, capsys):
    """Two names of one variant (the same kind and numbers) would train it twice and count
    it twice in the rank claims: ``--variants`` refuses them as it refuses a repeated
    name, before any work."""
    out = tmp_path / "reg.json"
    argv = ["register", "--preset", "quick", "--steps", "3", "--windows", "2", "--longest",
            "128", "--variants", names, "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--variants" in err and "same variant" in err, err
    assert not out.exists()
    first, second = (parse_variant(n) for n in names.split(","))
    assert (first.kind, first.params) == (second.kind, second.params)  # one variant indeed

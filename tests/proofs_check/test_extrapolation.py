"""CI-size tests of proofs_check.extrapolation (docs/theory.md §5, §7).

Every model here is tiny (d_model 8, 2 heads, at most a few hundred positions), so the
whole file runs in seconds. Tolerances: the model computes in float32; a softmax row of
at most 256 keys sums float32 probabilities with a relative rounding of about 6e-8 per
addition, so 1e-5 on a mass is about a hundred roundings of headroom and still far below
the differences the negative controls produce (> 1e-3).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from priors.encodings import ALiBi, KerpleLog, LogDistance, NoPE
from proofs_check.extrapolation.evaluate import (
    bracket,
    evaluate_baseline,
    evaluate_length,
    prior_masses,
)
from proofs_check.extrapolation.model import ByteTransformer, ModelConfig
from proofs_check.extrapolation.train import TrainConfig, batch_at, lr_at, train
from proofs_check.extrapolation.variants import (
    DEFAULT_VARIANTS,
    HELDOUT_VARIANTS,
    fixed_t5_table,
    parse_variant,
)

MASS_TOL = 1e-5  # float32 probability sums, see the module docstring

TINY = {"d_model": 8, "n_layers": 2, "n_heads": 2}


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread on the shared CI cores, restored afterwards (no leaked state)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny(variant: str, **kw) -> ByteTransformer:
    v = parse_variant(variant)
    torch.manual_seed(kw.pop("seed", 0))
    return ByteTransformer(ModelConfig(v, exponent=v.exponent(8, 256), **{**TINY, **kw}))


def zero_attention_scores(model: ByteTransformer) -> None:
    """Zero the query and key projections: content scores s = 0 exactly."""
    dm = model.cfg.d_model
    with torch.no_grad():
        for blk in model.blocks:
            blk.attn.qkv.weight[: 2 * dm].zero_()


@pytest.mark.parametrize("variant", DEFAULT_VARIANTS + HELDOUT_VARIANTS)
def test_forward_shapes_and_records(variant):
    model = tiny(variant)
    x = torch.randint(0, 256, (3, 17))
    logits, recs = model(x, record_rows=4)
    assert logits.shape == (3, 17, 256)
    assert len(recs) == 2
    for rec in recs:
        assert rec["attn"].shape == rec["scores"].shape == (3, 2, 4, 17)
        # rows are probability vectors over keys j <= l (row r is query l = 17 - 4 + r + 1)
        torch.testing.assert_close(rec["attn"].sum(-1), torch.ones(3, 2, 4), atol=1e-6, rtol=0)
        assert torch.all(rec["attn"][:, :, 0, 14:] == 0)


def _model_bias(model: ByteTransformer, n: int) -> np.ndarray:
    return model.pos(n, torch.device("cpu"), torch.float64).detach().numpy()


def test_alibi_and_log_distance_biases_match_closed_forms():
    n = 40
    d = np.arange(n)[:, None] - np.arange(n)[None, :]
    below = d >= 0
    slopes = [2.0 ** -4, 2.0 ** -8]  # ALiBi slopes 2^(-8h/H), h = 1..H, for H = 2
    b = _model_bias(tiny("alibi"), n)
    for h, m in enumerate(slopes):
        np.testing.assert_allclose(b[h][below], -m * d[below], rtol=1e-15, atol=0)
        assert np.all(np.isneginf(b[h][~below]))
    for variant, alpha in (("logd-0.8", 0.8), ("logd-2", 2.0)):
        b = _model_bias(tiny(variant), n)
        np.testing.assert_allclose(b[0][below], -alpha * np.log1p(d[below]), rtol=1e-14)


def test_margin_exponent_is_the_theory_reference():
    # docs/theory.md §7 table: W = 64, L1 = 4096, tau = 0.1 -> delta* = 0.4589094374 (10 digits)
    variant = parse_variant("margin-0.1")
    alpha = variant.exponent(64, 4096)
    assert abs(alpha - 1.4589094374) < 1e-9
    model = ByteTransformer(ModelConfig(variant, exponent=alpha, **TINY))
    b = _model_bias(model, 20)
    np.testing.assert_allclose(b[1][5, :6], -alpha * np.log1p(np.arange(5, -1, -1)), rtol=1e-14)


def _t5_bucket_written_out(d: int) -> int:
    # unidirectional T5 buckets, 32 buckets, max_distance 128 (Raffel et al. 2020)
    if d < 16:
        return d
    return min(31, 16 + int(math.log(d / 16) / math.log(128 / 16) * 16))


def test_t5_and_kerple_biases_match_formulas():
    n = 300
    model = tiny("t5")
    table = torch.randn(2, 32, dtype=torch.float32)
    with torch.no_grad():
        model.pos.table.copy_(table)
    b = _model_bias(model, n)
    for h in range(2):
        want = np.array([table[h, _t5_bucket_written_out(d)].item() for d in range(n)])
        np.testing.assert_array_equal(b[h][n - 1, ::-1], want)  # row l = n, d = n - j
    model = tiny("kerple-log")
    with torch.no_grad():
        model.pos.p1.copy_(torch.tensor([0.3, 1.2]))
        model.pos.p2.copy_(torch.tensor([-0.5, 0.7]))
    b = _model_bias(model, 50)
    d = np.arange(50, dtype=float)
    for h, (p1, p2) in enumerate(((0.3, -0.5), (1.2, 0.7))):
        r1, r2 = math.log1p(math.exp(p1)), math.log1p(math.exp(p2))
        np.testing.assert_allclose(b[h][49, ::-1], -r1 * np.log1p(r2 * d), rtol=1e-6)
        prior = model.pos.priors()[h]
        assert isinstance(prior, KerpleLog)
        np.testing.assert_allclose([prior.r1, prior.r2], [r1, r2], rtol=1e-6)


@pytest.mark.parametrize(
    "variant", ["nope", "rope", "alibi", "t5", "kerple-log", "margin-0.1", "ot-0.3"]
)
def test_causality_future_bytes_do_not_change_earlier_logits(variant):
    model = tiny(variant)
    x = torch.randint(0, 256, (2, 33))
    y = x.clone()
    y[:, 20:] = torch.randint(0, 256, (2, 13))
    lx, _ = model(x)
    ly, _ = model(y)
    # float32; the masked keys contribute exact zeros, so only summation order can differ
    torch.testing.assert_close(lx[:, :20], ly[:, :20], atol=1e-6, rtol=0)
    assert not torch.allclose(lx[:, 20:], ly[:, 20:], atol=1e-3)  # the check can fail


def _stream(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size).astype(np.uint8)


def _lengths(model: ByteTransformer, stream: np.ndarray, ends: np.ndarray, lengths: list[int],
             **kw) -> list[dict]:
    kw = {"window": 8, "train_length": 16, "score_bytes": 16, **kw}
    return [evaluate_length(model, stream, ends, n, **kw) for n in lengths]


def _bits_by_hand(model: ByteTransformer, rows: list[np.ndarray], targets: np.ndarray
                  ) -> np.ndarray:
    """Bits of each target after its row of inputs: one forward per row, float64 softmax."""
    out = []
    for x, t in zip(rows, targets, strict=True):
        with torch.no_grad():
            logits, _ = model(torch.as_tensor(np.asarray(x, dtype=np.int64))[None])
        out.append(-torch.log_softmax(logits[0, -1].double(), -1)[int(t)].item() / math.log(2))
    return np.asarray(out)


def test_every_length_scores_the_same_targets():
    """At each length L the last 16 bytes up to each window end are scored, read in one
    pass over stream[e - L : e]; the reference scores target t from stream[e - L : t]."""
    model = tiny("alibi")
    stream, ends = _stream(400), np.array([100, 250, 399])
    for entry in _lengths(model, stream, ends, [16, 32, 64]):
        length = entry["length"]
        for i, e in enumerate(ends):
            targets = np.arange(e - 15, e + 1)  # stream positions of the scored bytes
            rows = [stream[e - length : t] for t in targets]
            want = _bits_by_hand(model, rows, stream[targets]).mean()
            # float32 forwards of different lengths: 1e-5 bits is ~100 roundings
            assert abs(entry["bpb"][i] - want) < 1e-5, (length, i)
    # pairing: bytes more than 32 before the end change nothing at lengths 16 and 32
    other = stream.copy()
    other[:200] = other[:200] ^ 1  # flip the lowest bit: every byte differs
    a = _lengths(model, stream, np.array([250]), [16, 32, 64])
    b = _lengths(model, other, np.array([250]), [16, 32, 64])
    assert a[0]["bpb"] == b[0]["bpb"] and a[1]["bpb"] == b[1]["bpb"]
    assert a[2]["bpb"] != b[2]["bpb"]  # the check can fail


def test_sliding_baseline_gives_every_target_exactly_l0_bytes():
    model = tiny("logd-0.8")
    with torch.no_grad():  # large weights: the prediction depends on the context
        model.embed.weight.mul_(50.0)
        model.head.weight.mul_(100.0)  # logits of order 1, not 0.02: bits far from 8
        for blk in model.blocks:
            blk.attn.qkv.weight.mul_(20.0)
            blk.attn.proj.weight.mul_(50.0)  # the attended context moves the residual
    stream, ends = _stream(300), np.array([120, 299])
    base = evaluate_baseline(model, stream, ends, train_length=16, score_bytes=8)
    for i, e in enumerate(ends):
        targets = np.arange(e - 7, e + 1)
        want = _bits_by_hand(model, [stream[t - 16 : t] for t in targets], stream[targets])
        assert abs(base["bpb"][i] - want.mean()) < 1e-4  # batched vs one-by-one float32
        # negative control: 15 bytes of context (one too few) give another number
        short = _bits_by_hand(model, [stream[t - 15 : t] for t in targets], stream[targets])
        assert abs(base["bpb"][i] - short.mean()) > 1e-3


@pytest.mark.parametrize(
    "variant", ["nope", "rope", "alibi", "alibi-x0.25", "t5", "t5-1.5", "kerple-log",
                "kerple-2-0.02", "logd-0.8", "margin-0.1"]
)
def test_untrained_zero_score_window_mass_equals_exact_prior(variant):
    """With s = 0 the attention is the prior itself: the measured window mass (a float32
    softmax sum) must equal S_W / S_l computed by priors (closed forms / Hurwitz zeta)."""
    model = tiny(variant)
    if variant == "t5":
        with torch.no_grad():
            model.pos.table.copy_(torch.linspace(2.0, -3.0, 32).repeat(2, 1))
    zero_attention_scores(model)
    priors = model.pos.priors()
    for entry in _lengths(model, _stream(600), np.array([300, 599]), [32, 64, 256]):
        measured = np.asarray(entry["window_mass"])  # (layers, H)
        exact = np.array([float(p.window_mass(8, entry["length"])) for p in priors])
        np.testing.assert_allclose(measured, np.broadcast_to(exact, measured.shape),
                                   atol=MASS_TOL, rtol=0)
        # the full-spread bracket degenerates to the prior (B = 0) and holds
        assert entry["bracket_full"]["holds_fraction"] == 1.0
        assert entry["bracket_full"]["mean_width"] < MASS_TOL


def test_zero_score_check_fails_for_a_perturbed_prior():
    """Negative control: the same measured masses against a wrong prior (alpha + 0.05)."""
    model = tiny("logd-0.8")
    zero_attention_scores(model)
    for entry in _lengths(model, _stream(600), np.array([300, 599]), [64, 256]):
        wrong = float(LogDistance(0.85).window_mass(8, entry["length"]))
        assert abs(entry["window_mass"][0][0] - wrong) > 1e-3


def test_bracket_holds_with_full_spread_and_fails_with_b_zero():
    model = tiny("alibi", seed=3)
    with torch.no_grad():  # large content scores so that they fight the prior
        for blk in model.blocks:
            blk.attn.qkv.weight.mul_(40.0)
    for entry in _lengths(model, _stream(600), np.array([200, 350, 450, 599]), [32, 128]):
        assert entry["bracket_full"]["holds_fraction"] == 1.0  # Theorem 3
        assert entry["bracket_full"]["mean_B"] > 0.5
        exact = np.asarray(entry["exact_window_mass"])
        measured = np.asarray(entry["window_mass"])
        assert np.abs(measured - exact).max() > 1e-2  # B = 0 (the prior alone) fails
    lo, hi = bracket(np.array([2.0]), np.array([3.0]), np.array([0.0]))
    assert lo[0] == hi[0] == 0.4


def test_prior_masses_tail_and_window():
    pm = prior_masses([NoPE(), ALiBi(0.5)], 4, 10)
    np.testing.assert_allclose(pm["S_W"], [4.0, sum(math.exp(-0.5 * d) for d in range(4))])
    np.testing.assert_allclose(pm["window_mass"], pm["S_W"] / (pm["S_W"] + pm["T"]))
    np.testing.assert_allclose(pm["window_mass"] + pm["distant_mass"], 1.0, rtol=1e-15)


def test_resume_from_checkpoint_equals_uninterrupted(tmp_path):
    stream = np.random.default_rng(1).integers(0, 256, 4000).astype(np.uint8)
    mcfg = ModelConfig(parse_variant("kerple-log"), **TINY)
    tcfg = TrainConfig(steps=6, batch=4, seq_len=16, warmup=2, seed=5, ckpt_every=2)
    full, info_full = train(mcfg, tcfg, stream, log=None)
    ckpt = tmp_path / "run" / "ckpt.pt"
    _, info_a = train(mcfg, tcfg, stream, ckpt_path=ckpt, stop_after=3, log=None, key="k")
    assert info_a["step"] == 3 and not info_a["resumed"]
    resumed, info_b = train(mcfg, tcfg, stream, ckpt_path=ckpt, log=None, key="k")
    assert info_b["resumed"] and info_b["step"] == 6
    assert info_b["losses"] == info_full["losses"]
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items(),
                              strict=True):
        assert torch.equal(a, b), k
    with pytest.raises(ValueError, match="another run"):
        train(mcfg, tcfg, stream, ckpt_path=ckpt, log=None, key="other")


def test_schedule_and_batches_are_functions_of_seed_and_step():
    cfg = TrainConfig(steps=100, warmup=10, lr=1e-3, min_lr_frac=0.1, seq_len=8, batch=2)
    assert lr_at(0, cfg) == pytest.approx(1e-4)
    assert lr_at(10, cfg) == pytest.approx(1e-3)
    # cosine written out: frac = (99 - 10) / 90 at the last step
    assert lr_at(99, cfg) == pytest.approx(1e-3 * (0.1 + 0.45 * (1 + math.cos(math.pi * 89 / 90))))
    stream = torch.arange(200, dtype=torch.uint8)
    x1, y1, v1 = batch_at(stream, 7, cfg)
    x2, _, v2 = batch_at(stream, 7, cfg)
    assert torch.equal(x1, x2) and torch.equal(v1, v2) and torch.equal(y1[:, :-1], x1[:, 1:])
    assert not torch.equal(batch_at(stream, 8, cfg)[0], x1)


@pytest.mark.parametrize("bad", ["bogus", "logd-0", "margin-1.5", "ot-1.0", "logd-x",
                                 "alibi-x0", "kerple-1", "kerple-0-1", "t5-", "logd-65"])
def test_parse_variant_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="variant"):
        parse_variant(bad)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("variant", ["rope", "t5", "margin-0.1"])
def test_cuda_evaluation_matches_cpu(variant):
    """The same tiny model evaluated on CUDA and on CPU (float32 both, TF32 off by default):
    masses and bits agree to 1e-4 (float32 summation order differs between devices)."""
    model = tiny(variant)
    stream, ends = _stream(400), np.array([200, 399])
    cpu = _lengths(model, stream, ends, [32, 128], device="cpu")
    gpu = _lengths(model, stream, ends, [32, 128], device="cuda")
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(a["window_mass"], b["window_mass"], atol=1e-4, rtol=0)
        np.testing.assert_allclose(a["bpb"], b["bpb"], atol=1e-4, rtol=0)


def test_fixed_variants_biases_match_their_formulas():
    """alibi-xF scales every slope by F; kerple-R1-R2 is -R1 ln(1 + R2 d); t5-A is
    -A ln(1 + d_b) with d_b the first distance of d's bucket (buckets written out here)."""
    n = 300
    d = np.arange(n)
    row = _model_bias(tiny("alibi-x0.25"), n)[:, n - 1, ::-1]  # (H, n): b_h(d), d = n - 1 - j
    np.testing.assert_allclose(row, -0.25 * np.array([2.0**-4, 2.0**-8])[:, None] * d,
                               rtol=1e-15, atol=0)
    row = _model_bias(tiny("kerple-2-0.02"), n)[0, n - 1, ::-1]
    np.testing.assert_allclose(row, -2.0 * np.log1p(0.02 * d), rtol=1e-14)
    starts: dict[int, int] = {}
    for dist in range(n):
        starts.setdefault(_t5_bucket_written_out(dist), dist)
    want = np.array([-1.5 * math.log1p(starts[_t5_bucket_written_out(k)]) for k in d])
    np.testing.assert_allclose(_model_bias(tiny("t5-1.5"), n)[1, n - 1, ::-1], want, rtol=1e-14)
    assert fixed_t5_table(1.5)[31] == pytest.approx(-1.5 * math.log1p(starts[31]), rel=1e-15)


@pytest.mark.parametrize("variant", ["nope", "alibi", "alibi-x0.0625", "logd-1.2",
                                     "kerple-2-0.02", "t5-1.5"])
def test_dilution_matches_exact_partial_sums(variant):
    """Lambda_h(L) = mean over the scored query lengths q of ln(S(q) / S(L0)): the float64
    cumulative sum of head_dilutions against priors' exact partial sums (mpmath, 30
    digits), to 1e-10 (float64 sums of at most 2048 terms)."""
    import mpmath

    from proofs_check.extrapolation.lossmodel import dilution, head_dilutions

    v = parse_variant(variant)
    encs = v.constant_score_priors(4, v.exponent(16, 2048))
    l0, length, score = 64, 1024, 64
    got = head_dilutions(encs, l0, length, score)
    for h, enc in enumerate(encs):
        s0 = enc.partial_sum(l0, dps=30)
        want = sum(float(mpmath.log(enc.partial_sum(q, dps=30) / s0))
                   for q in range(length - score + 1, length + 1)) / score
        assert abs(got[h] - want) < 1e-10, (h, got[h], want)
    assert dilution(encs, l0, length, score) == got.min()
    # negative control: the dilution depends on the training length it is measured from
    assert np.max(np.abs(head_dilutions(encs, l0 // 2, length, score) - got)) > 1e-3
    assert head_dilutions(encs, l0, l0, score).max() == 0.0  # nothing unseen at L0


def test_planted_probes_are_consistent_next_byte_rows():
    from proofs_check.extrapolation.probe import (
        QUERY,
        VALUE_BYTES,
        plant_training_probes,
        probe_inputs,
    )

    stream = torch.as_tensor(_stream(5000, seed=2))
    cfg = TrainConfig(steps=10, seq_len=32, batch=64, warmup=2)
    x, y, v = batch_at(stream, 3, cfg)
    assert torch.equal(y[:, :-1], x[:, 1:])  # still a next-byte batch
    assert torch.all(x[:, -1] == QUERY) and torch.equal(y[:, -1], v)
    for row in range(x.shape[0]):
        pos = torch.nonzero(x[row] == v[row]).flatten().tolist()
        assert len(pos) >= 1 and 1 <= 31 - pos[-1] <= 30  # distance d in [1, n - 2]
    assert set(v.tolist()) <= set(VALUE_BYTES)
    with pytest.raises(ValueError, match="at least 3"):
        plant_training_probes(x[:, :2], y[:, :2], torch.Generator())
    win = torch.zeros(3, 10, dtype=torch.long)
    px, pv = probe_inputs(win, 4)
    assert torch.all(px[:, -1] == QUERY) and torch.equal(px[:, 5], pv)
    assert pv.tolist() == list(VALUE_BYTES[:3])
    with pytest.raises(ValueError, match="distance"):
        probe_inputs(win, 9)


def test_loss_model_recovers_a_known_curve_and_its_interval_covers():
    """Synthetic points from change = 0.01 + 0.2 L + 0.3 L^2 with a known se (0.01) and a
    between-point scatter tau = 0.02: the fit recovers the coefficients within 4 of its
    own standard errors, and its 90% intervals cover about 90% of fresh points; negative
    control: points from another curve are covered far less often."""
    from proofs_check.extrapolation.lossmodel import LossPoint, fit_loss_model, judge

    rng = np.random.default_rng(7)

    def points(n, c, tau=0.02):
        lam = rng.uniform(0, 1, n)
        true = c[0] + c[1] * lam + c[2] * lam**2 + rng.normal(0, tau, n)
        return [LossPoint("v", 1, float(x), float(t + rng.normal(0, 0.01)), 0.01)
                for x, t in zip(lam, true, strict=True)]

    coef = (0.01, 0.2, 0.3)
    model = fit_loss_model(points(60, coef))
    se = np.sqrt(np.diag(np.asarray(model.cov)))
    assert np.all(np.abs(np.asarray(model.coef) - coef) < 4 * se), (model.coef, se)
    assert 0.005 < model.tau < 0.04
    # One fit's coverage scatters by about 0.05 (tau from 60 points is uncertain), so the
    # coverage is averaged over 20 independent fits, each judged on 200 fresh points: the
    # mean's sd is about 0.011; the intervals use a normal quantile with tau estimated,
    # which undercovers by about 0.02 at 60 points. 0.9 - 0.02 +- 3 sd: within 0.05.
    covers = [judge(fit_loss_model(points(60, coef)), points(200, coef))["coverage90"]
              for _ in range(20)]
    assert abs(np.mean(covers) - 0.9) < 0.05, covers
    assert judge(model, points(400, (0.1, 0.5, 0.0)))["coverage90"] < 0.5
    with pytest.raises(ValueError, match="at least 4"):
        fit_loss_model(points(3, coef))


def test_gpu_preset_builds_its_larger_model_and_trains_a_step_on_cpu():
    """The GPU preset (not run here: docs/extrapolation.md): its settings validate, every
    variant's model builds at its size (4 layers, d_model 256, 8 heads), and one training
    step at its training length 512 (batch 2) gives a finite loss on the CPU."""
    from proofs_check.extrapolation.experiment import GPU, model_config, probe_distances

    assert GPU.lengths == (512, 1024, 2048, 4096, 8192, 16384) and len(GPU.seeds) >= 5
    assert probe_distances(GPU.design_length, GPU.train_length) == [128, 512, 2048, 8192,
                                                                    16382]
    stream = _stream(20000, seed=4)
    for v in GPU.variants:
        mcfg = model_config(GPU, v)
        assert (mcfg.d_model, mcfg.n_layers, mcfg.n_heads) == (256, 4, 8)
    mcfg = model_config(GPU, parse_variant("margin-0.1"))
    tcfg = TrainConfig(steps=1, batch=2, seq_len=GPU.train_length, warmup=1)
    _, info = train(mcfg, tcfg, stream, log=None)
    assert len(info["losses"]) == 1 and math.isfinite(info["losses"][0])

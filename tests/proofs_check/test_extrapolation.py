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
from proofs_check.extrapolation.evaluate import bracket, prior_masses
from proofs_check.extrapolation.model import ByteTransformer, ModelConfig
from proofs_check.extrapolation.train import TrainConfig, batch_at, lr_at, train
from proofs_check.extrapolation.variants import (
    DEFAULT_VARIANTS,
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


@pytest.mark.parametrize("variant", DEFAULT_VARIANTS)
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


def _windows(n_win: int, lmax: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n_win, lmax + 1))


def test_paired_evaluation_scores_the_same_targets():
    model = tiny("alibi")
    win = _windows(3, 64)
    ev = evaluate_model(model, win, [16, 32, 64], window=8, score_bytes=16)
    # reference: score the last 16 targets of each window by hand at every length
    for entry in ev["per_length"]:
        length = entry["length"]
        x = torch.as_tensor(win[:, 64 - length : 64])
        y = torch.as_tensor(win[:, 64 - length + 1 :])
        with torch.no_grad():
            logits, _ = model(x)
        lp = torch.log_softmax(logits[:, -16:].double(), -1).gather(-1, y[:, -16:, None])
        want = (-lp[..., 0].mean(-1) / math.log(2)).numpy()
        np.testing.assert_allclose(entry["bpb"], want, rtol=1e-12)
    # pairing: a change to the bytes before the last 32 leaves lengths 16, 32 unchanged
    win2 = win.copy()
    win2[:, :30] = (win2[:, :30] + 1) % 256
    ev2 = evaluate_model(model, win2, [16, 32, 64], window=8, score_bytes=16)
    for k in (0, 1):
        assert ev2["per_length"][k]["bpb"] == ev["per_length"][k]["bpb"]
    assert ev2["per_length"][2]["bpb"] != ev["per_length"][2]["bpb"]


@pytest.mark.parametrize(
    "variant", ["nope", "rope", "alibi", "t5", "kerple-log", "logd-0.8", "margin-0.1"]
)
def test_untrained_zero_score_window_mass_equals_exact_prior(variant):
    """With s = 0 the attention is the prior itself: the measured window mass (a float32
    softmax sum) must equal S_W / S_l computed by priors (closed forms / Hurwitz zeta)."""
    model = tiny(variant)
    if variant == "t5":
        with torch.no_grad():
            model.pos.table.copy_(torch.linspace(2.0, -3.0, 32).repeat(2, 1))
    zero_attention_scores(model)
    lengths = [32, 64, 256]
    ev = evaluate_model(model, _windows(2, 256), lengths, window=8, score_bytes=16)
    priors = model.pos.priors()
    for entry in ev["per_length"]:
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
    ev = evaluate_model(model, _windows(2, 256), [64, 256], window=8, score_bytes=16)
    for entry in ev["per_length"]:
        wrong = float(LogDistance(0.85).window_mass(8, entry["length"]))
        assert abs(entry["window_mass"][0][0] - wrong) > 1e-3


def test_bracket_holds_with_full_spread_and_fails_with_b_zero():
    model = tiny("alibi", seed=3)
    with torch.no_grad():  # large content scores so that they fight the prior
        for blk in model.blocks:
            blk.attn.qkv.weight.mul_(40.0)
    ev = evaluate_model(model, _windows(4, 128), [32, 128], window=8, score_bytes=16)
    for entry in ev["per_length"]:
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
    x1, y1 = batch_at(stream, 7, cfg)
    x2, _ = batch_at(stream, 7, cfg)
    assert torch.equal(x1, x2) and torch.equal(y1[:, :-1], x1[:, 1:])
    assert not torch.equal(batch_at(stream, 8, cfg)[0], x1)


@pytest.mark.parametrize("bad", ["bogus", "logd-0", "margin-1.5", "ot-1.0", "logd-x"])
def test_parse_variant_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="variant"):
        parse_variant(bad)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("variant", ["rope", "t5", "margin-0.1"])
def test_cuda_evaluation_matches_cpu(variant):
    """The same tiny model evaluated on CUDA and on CPU (float32 both, TF32 off by default):
    masses agree to 1e-4 (float32 summation order differs between devices)."""
    model = tiny(variant)
    win = _windows(2, 128)
    cpu = evaluate_model(model, win, [32, 128], window=8, score_bytes=16, device="cpu")
    gpu = evaluate_model(model, win, [32, 128], window=8, score_bytes=16, device="cuda")
    for a, b in zip(cpu["per_length"], gpu["per_length"], strict=True):
        np.testing.assert_allclose(a["window_mass"], b["window_mass"], atol=1e-4, rtol=0)
        np.testing.assert_allclose(a["bpb"], b["bpb"], atol=1e-4, rtol=0)

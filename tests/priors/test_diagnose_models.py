"""``priors.diagnose`` against the models' own code (tiny random models, transformers).

Reference values come from transformers itself: BLOOM's, MPT's and Falcon's ALiBi tensors
and slopes, T5's/UMT5's ``compute_bias``, and the attention weights the models return with
``output_attentions=True``. Nothing is downloaded: every model is built from a config with
random weights and saved to a temporary directory. (Every family's prior against its
content-free attention: ``test_diagnose_families.py``; ``--measure``'s verdicts:
``test_diagnose_measure.py``.)
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from priors.diagnose import diagnose  # noqa: E402
from priors.diagnose.__main__ import main  # noqa: E402
from priors.diagnose.alibi import bloom_slopes, mpt_slopes  # noqa: E402
from priors.diagnose.checks import check_layer, row_prior  # noqa: E402
from priors.diagnose.measure import measure  # noqa: E402
from priors.encodings import ALiBi  # noqa: E402

W = 8


def _configs():
    t = transformers
    return {
        "bloom": (t.BloomConfig(vocab_size=64, hidden_size=48, n_layer=2, n_head=6),
                  t.BloomForCausalLM),
        "mpt": (t.MptConfig(vocab_size=64, d_model=48, n_layers=2, n_heads=6, max_seq_len=256),
                t.MptForCausalLM),
        "falcon": (t.FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, alibi=True), t.FalconForCausalLM),
        "t5": (t.T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4,
                          relative_attention_num_buckets=8, relative_attention_max_distance=20),
               t.T5ForConditionalGeneration),
        "umt5": (t.UMT5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=2,
                              num_heads=4, relative_attention_num_buckets=8,
                              relative_attention_max_distance=20),
                 t.UMT5ForConditionalGeneration),
        "llama": (t.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                max_position_embeddings=512), t.LlamaForCausalLM),
        "gpt2": (t.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=256,
                              bos_token_id=0, eos_token_id=0), t.GPT2LMHeadModel),
    }


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> (directory, model); T5 tables drawn N(0, 1) so the buckets matter."""
    out = {}
    torch.manual_seed(0)
    for name, (cfg, cls) in _configs().items():
        model = cls(cfg).eval()
        model.set_attn_implementation("eager")
        with torch.no_grad():
            for mod_name, p in model.named_parameters():
                if "relative_attention_bias" in mod_name:
                    p.normal_()
        d = str(tmp_path_factory.mktemp(name))
        model.save_pretrained(d)
        out[name] = (d, model)
    return out


def _row_constant_spread(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max over rows of (max - min) of ``theirs - ours`` on the causal part (j <= i)."""
    n = ours.shape[0]
    causal = np.tril(np.ones((n, n), dtype=bool))
    diff = np.where(causal, theirs - ours, np.nan)
    return float(np.nanmax(np.nanmax(diff, 1) - np.nanmin(diff, 1)))


def _ours(enc, n: int) -> np.ndarray:
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return np.asarray(enc.bias(np.clip(i - j, 0, None).astype(float)))


N = 96


# ------------------------------------------------------------- bias matrices vs the models


def test_bloom_alibi_tensor(models):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    d, _ = models["bloom"]
    r = diagnose(d, window=W, lengths=[N])
    alibi = build_alibi_tensor(torch.ones(1, N), 6, torch.float32)[:, 0].double().numpy()
    for h, res in enumerate(r.heads):
        theirs = np.broadcast_to(alibi[h][None, :], (N, N))  # m * j: a row constant away
        # float32 entries m*j: rounding <= 2^-24 |m j| each, twice (both ends of the spread)
        tol = 2 * 2.0**-24 * np.abs(alibi[h]).max() + 1e-12
        assert _row_constant_spread(_ours(res.prior.encoding, N), theirs) <= tol
    # the printed per-head slopes against the model's float32 slopes (m * 1): equal
    slopes = alibi[:, 1]
    printed = json.loads(_json(d))["heads"]
    assert [h["params"]["slope"] for h in printed] == list(slopes)


@pytest.mark.parametrize("heads", [1, 3, 12, 16, 30, 32, 40, 64, 112])
def test_float32_slopes_are_the_models_to_one_unit(heads):
    """BLOOM's and MPT's float32 slopes against the models' own functions: equal, or (for
    torch's vectorised pow, accurate to one unit but not always correctly rounded) the
    neighbouring float32; the reference is transformers' tensor, the value ours."""
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    for ours, theirs in ((bloom_slopes(heads), _get_alibi_slopes(heads, "cpu").numpy()),
                         (mpt_slopes(heads), -build_mpt_alibi_tensor(heads, 2)[:, 0, 0].numpy())):
        ulps = np.abs(ours.view(np.int32).astype(np.int64) - theirs.view(np.int32))
        assert ulps.max() <= 1
        assert (ulps == 0).mean() >= 0.9  # one head of 32 differs, none for 12


def _json(d: str, *extra: str) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([d, "--window", str(W), "--length", str(N), "--json", *extra]) == 0
    return buf.getvalue()


def test_mpt_alibi_tensor(models):
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    d, _ = models["mpt"]
    r = diagnose(d, window=W, lengths=[N])
    alibi = build_mpt_alibi_tensor(6, N)[:, 0].double().numpy()  # m * (j - (N-1))
    for h, res in enumerate(r.heads):
        theirs = np.broadcast_to(alibi[h][None, :], (N, N))
        tol = 2 * 2.0**-24 * np.abs(alibi[h]).max() + 1e-12
        assert _row_constant_spread(_ours(res.prior.encoding, N), theirs) <= tol


def test_falcon_alibi_tensor_and_eager_doubling(models):
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor

    d, model = models["falcon"]
    r = diagnose(d, window=W, lengths=[N])
    hd = 32 // 4
    alibi = (build_alibi_tensor(torch.ones(1, N, dtype=torch.long), 4, torch.float32)[:, 0]
             .double().numpy() / math.sqrt(hd))
    for h, res in enumerate(r.heads):
        theirs = np.broadcast_to(alibi[h][None, :], (N, N))
        # each entry m*j is rounded to bfloat16 (8 significant bits): <= 2^-9 |m j|, twice
        tol = 2 * 2.0**-9 * np.abs(alibi[h]).max()
        assert _row_constant_spread(_ours(res.prior.encoding, N), theirs) <= tol
    # transformers' eager path applies the ALiBi term twice: with zero q.k the attention is
    # exactly the prior with slope 2 m (the measured_encoding), not m
    zeroed = type(model)(model.config).eval()
    zeroed.load_state_dict(model.state_dict())
    zeroed.set_attn_implementation("eager")
    with torch.no_grad():
        for layer in zeroed.transformer.h:
            layer.self_attention.query_key_value.weight.zero_()
    ids = torch.arange(N)[None] % 64
    att = zeroed(ids, output_attentions=True).attentions[0][0, :, -1].double()  # (H, N)
    for h, res in enumerate(r.heads):
        m_eager = res.prior.measured_encoding.slope
        fitted = float(torch.log(att[h, -1] / att[h, -2]))  # keys N-1, N-2: d = 0, 1
        assert fitted == pytest.approx(m_eager, rel=2**-8)  # bfloat16 entries
        assert fitted != pytest.approx(res.prior.params["slope"], rel=0.1)


def test_t5_compute_bias_decoder_and_encoder_last_row(models):
    """Equal entry for entry with the models' compute_bias (float32 buckets of (8, 20))."""
    d, model = models["t5"]
    r = diagnose(d, window=W, lengths=[N])
    dec = model.decoder.block[0].layer[0].SelfAttention.compute_bias(N, N)[0].double().numpy()
    for h, res in enumerate(r.heads):
        ours = _ours(res.prior.encoding, N)
        causal = np.tril(np.ones((N, N), dtype=bool))
        # same float32 table entries, same buckets: exactly equal
        assert np.array_equal(ours[causal], dec[h][causal])
    enc = model.encoder.block[0].layer[0].SelfAttention.compute_bias(N, N)[0].double().numpy()
    for h, res in enumerate(r.encoder_heads):
        last = enc[h, N - 1]  # the encoder's last query row: every key lies in the past
        ours = np.asarray(res.prior.encoding.bias(np.arange(N - 1, -1, -1).astype(float)))
        assert np.array_equal(ours, last)


def test_umt5_every_layer_has_its_table(models):
    d, model = models["umt5"]
    r = diagnose(d, window=W, lengths=[N])
    assert sorted({res.prior.layers for res in r.heads}) == [(0,), (1,)]
    causal = np.tril(np.ones((N, N), dtype=bool))
    for res in r.heads:
        attn = model.decoder.block[res.prior.layers[0]].layer[0].SelfAttention
        theirs = attn.compute_bias(N, N)[0, res.prior.head].double().numpy()
        assert np.array_equal(_ours(res.prior.encoding, N)[causal], theirs[causal])


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_bounded_families_attend_uniformly_without_content(models, name):
    """With the content scores removed (zero q and k), the model's own attention is the
    prior the diagnosis reports: uniform, window mass W / l exactly."""
    d, model = models[name]
    r = diagnose(d, window=W, lengths=[N])
    (res,) = r.heads
    assert res.prior.mechanism == ("rotary" if name == "llama" else "absolute")
    zeroed = type(model)(model.config).eval()
    zeroed.load_state_dict(model.state_dict())
    zeroed.set_attn_implementation("eager")
    with torch.no_grad():
        for n, p in zeroed.named_parameters():
            if any(k in n for k in ("q_proj", "k_proj", "c_attn")):
                p.zero_()
    ids = torch.arange(N)[None] % 64
    att = zeroed(ids, output_attentions=True).attentions
    for a in att:
        m = a[0, :, -1, N - W:].double().sum(-1)  # last row, the W most recent keys
        assert torch.allclose(m, torch.full_like(m, float(res.masses[0]["window_mass"])),
                              rtol=1e-6)


# ------------------------------------------------------------------------------ --measure


@pytest.mark.parametrize("name", ["bloom", "falcon", "t5", "llama"])
def test_measure_matches_returned_attentions(models, name):
    d, model = models[name]
    r = diagnose(d, window=W, lengths=[N])
    meas = measure(d, r.model, [N], W, seed=3, progress=None)
    assert meas.verdict == "pass" and meas.rows_checked > 0 and meas.rows_outside == 0
    assert json.loads(meas.to_json()) == meas.to_dict()  # to_json: the text of to_dict
    # independently: the same ids through the model with output_attentions=True
    ids = torch.randint(0, model.config.vocab_size, (1, N),
                        generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        if name == "t5":
            out = model(input_ids=ids[:, :16], decoder_input_ids=ids, output_attentions=True)
            atts = out.decoder_attentions
        else:
            atts = model(ids, output_attentions=True).attentions
    rows = {(x["layer"], x["head"]): x for x in meas.rows}
    for layer, a in enumerate(atts):
        last = a[0, :, -1].double()  # (H, N): the row of query length N
        m_ref = last[:, N - W:].sum(-1) / last.sum(-1)
        p = last / last.sum(-1, keepdim=True)
        entropy = -(p * torch.log(p)).sum(-1)
        first = a[0, :, :, 0].double().mean(-1)  # mean weight on the first token
        for h in range(a.shape[1]):
            rec = rows[(layer, h)]
            # the same float32 weights summed in float64 (ours in float32 slices of 1024
            # columns first: relative error below 1e-6)
            assert rec["measured_window_mass"] == pytest.approx(float(m_ref[h]), rel=1e-6)
            assert rec["entropy"] == pytest.approx(float(entropy[h]), rel=1e-9)
            assert rec["first_token_weight"] == pytest.approx(float(first[h]), rel=1e-9)
            assert rec["sink"] == (float(first[h]) > 0.3)


def test_bracket_check_negative_control(models):
    """The unchanged check fed a prior whose exact sums disagree with its bias (sums of one
    slope, bias of another) fails; the consistent prior passes every row."""
    d, model = models["bloom"]
    ids = torch.randint(0, 64, (1, N), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        att = model(ids, output_attentions=True).attentions[0][0].numpy()
    slope = diagnose(d, window=W, lengths=[N]).heads[1].prior.encoding.slope

    class PerturbedSums(ALiBi):
        def _weight_sum(self, lo, hi, length, dps):
            return ALiBi(self.slope * 1.5)._weight_sum(lo, hi, length, dps)

    good = check_layer(att[1:2], [row_prior(ALiBi(slope), N, W)], W)[0]
    bad = check_layer(att[1:2], [row_prior(PerturbedSums(slope), N, W)], W)[0]
    assert good["rows_outside"] == 0 and good["rows_checked"] == N - W  # l = W is trivial
    assert good["prior_sum_error"] <= 1e-12
    assert bad["prior_sum_error"] > 1e-3


def test_measure_cli_text_and_json(models, capsys):
    d, _ = models["llama"]
    assert main([d, "--window", str(W), "--length", str(N), "--measure", "--measure-length",
                 "32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measure"]["rows_checked"] == 2 * 4 * (32 - W)  # the row l = W is trivial
    assert out["measure"]["verdict"] == "pass"


def test_measure_bad_input(models, tmp_path, capsys):
    d, _ = models["gpt2"]
    assert main([d, "--window", "8", "--length", "64", "--measure", "--measure-length",
                 "1000"]) == 2  # beyond n_positions = 256
    assert "maximum positions" in capsys.readouterr().err
    cfg_only = tmp_path / "c"
    cfg_only.mkdir()
    with open(os.path.join(d, "config.json")) as fh:
        (cfg_only / "config.json").write_text(fh.read())
    assert main([str(cfg_only), "--window", "8", "--length", "64", "--measure",
                 "--measure-length", "32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot load the model" in err[0]


def test_pytorch_bin_checkpoint_reads_the_same_tables(models, tmp_path):
    """A PyTorch-format pytorch_model.bin (read with torch, lazily) gives the same priors as
    the safetensors file of the same model."""
    d, model = models["t5"]
    with open(os.path.join(d, "config.json")) as fh:
        (tmp_path / "config.json").write_text(fh.read())
    torch.save({k: v.clone() for k, v in model.state_dict().items()},
               tmp_path / "pytorch_model.bin")
    a = diagnose(d, window=W, lengths=[N])
    b = diagnose(str(tmp_path), window=W, lengths=[N])
    assert [h.prior.params["table"] for h in a.heads] == [h.prior.params["table"]
                                                          for h in b.heads]
    assert b.model.weights == [str(tmp_path / "pytorch_model.bin")]
    assert b.model.weights_read == b.model.weights

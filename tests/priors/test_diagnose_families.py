"""Every family's prior against the model's own forward pass, content removed.

Each test builds a tiny random model with transformers' own classes (no download), zeroes
the query and key projections of every attention layer, and runs the model's eager
attention with ``output_attentions=True`` at a length beyond every window, chunk and bucket
boundary in the config. With no content the attention of row ``i`` is exactly the prior the
model applies: ``a_ij = e^{b(i-j)} / sum_k e^{b(i-k)}`` over the keys the row may see. The
reference is that attention; the prediction is ``priors.diagnose``'s prior for the same
(layer, head), normalised the same way. An ignored window, a wrong bucket, a wrong slope or
a window on the wrong layer moves some weight by ``1/k`` or more; float32 rounding moves it
by about ``2^-24`` relative (``2^-24 |b|`` where the bias entries are float32 products
``m j``, ``2^-8`` where they are bfloat16).

Families whose config names its masked layers (``layer_types``, as transformers 5 saves it)
are also diagnosed from the same config with ``layer_types`` removed, as an older
checkpoint's config would be: the family's default pattern must give the same masks.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from priors.diagnose import diagnose  # noqa: E402

N = 48  # beyond every window (16), chunk (16) and sliding window (15) below
_QK = re.compile(r"(^|\.)(q_proj|k_proj|qkv_proj|c_attn|query_key_value|Wqkv|q|k)\.(weight|bias)$")
_BASE = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, head_dim=8,
             max_position_embeddings=256)
_MOE = dict(num_local_experts=2, num_experts_per_tok=1)
ROTARY = {
    "llama": {},
    "mistral": dict(sliding_window=16),
    "mixtral": dict(sliding_window=16, **_MOE),
    "ministral": dict(sliding_window=16),
    "ministral3": dict(sliding_window=16),
    "qwen2": dict(use_sliding_window=True, sliding_window=16, max_window_layers=2),
    "qwen3": dict(use_sliding_window=True, sliding_window=16, max_window_layers=2),
    "qwen2_moe": dict(use_sliding_window=True, sliding_window=16, max_window_layers=3,
                      num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32,
                      shared_expert_intermediate_size=32),
    "qwen3_moe": dict(use_sliding_window=True, sliding_window=16, num_experts=2,
                      num_experts_per_tok=1, moe_intermediate_size=32),
    "gemma2": dict(sliding_window=16),
    "gemma3_text": dict(sliding_window=16, sliding_window_pattern=3),
    "cohere2": dict(sliding_window=16),
    "olmo3": dict(sliding_window=16),
    "gpt_oss": dict(sliding_window=16, **_MOE),
    "smollm3": dict(use_sliding_window=True, sliding_window=16, pad_token_id=0),
    "starcoder2": dict(sliding_window=16),
    "exaone4": dict(sliding_window=16, sliding_window_pattern=2),
    # Phi-3 with its window shrunk: sliding_window = 15 on every layer
    "phi3": dict(sliding_window=15, original_max_position_embeddings=256, pad_token_id=0),
    "phimoe": dict(sliding_window=16, **_MOE),
    "llama4_text": dict(attention_chunk_size=16, num_local_experts=1, intermediate_size_mlp=64,
                        interleave_moe_layer_step=1, no_rope_layers=[1, 1, 0, 1]),
}
ABSOLUTE = {
    "gpt_neo": dict(vocab_size=64, num_layers=4, num_heads=4, hidden_size=32, window_size=16,
                    attention_types=[[["global", "local"], 2]], max_position_embeddings=256),
    "gpt2": dict(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=256),
    "opt": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                num_attention_heads=4, max_position_embeddings=256),
}
_T5 = dict(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4,
           decoder_start_token_id=0,
           # (20, 320): float32 buckets put distances 20, 40 and 160 one bucket higher than
           # a float64 evaluation would
           relative_attention_num_buckets=20, relative_attention_max_distance=320)


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _content_free(model):
    for name, p in model.named_parameters():
        if _QK.search(name):
            p.zero_()
    return model


def _expected(prior, n: int) -> np.ndarray:
    """Row ``i``: the prior's weights over distances ``0..i``, normalised (float64)."""
    enc = prior.eager_encoding
    out = np.zeros((n, n))
    fixed = None if enc.length_dependent else np.asarray(enc.bias(np.arange(n, dtype=float)))
    for i in range(n):
        length = i + 1
        b = (fixed[:length] if fixed is not None
             else np.asarray(enc.bias(np.arange(length, dtype=float), length=length)))
        w = np.where(np.isfinite(b), np.exp(b - b[np.isfinite(b)].max()), 0.0)
        out[i, i::-1] = w / w.sum()
    return out


def _worst(attentions, heads, n: int) -> float:
    """Largest relative difference between the models' rows (normalised: GPT-OSS's sink
    takes a share of every row) and the predicted ones, over layers, heads and rows."""
    worst = 0.0
    for layer, a in enumerate(attentions):
        for h in range(a.shape[1]):
            prior = next(r.prior for r in heads if r.prior.covers(layer, h))
            ours = a[0, h].double().numpy()
            ours = ours / ours.sum(-1, keepdims=True)
            ref = _expected(prior, n)
            worst = max(worst, float(np.abs(ours - ref).max() / ref.max()))
    return worst


def _config_dir(tmp_path, cfg, drop=()):
    cfg.save_pretrained(tmp_path)
    path = os.path.join(tmp_path, "config.json")
    with open(path) as fh:
        data = json.load(fh)
    for key in drop:
        data.pop(key, None)
    with open(path, "w") as fh:
        json.dump(data, fh)
    return str(tmp_path)


@pytest.mark.parametrize("mt", sorted(ROTARY) + sorted(ABSOLUTE))
def test_masked_layers_match_the_models_attention(mt, tmp_path):
    kw = ABSOLUTE.get(mt) or {**_BASE, **ROTARY[mt]}
    cfg = transformers.AutoConfig.for_model(mt, **kw)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    att = _content_free(model.eval())(torch.arange(N)[None] % 64,
                                     output_attentions=True).attentions
    # the models' float32 weights 1/k against exact 1/k: relative 2^-24, rounded up
    tol = 1e-6
    saved = diagnose(_config_dir(tmp_path / "saved", cfg), window=4, lengths=[N])
    assert _worst(att, saved.heads, N) <= tol
    older = diagnose(_config_dir(tmp_path / "older", cfg, ("layer_types", "attention_layers")),
                     window=4, lengths=[N])
    assert _worst(att, older.heads, N) <= tol
    if mt != "llama" and mt not in ("gpt2", "opt"):  # a masked layer exists: it must show
        assert any(r.prior.encoding.name != "nope" for r in saved.heads)


def _alibi_cases():
    t = transformers
    return {
        "bloom": (t.BloomConfig(vocab_size=64, hidden_size=48, n_layer=2, n_head=12),
                  t.BloomForCausalLM),
        "mpt": (t.MptConfig(vocab_size=64, d_model=48, n_layers=2, n_heads=6, max_seq_len=256),
                t.MptForCausalLM),
        # transformers' MptModel adds ALiBi with alibi_bias_max = 8 whatever the config says
        "mpt-bias-max-4": (t.MptConfig(vocab_size=64, d_model=48, n_layers=2, n_heads=6,
                                       max_seq_len=256, attn_config={"alibi_bias_max": 4}),
                           t.MptForCausalLM),
        "mpt-no-alibi": (t.MptConfig(vocab_size=64, d_model=48, n_layers=2, n_heads=6,
                                     max_seq_len=256, attn_config={"alibi": False}),
                         t.MptForCausalLM),
        "falcon": (t.FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, alibi=True), t.FalconForCausalLM),
    }


@pytest.mark.parametrize("name", ["bloom", "mpt", "mpt-bias-max-4", "mpt-no-alibi", "falcon"])
def test_alibi_slopes_match_the_models_attention(name, tmp_path):
    cfg, cls = _alibi_cases()[name]
    cfg._attn_implementation = "eager"
    n = 96
    model = _content_free(cls(cfg).eval())
    att = model(torch.arange(n)[None] % 64, output_attentions=True).attentions
    r = diagnose(_config_dir(tmp_path, cfg), window=4, lengths=[n])
    slopes = [res.prior.eager_encoding.slope for res in r.heads]
    # the models' bias entries fl32(m j) (BLOOM: j the key position up to n) carry a
    # relative error 2^-24 each, i.e. an absolute logit error 2^-24 m n, twice in a ratio;
    # Falcon's are bfloat16 (2^-9 m j); relative weight error e^err - 1 ~ err
    bits = 9 if name == "falcon" else 24
    tol = 4 * 2.0**-bits * max(slopes) * n + 1e-6
    assert _worst(att, r.heads, n) <= tol
    if name.startswith("mpt-"):  # the checkpoint's own prior differs; --measure uses eager
        assert all(res.prior.measured_encoding is not None for res in r.heads)


def _t5_cases():
    t = transformers
    return {
        "t5": t.T5ForConditionalGeneration(t.T5Config(**_T5)),
        "mt5": t.MT5ForConditionalGeneration(t.MT5Config(**_T5)),
        "umt5": t.UMT5ForConditionalGeneration(t.UMT5Config(**_T5)),
        "longt5": t.LongT5ForConditionalGeneration(t.LongT5Config(**_T5, local_radius=7)),
        "switch_transformers": t.SwitchTransformersForConditionalGeneration(
            t.SwitchTransformersConfig(**_T5, num_experts=2, expert_capacity=256,
                                       num_sparse_encoder_layers=1,
                                       num_sparse_decoder_layers=1)),
    }


@pytest.mark.parametrize("name", ["t5", "mt5", "umt5", "longt5", "switch_transformers"])
def test_t5_buckets_match_the_models_attention(name, tmp_path):
    """Decoder rows and the encoder's last row, at a length past distance 160, where the
    float32 and float64 buckets of (20, 320) differ."""
    torch.manual_seed(0)
    model = _t5_cases()[name].eval()
    model.set_attn_implementation("eager")
    for pn, p in model.named_parameters():
        if "relative_attention_bias" in pn:
            p.normal_()  # N(0, 1) tables: a bucket off by one moves a weight by ~e^1
    model.save_pretrained(tmp_path)
    n, n_enc = 200, 40
    _content_free(model)
    ids = torch.arange(n)[None] % 64
    out = model(input_ids=ids[:, :n_enc], decoder_input_ids=ids, output_attentions=True)
    r = diagnose(str(tmp_path), window=4, lengths=[n])
    assert _worst(out.decoder_attentions, r.heads, n) <= 1e-6  # float32 softmax rounding
    for res in r.encoder_heads:
        h = res.prior.head
        a = out.encoder_attentions[0 if res.prior.layers is None else res.prior.layers[0]][0]
        if a.dim() == 4:  # (blocks, H, block, 3 block): LongT5's local attention
            block = a.shape[-2]
            i = n_enc - 1
            row = a[i // block, h, i % block].double().numpy()
            keys = np.arange(3 * block) + (i // block - 1) * block  # key positions
            theirs = np.zeros(n_enc)
            inside = (keys >= 0) & (keys < n_enc)
            theirs[keys[inside]] = row[inside]
        else:
            theirs = a[h, -1].double().numpy()
        b = np.asarray(res.prior.encoding.bias(np.arange(n_enc)[::-1].astype(float)))
        ours = np.where(np.isfinite(b), np.exp(b), 0.0)
        assert np.abs(theirs / theirs.sum() - ours / ours.sum()).max() <= 1e-6
    if name == "longt5":  # local attention: the last row sees local_radius + 1 = 8 keys
        assert r.encoder_heads[0].prior.encoding.span == 8


def test_float64_buckets_would_fail_the_same_comparison(tmp_path):
    """Negative control: the unchanged comparison, fed the float64 buckets of
    ``priors.encodings.T5Buckets`` instead of the models' float32 ones, sees the
    distances 20, 40, 160 in the wrong bucket."""
    from priors.encodings import T5Buckets

    torch.manual_seed(0)
    model = _t5_cases()["t5"].eval()
    model.set_attn_implementation("eager")
    for pn, p in model.named_parameters():
        if "relative_attention_bias" in pn:
            p.normal_()
    model.save_pretrained(tmp_path)
    n = 200
    _content_free(model)
    ids = torch.arange(n)[None] % 64
    att = model(input_ids=ids[:, :8], decoder_input_ids=ids,
                output_attentions=True).decoder_attentions
    r = diagnose(str(tmp_path), window=4, lengths=[n])
    assert _worst(att, r.heads, n) <= 1e-6
    wrong = [SimpleNamespace(prior=replace(res.prior, encoding=T5Buckets(
        res.prior.encoding.num_buckets, res.prior.encoding.max_distance,
        res.prior.encoding.table))) for res in r.heads]
    assert _worst(att, wrong, n) > 1e-3


@pytest.mark.slow
def test_float32_buckets_equal_transformers_over_a_sweep():
    """Every distance below 2 max_distance (capped at 4096) of 2,320 (num_buckets,
    max_distance) pairs: the diagnosis's buckets (float32, boundary distances decided by
    torch's log) equal transformers' ``_relative_position_bucket``, unidirectional."""
    from transformers.models.t5.modeling_t5 import T5Attention

    from priors.diagnose.t5 import model_buckets

    for nb in range(4, 84, 2):
        for md in range(nb // 2 + 1, nb // 2 + 401, 7):
            n = min(2 * md + 8, 4096)
            theirs = T5Attention._relative_position_bucket(
                -torch.arange(n)[None, :].expand(2, n), bidirectional=False, num_buckets=nb,
                max_distance=md)[0].numpy()
            enc, _ = model_buckets(nb, md, np.arange(nb, dtype=float))
            ours = enc.bias(np.arange(n, dtype=float)).astype(np.int64)
            assert np.array_equal(ours, theirs), (nb, md, np.flatnonzero(ours != theirs)[:5])

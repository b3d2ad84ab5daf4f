"""More families and variants against the models' own code (transformers 5.24).

As in ``test_diagnose_families.py``: a tiny random model built with transformers' own
classes (no download), query and key projections zeroed, eager attention with
``output_attentions=True``. With no content, row ``i`` of a layer's attention is exactly
the prior the model applies over the keys it lets the row see; the diagnosis's prior for
the same (layer, head), normalised the same way, must equal it.

Where the model's own code says a layer is not causal (``is_causal = False`` on its
attention modules, and an output at position 0 that moves with a later token) or masks keys
the diagnosis does not model, the diagnosis must refuse rather than print a class. Configs
as they are published (an empty ``no_rope_layers``, a legacy ``rope_scaling`` ``type``, the
Hugging Face cache's links) must read as transformers reads them; values transformers
itself cannot use must be refused in one line (exit status 2), never a traceback. The
helpers (``_BASE``, ``_content_free``, ``_worst``) are ``test_diagnose_families``'s.
"""

from __future__ import annotations

import json
import math
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_diagnose_families import _BASE, _config_dir, _content_free, _worst  # noqa: E402

from priors.diagnose import diagnose  # noqa: E402
from priors.diagnose.__main__ import main  # noqa: E402

N = 48  # rows up to 48 keys: every row of a full layer checked against 1/k


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _attentions(cfg) -> tuple:
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    return _content_free(model.eval())(torch.arange(N)[None] % 64,
                                       output_attentions=True).attentions


@pytest.mark.parametrize("drop", [(), ("layer_types",)])
def test_qwen2_moe_without_sliding_window_is_full_attention(drop, tmp_path):
    """Qwen2-MoE's configuration stores ``sliding_window = 0`` when ``use_sliding_window``
    is false (every config transformers 5.24 saves for it): the window is off, every layer
    full, and the diagnosis must read it so, not refuse the 0."""
    cfg = transformers.Qwen2MoeConfig(**_BASE, num_experts=2, num_experts_per_tok=1,
                                      moe_intermediate_size=32,
                                      shared_expert_intermediate_size=32)
    path = _config_dir(tmp_path, cfg, drop)
    with open(os.path.join(path, "config.json")) as fh:
        assert json.load(fh)["sliding_window"] == 0  # the case under test
    att = _attentions(cfg)
    r = diagnose(path, window=4, lengths=[N])
    # float32 weights 1/k against exact 1/k: relative 2^-24, rounded up to 1e-6
    assert _worst(att, r.heads, N) <= 1e-6
    assert all(res.prior.encoding.name == "nope" for res in r.heads)


def test_xglm_heads_are_read_from_attention_heads(tmp_path):
    """XGLM stores its head and layer counts as ``attention_heads`` / ``num_layers``
    (its config's ``attribute_map``): the diagnosis must find them and give the model's
    own (uniform) prior on every head."""
    cfg = transformers.XGLMConfig(vocab_size=64, d_model=32, num_layers=2, attention_heads=4,
                                  ffn_dim=64, max_position_embeddings=256)
    att = _attentions(cfg)
    r = diagnose(_config_dir(tmp_path, cfg), window=4, lengths=[N])
    assert (r.model.num_layers, r.model.num_heads) == (len(att), att[0].shape[1])
    assert _worst(att, r.heads, N) <= 1e-6  # float32 1/k, as above


@pytest.mark.parametrize("mt", ["gemma", "gemma2"])
def test_bidirectional_gemma_is_refused(mt, tmp_path, capsys):
    """Gemma and Gemma 2 with ``use_bidirectional_attention`` (embedding models) build
    non-causal attention modules; Gemma's default SDPA path then lets position 0 see the
    last token. No causal class may be printed for them: one line, exit status 2."""
    cfg = transformers.AutoConfig.for_model(mt, **_BASE, use_bidirectional_attention=True)
    torch.manual_seed(0)
    impl = "sdpa" if mt == "gemma" else "eager"  # Gemma 2 has no SDPA path
    model = transformers.AutoModel.from_config(cfg, attn_implementation=impl).eval()
    assert all(not layer.self_attn.is_causal for layer in model.layers)
    if mt == "gemma":
        ids = torch.arange(10)[None] % 64
        other = ids.clone()
        other[0, -1] = (other[0, -1] + 1) % 64
        moved = (model(ids).last_hidden_state[0, 0]
                 - model(other).last_hidden_state[0, 0]).abs().max()
        # a causal model's position 0 is bit-identical whatever follows it
        assert float(moved) > 0
    path = _config_dir(tmp_path, cfg)
    with pytest.raises(ValueError, match="use_bidirectional_attention"):
        diagnose(path, window=4, lengths=[N])
    assert main([path, "--window", "4", "--length", str(N)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use_bidirectional_attention" in err[0]


def _config_file(tmp_path, cfg: dict) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


def test_falcon_alibi_must_be_a_boolean(tmp_path, capsys):
    """``"alibi": "false"`` (a string) is not a boolean: transformers' own FalconConfig
    refuses to load it, so no model runs with it; the diagnosis must refuse it too (a
    truthy string read as ALiBi would print a summable class for an unloadable model)."""
    path = _config_file(tmp_path, {"model_type": "falcon", "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "hidden_size": 32,
                                   "alibi": "false"})
    with pytest.raises(Exception, match="alibi"):  # the model's own reading of the config
        transformers.AutoConfig.from_pretrained(path)
    with pytest.raises(ValueError, match="alibi"):
        diagnose(path, window=4, lengths=[N])
    assert main([path, "--window", "4", "--length", str(N)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "alibi" in err[0]


def test_longrope_with_one_original_position_is_refused_plainly(tmp_path, capsys):
    """LongRoPE's attention factor ``sqrt(1 + ln(factor) / ln(L0))`` has no value at
    ``L0 = original_max_position_embeddings = 1``: transformers' own rope function divides
    by zero there. The command must say so in one line (exit 2), not raise a traceback."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = dict(rope_type="longrope", factor=4.0, original_max_position_embeddings=1,
                short_factor=[1.0] * 4, long_factor=[1.0] * 4, rope_theta=1e4)
    cfg = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4,
                                   hidden_size=32, max_position_embeddings=4096,
                                   rope_parameters=rope)
    with pytest.raises(ZeroDivisionError):  # the model's own code: no factor exists
        ROPE_INIT_FUNCTIONS["longrope"](cfg, "cpu")
    path = _config_file(tmp_path, {"model_type": "llama", "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "max_position_embeddings": 4096,
                                   "rope_scaling": rope})
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        diagnose(path, window=4, lengths=[N])
    assert main([path, "--window", "4", "--length", str(N)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "original_max_position_embeddings" in err[0]


def test_each_head_states_its_own_temperature_at_zero_score_bound(tmp_path):
    """Llama 4 without chunks (``attention_chunk_size: null``): RoPE and NoPE layers share
    the uniform prior, and only the NoPE layers carry ``attn_temperature_tuning``. At
    ``B = 0`` the masses are the same, but each mass row's ``temperature`` must be its
    own head's ``tau(l) = 1 + attn_scale ln(1 + floor(l / floor_scale))`` (closed form
    here), not the one of an earlier head with the same prior."""
    path = _config_file(tmp_path, {"model_type": "llama4_text", "num_hidden_layers": 4,
                                   "num_attention_heads": 4, "attention_chunk_size": None,
                                   "no_rope_layers": [1, 1, 1, 0], "attn_scale": 0.1,
                                   "floor_scale": 8192})
    lengths = [4096, 65536, 10**6]
    out = json.loads(diagnose(path, window=512, lengths=lengths).to_json())
    tempered = [h for h in out["heads"] if "temperature" in h]
    assert [h["layers"] for h in tempered] == [[3]]  # the NoPE layer only
    for row in tempered[0]["masses"]:
        tau = 1 + 0.1 * math.log1p(row["length"] // 8192)
        # both sides are the same float64 expression: equal to rounding (1e-15 relative)
        assert row["temperature"] == pytest.approx(tau, rel=1e-15)


def test_recurrent_gemma_local_window_is_refused_not_ignored(tmp_path):
    """RecurrentGemma (a family the diagnosis does not know, with rotary keys) masks its
    attention to ``attention_window_size`` keys. The model's own forward shows it: with
    two attention layers of window 8, the last of 20 positions does not move when token 0
    changes (0 + 2 * 7 < 19), while a uniform prior over every key would give token 0
    weight. The diagnosis must refuse those layers, not print the uniform prior's class."""
    cfg = transformers.RecurrentGemmaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=8, attention_window_size=8,
        block_types=["attention"], lru_width=32)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ids = torch.arange(20)[None] % 64
    other = ids.clone()
    other[0, 0] = 63
    # beyond the window the last logits are bit-identical: the model masks token 0
    assert torch.equal(model(ids).logits[0, -1], model(other).logits[0, -1])
    r = diagnose(_config_dir(tmp_path, cfg), window=4, lengths=[64])
    assert r.heads and all(res.prior.refusal and "attention_window_size" in res.prior.refusal
                           for res in r.heads)
    assert all(res.prior.encoding is None and not res.masses for res in r.heads)


def test_paligemma_suffix_rows_are_the_diagnosed_causal_rows(tmp_path):
    """PaliGemma's configuration sets ``use_bidirectional_attention`` on its Gemma text
    model, but its own mask decides: the image and prompt prefix attend bidirectionally,
    the rows after it causally. The diagnosis keeps those causal rows (with a note), and
    they must equal the model's content-free attention."""
    from test_diagnose_families import _expected

    cfg = transformers.PaliGemmaConfig(
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, image_size=8, patch_size=4),
        text_config=dict(model_type="gemma", **_BASE), image_token_index=63,
        projection_dim=32)
    assert cfg.text_config.use_bidirectional_attention is True  # the case under test
    model = transformers.PaliGemmaForConditionalGeneration(cfg).eval()
    model.set_attn_implementation("eager")
    prefix = 10
    ids = torch.arange(N)[None] % 60  # no image token: a text prefix
    kinds = torch.zeros_like(ids)
    kinds[0, prefix:] = 1  # token_type_ids: 0 prefix, 1 suffix
    att = _content_free(model)(input_ids=ids, token_type_ids=kinds,
                               output_attentions=True).attentions
    r = diagnose(_config_dir(tmp_path, cfg), window=4, lengths=[N])
    assert any("PaliGemma" in note for note in r.model.notes)
    for layer, a in enumerate(att):
        for h in range(a.shape[1]):
            prior = next(res.prior for res in r.heads if res.prior.covers(layer, h))
            theirs = a[0, h, prefix:].double().numpy()
            # float32 weights 1/k against exact 1/k: relative 2^-24, rounded up to 1e-6
            assert abs(theirs - _expected(prior, N)[prefix:]).max() <= 1e-6


@pytest.mark.parametrize("lengths", [4096, None, "4096", b"4096"])
def test_lengths_that_are_not_a_sequence_are_a_value_error(lengths, tmp_path):
    """``diagnose(path, lengths=4096)``: a library argument of the wrong kind is a
    ``ValueError`` naming it (the contract of every entry point), not a ``TypeError`` from
    iterating an integer, nor a string read digit by digit."""
    path = _config_file(tmp_path, {"model_type": "llama", "num_hidden_layers": 2,
                                   "num_attention_heads": 4})
    assert diagnose(path, window=512, lengths=[4096]).lengths == [4096]  # the valid call
    with pytest.raises(ValueError, match="lengths"):
        diagnose(path, window=512, lengths=lengths)


@pytest.mark.parametrize("mt", ["esm", "eurobert", "gte", "nomic_bert"])
def test_rotary_encoders_are_refused_as_encoder_only(mt, tmp_path):
    """BERT relatives with rotary positions carry rotary keys (``rope_theta``...), so an
    unknown-family fallback would read them as causal rotary decoders. The model's own
    forward shows they are bidirectional: position 0 moves when the last token changes.
    The diagnosis must refuse them as encoder-only, with no class."""
    cfg = transformers.AutoConfig.for_model(
        mt, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=8,
        max_position_embeddings=128, pad_token_id=0)
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(cfg).eval()
    ids = torch.arange(1, 11)[None]
    other = ids.clone()
    other[0, -1] = 40
    moved = (model(input_ids=ids).last_hidden_state[0, 0]
             - model(input_ids=other).last_hidden_state[0, 0]).abs().max()
    assert float(moved) > 0  # a causal model's position 0 is bit-identical
    with pytest.raises(ValueError, match="encoder-only"):
        diagnose(_config_dir(tmp_path, cfg), window=4, lengths=[N])


def test_deepseek_legacy_rope_scaling_type_keeps_the_softmax_scale(tmp_path):
    """DeepSeek V3's own config.json writes ``rope_scaling = {"type": "yarn", ...}`` (the
    legacy key). transformers standardises it and multiplies the softmax scale by
    ``mscale^2``, ``mscale = 0.1 mscale_all_dim ln(factor) + 1``: the model's own
    ``self_attn.scaling`` over ``1/sqrt(qk_head_dim)`` is the reference temperature."""
    cfg = dict(model_type="deepseek_v3", vocab_size=64, hidden_size=32, intermediate_size=64,
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
               max_position_embeddings=4096, n_routed_experts=2, num_experts_per_tok=1,
               moe_intermediate_size=16, kv_lora_rank=8, q_lora_rank=8, qk_rope_head_dim=4,
               qk_nope_head_dim=4, v_head_dim=8, head_dim=4, first_k_dense_replace=1,
               n_group=1, topk_group=1, rope_theta=10000.0,
               rope_scaling={"type": "yarn", "factor": 40, "mscale": 1.0,
                             "mscale_all_dim": 1.0, "original_max_position_embeddings": 100})
    path = _config_file(tmp_path, cfg)
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.from_pretrained(path))
    theirs = model.model.layers[0].self_attn.scaling * math.sqrt(8)  # qk_head_dim = 4 + 4
    assert theirs > 1.5  # the case under test: a real temperature
    r = diagnose(path, window=4, lengths=[64])
    temps = {res.prior.temperature for res in r.heads}
    assert len(temps) == 1 and None not in temps
    # float64 here against transformers' float64 Python arithmetic: equal to rounding
    assert temps.pop().at(64) == pytest.approx(theirs, rel=1e-12)


def test_sharded_checkpoint_in_the_hub_cache_layout_is_read(tmp_path):
    """A Hugging Face cache snapshot holds links to ``../../blobs/<hash>``, the weight
    index and its shards included. transformers loads such a directory; the diagnosis must
    too (the index's names stay inside the directory; where the links point is the cache's
    business), and the T5 tables it reads must be the ones the loaded model holds."""
    import shutil

    cfg = transformers.T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=2,
                                num_heads=4, decoder_start_token_id=0)
    torch.manual_seed(0)
    plain = tmp_path / "plain"
    transformers.T5ForConditionalGeneration(cfg).save_pretrained(plain, max_shard_size="20KB")
    blobs, snap = tmp_path / "blobs", tmp_path / "snapshots" / "rev"
    blobs.mkdir()
    snap.mkdir(parents=True)
    for i, f in enumerate(sorted(os.listdir(plain))):
        shutil.copy(plain / f, blobs / f"h{i}")
        (snap / f).symlink_to(os.path.join("..", "..", "blobs", f"h{i}"))
    assert (snap / "model.safetensors.index.json").is_symlink()  # the case under test
    model = transformers.T5ForConditionalGeneration.from_pretrained(snap, local_files_only=True)
    theirs = model.decoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight
    r = diagnose(str(snap), window=4, lengths=[N])
    for res in r.heads:  # float32 tables widened to float64: exactly equal
        assert list(res.prior.encoding.table) == theirs[:, res.prior.head].double().tolist()


def test_llama4_empty_no_rope_layers_is_the_default_pattern(tmp_path):
    """The published Llama 4 configs write ``"no_rope_layers": []`` (and no
    ``layer_types``); Llama4TextConfig reads the empty list as its default pattern (every
    4th layer NoPE and full, the others chunked). The diagnosis of that config must equal
    the content-free attention of the model built from it."""
    cfg = transformers.AutoConfig.for_model(
        "llama4_text", **_BASE, attention_chunk_size=16, num_local_experts=1,
        intermediate_size_mlp=64, interleave_moe_layer_step=1, no_rope_layers=[])
    path = _config_dir(tmp_path, cfg, ("layer_types",))
    with open(os.path.join(path, "config.json")) as fh:
        data = json.load(fh)
    data["no_rope_layers"] = []  # as published
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(data, fh)
    att = _attentions(transformers.AutoConfig.from_pretrained(path))
    r = diagnose(path, window=4, lengths=[N])
    assert _worst(att, r.heads, N) <= 1e-6  # float32 weights 1/k, as above
    assert {res.prior.encoding.name for res in r.heads} == {"chunked", "nope"}


def test_lfm2_attention_layers_named_by_index_are_not_all_layers(tmp_path):
    """LFM2 names its attention layers in ``full_attn_idxs``; the others are convolutions.
    A config without ``layer_types`` (transformers derives it from the indices) must not
    have every layer diagnosed as causal attention: the model's own layer 0 has no
    attention module at all."""
    cfg = transformers.Lfm2Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, max_position_embeddings=256,
                                  full_attn_idxs=[1])
    path = _config_dir(tmp_path, cfg, ("layer_types",))
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.from_pretrained(path))
    assert [hasattr(layer, "self_attn") for layer in model.model.layers] == [False, True]
    r = diagnose(path, window=4, lengths=[N])
    assert r.heads and all(res.prior.refusal and "full_attn_idxs" in res.prior.refusal
                           for res in r.heads)

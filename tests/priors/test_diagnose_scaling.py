"""Logit temperatures against the models' own code.

* Llama 4's ``attn_temperature_tuning`` and Mistral's ``llama_4_scaling_beta``, measured in
  the models' forward pass: the input is one embedding ``x`` at position 0 and another,
  ``y``, at every later position, so in the first layer every query ``p >= 1`` is the same
  vector and key 0 differs from the others by a fixed score ``c``. The model's weights then
  give ``ln(a_{p,0} / a_{p,1}) = tau(p + 1) c``, and the ratio of that log at row ``p`` to its
  value at a row where ``tau = 1`` is ``tau`` as the model applies it. Rotary positions would
  add a distance-dependent term: Ministral 3's query and key projections are restricted to
  the slowest rotary pair, with ``rope_theta = 1e30`` (a rotation below 1e-20 rad per token).
* YaRN's and LongRoPE's attention factor: ``tau = f^2`` against ``f`` from transformers'
  own ``ROPE_INIT_FUNCTIONS``; and once through the forward pass (the logits of a YaRN
  Llama over those of the same Llama without scaling are ``f^2``, not ``f``).
* Qwen's ``use_logn_attn`` (original code, not in transformers): against the code's own
  table ``[log(i, seq_length) if i > seq_length else 1 for i in range(1, 32768)]``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from priors.diagnose import diagnose
from priors.diagnose.scaling import rope_attention_factor

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _write(tmp_path, cfg: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _first_layer_log_ratio(model, n: int) -> np.ndarray:
    """``ln(a_{p,0} / a_{p,1})`` of the first layer, head 0, rows ``p = 1 .. n-1``."""
    torch.manual_seed(1)
    x, y = torch.randn(2, model.config.hidden_size)
    embeds = torch.cat([x[None], y[None].expand(n - 1, -1)])[None]
    with torch.no_grad():
        a = model(inputs_embeds=embeds, output_attentions=True).attentions[0][0, 0].double()
    return torch.log(a[1:, 0] / a[1:, 1]).numpy()


def test_llama4_temperature_tuning_is_the_models(tmp_path):
    cfg = transformers.Llama4TextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, intermediate_size_mlp=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_local_experts=1, interleave_moe_layer_step=1, no_rope_layers=[0, 1],
        attn_temperature_tuning=True, floor_scale=4, attn_scale=0.5, attention_chunk_size=16)
    torch.manual_seed(0)
    model = transformers.Llama4ForCausalLM(cfg).eval()
    model.set_attn_implementation("eager")
    n = 40
    ratio = _first_layer_log_ratio(model, n)
    cfg.save_pretrained(tmp_path)
    r = diagnose(str(tmp_path), window=4, lengths=[n])
    prior = next(h.prior for h in r.heads if h.prior.covers(0, 0))
    tau = np.array([prior.temperature.at(p + 1) for p in range(1, n)])
    assert tau[0] == 1.0 and tau.max() > 1.6  # 1 + 0.5 ln(1 + floor(40 / 4))
    # the same float32 weights: ln of a ratio to ~1e-6 absolute, over |c| ~ 0.1 or more
    assert ratio / ratio[0] == pytest.approx(tau, rel=1e-4)
    assert prior.temperature.critical_bound() == pytest.approx(1.0)  # 1 / (2 * 0.5)
    # the RoPE layer (chunked) has no temperature
    rope = next(h.prior for h in r.heads if h.prior.covers(1, 0))
    assert rope.temperature is None and rope.encoding.name == "chunked"


def test_llama4_scaling_beta_is_the_models(tmp_path):
    beta, orig = 0.5, 8
    rope = {"rope_type": "yarn", "rope_theta": 1e30, "factor": 16.0,
            "original_max_position_embeddings": orig, "llama_4_scaling_beta": beta}
    cfg = transformers.Ministral3Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=4, head_dim=8, rope_parameters=rope,
        max_position_embeddings=256, pad_token_id=0, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.Ministral3ForCausalLM(cfg).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():  # q and k only on the slowest rotary pair (dims 3 and 7)
        keep = torch.zeros(8, dtype=torch.bool)
        keep[[3, 7]] = True
        attn = model.model.layers[0].self_attn
        for proj in (attn.q_proj, attn.k_proj):
            w = proj.weight.view(-1, 8, proj.weight.shape[-1])
            w[:, ~keep] = 0
    n = 40
    ratio = _first_layer_log_ratio(model, n)
    cfg.save_pretrained(tmp_path)
    r = diagnose(str(tmp_path), window=4, lengths=[n])
    (prior,) = [h.prior for h in r.heads]
    beta_factor = [f for f in prior.temperature.factors if f.kind == "floor-log"]
    assert len(beta_factor) == 1
    tau = np.array([beta_factor[0].at(p + 1) for p in range(1, n)])
    assert tau[0] == 1.0 and tau.max() > 1.7  # 1 + 0.5 ln(1 + floor(39 / 8))
    assert ratio / ratio[0] == pytest.approx(tau, rel=1e-4)


@pytest.mark.parametrize("rope", [
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.707,
     "original_max_position_embeddings": 64},
    {"rope_type": "yarn", "factor": 8.0, "attention_factor": 1.3,
     "original_max_position_embeddings": 64},
    {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
     "original_max_position_embeddings": 64},
])
def test_rope_attention_factor_is_transformers(rope):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = transformers.LlamaConfig(hidden_size=32, num_attention_heads=4, head_dim=8,
                                   max_position_embeddings=256,
                                   rope_parameters={**rope, "rope_theta": 10000.0})
    _, f = ROPE_INIT_FUNCTIONS[rope["rope_type"]](cfg, "cpu")
    ours = rope_attention_factor({"max_position_embeddings": 256}, {**rope})
    assert ours.value == pytest.approx(f * f, rel=1e-15)  # the same formula, in float64


def test_yarn_factor_reaches_the_logits_squared(tmp_path):
    """The YaRN Llama's first-layer logits over the plain Llama's: ``f^2``."""
    rope = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 64,
            "rope_theta": 1e30}
    kw = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
              num_attention_heads=4, num_key_value_heads=4, head_dim=8,
              max_position_embeddings=1024)
    ratios = []
    for params in (rope, {"rope_type": "default", "rope_theta": 1e30}):
        cfg = transformers.LlamaConfig(**kw, rope_parameters=params)
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg).eval()
        model.set_attn_implementation("eager")
        with torch.no_grad():
            for proj in (model.model.layers[0].self_attn.q_proj,
                         model.model.layers[0].self_attn.k_proj):
                w = proj.weight.view(-1, 8, 32)
                w[:, [0, 1, 2, 4, 5, 6]] = 0  # the slowest rotary pair only
        ratios.append(_first_layer_log_ratio(model, 12))
    cfg = {"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 4,
           "max_position_embeddings": 1024, "rope_scaling": dict(rope, type="yarn")}
    (prior,) = [h.prior for h in diagnose(_write(tmp_path, cfg), window=4, lengths=[12]).heads]
    assert ratios[0] / ratios[1] == pytest.approx(prior.temperature.at(12), rel=1e-4)
    assert prior.temperature.at(12) == pytest.approx((0.1 * math.log(16) + 1) ** 2)


def test_qwen_logn_is_the_original_codes_table(tmp_path):
    seq_length = 2048
    table = [math.log(i, seq_length) if i > seq_length else 1 for i in range(1, 32768)]
    cfg = {"model_type": "qwen", "num_hidden_layers": 2, "num_attention_heads": 4,
           "use_logn_attn": True, "seq_length": seq_length, "rotary_emb_base": 10000}
    (prior,) = [h.prior for h in diagnose(_write(tmp_path, cfg), window=4,
                                          lengths=[4096]).heads]
    for length in (1, 2047, 2048, 2049, 4096, 32767):
        assert prior.temperature.at(length) == pytest.approx(table[length - 1], rel=1e-15)
    assert prior.temperature.critical_bound() == pytest.approx(math.log(seq_length) / 2)

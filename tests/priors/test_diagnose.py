"""``python -m priors.diagnose`` without torch: configs, synthetic safetensors, bad input.

Reference values come from closed forms evaluated independently (mpmath geometric sums
for ALiBi, ``W / l`` for a uniform prior, the span formula for a sliding window) and from
the raw arrays written into the synthetic checkpoints; the models' own code is compared in
``test_diagnose_models.py``.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import mpmath
import numpy as np
import pytest

from priors.diagnose import diagnose
from priors.diagnose.__main__ import main
from priors.diagnose.alibi import bfloat16_round, bloom_slopes, mpt_slopes
from priors.encodings import alibi_slopes
from priors.margin import select_margin

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_config(directory, cfg) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "config.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    return path


BLOOM = {"model_type": "bloom", "n_layer": 3, "n_head": 6, "hidden_size": 48}


def alibi_distant(m: float, w: int, n: int) -> mpmath.mpf:
    """Closed form of ALiBi's distant mass: (e^{-mW} - e^{-mn}) / (1 - e^{-mn})."""
    with mpmath.workdps(60):
        m = mpmath.mpf(m)
        return (mpmath.exp(-m * w) - mpmath.exp(-m * n)) / (1 - mpmath.exp(-m * n))


# ----------------------------------------------------------------------------- ALiBi


def test_bloom_config_slopes_masses_and_limit(tmp_path):
    cfg = write_config(tmp_path, BLOOM)
    r = diagnose(cfg, window=16, lengths=[64, 10**15])
    slopes = [h.prior.params["slope"] for h in r.heads]
    # BLOOM's float32 arithmetic is exact here (bases 2^-2 and 2^-1): the reference set
    assert slopes == alibi_slopes(6)
    assert [h.prior.layers for h in r.heads] == [None] * 6  # shared by every layer
    for h in r.heads:
        m = h.prior.params["slope"]
        assert h.prior.classification.label == "summable"
        for row in h.masses:
            exact = alibi_distant(m, 16, row["length"])
            # 30 significant digits computed: relative agreement 1e-28
            assert abs(row["distant_mass"] - exact) <= mpmath.mpf(10) ** -28 * exact
        with mpmath.workdps(40):
            assert abs(h.limit_window_mass - (1 - mpmath.exp(-16 * mpmath.mpf(m)))) < 1e-28


def test_mpt_slopes_match_reference_and_bias_max():
    # MosaicML's ordering equals the reference set whenever bias_max = 8, up to the two
    # float32 roundings of fl32(1 / fl32(2^e)) (relative 2^-23) ...
    for h in (1, 2, 3, 5, 6, 8, 12, 24, 32, 40, 48, 64):
        assert list(mpt_slopes(h)) == pytest.approx(alibi_slopes(h), rel=2**-23)
    # ... and with another bias_max the slopes are 2^(-b k / P) in the same order (powers of
    # two: exact in float32)
    assert list(mpt_slopes(4, 16.0)) == [2.0**-4, 2.0**-8, 2.0**-12, 2.0**-16]
    assert list(mpt_slopes(3, 16.0)) == [2.0**-8, 2.0**-16, 2.0**-4]


def test_bloom_float32_slopes_within_one_rounding_chain_of_the_ideal_ones():
    """fl32(fl32(2^(-8/P))^k): the base's rounding (relative <= 2^-24) raised to the power
    k <= P, then one more rounding: relative error <= (k + 1) 2^-24 against 2^(-8k/H)."""
    for h in (1, 3, 5, 12, 30, 32, 40, 64, 112):
        ours = bloom_slopes(h).astype(np.float64)
        ideal = np.asarray(alibi_slopes(h))
        k = np.concatenate([np.arange(1, 2 ** (h.bit_length() - 1) + 1),
                            np.arange(1, 2 * h, 2)])[:h]
        assert np.all(np.abs(ours / ideal - 1) <= (k + 1) * 2.0**-24 * 1.01)


def test_bfloat16_round_ties_to_even():
    x = np.array([2 ** (-0.25), 1.0, 1 + 2**-8, 1 + 3 * 2**-8, -1.5], dtype=np.float32)
    out = bfloat16_round(x)
    # 2^-0.25 = 0.8408964...: nearest bfloat16 (8 significant bits) is 215/256
    assert out[0] == np.float32(215 / 256)
    assert out[1] == 1.0
    assert out[2] == 1.0  # halfway between 1 and 1 + 2^-7: ties to even (1)
    assert out[3] == np.float32(1 + 2**-6)  # halfway, rounds to the even 1 + 2^-6
    assert out[4] == -1.5


def test_falcon_alibi_scaled_bf16_slopes(tmp_path):
    cfg = write_config(tmp_path, {"model_type": "falcon", "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "hidden_size": 64, "alibi": True})
    r = diagnose(cfg, window=4, lengths=[32])
    scale = 1 / np.sqrt(16)
    # H = 4: BLOOM's float32 slopes are exact powers of two, then rounded to bfloat16
    expected = [float(s) * scale for s in bfloat16_round(np.float32(alibi_slopes(4)))]
    assert [h.prior.params["slope"] for h in r.heads] == pytest.approx(expected, rel=1e-15)
    # the eager transformers path applies twice the slope: measured against that
    assert [h.prior.measured_encoding.slope for h in r.heads] == pytest.approx(
        [2 * e for e in expected], rel=1e-15)


def test_falcon_without_alibi_is_rotary(tmp_path):
    cfg = write_config(tmp_path, {"model_type": "falcon", "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "hidden_size": 64, "alibi": False})
    r = diagnose(cfg, window=4, lengths=[32])
    assert [h.prior.mechanism for h in r.heads] == ["rotary"]


# ------------------------------------------------------------------- bounded positions


@pytest.mark.parametrize("model_type, mechanism", [("llama", "rotary"), ("gpt2", "absolute"),
                                                   ("qwen2", "rotary"), ("gpt_neox", "rotary")])
def test_bounded_positional_terms_dilute_like_w_over_l(tmp_path, model_type, mechanism):
    cfg = write_config(tmp_path, {"model_type": model_type, "num_hidden_layers": 4,
                                  "num_attention_heads": 8, "max_position_embeddings": 2048})
    r = diagnose(cfg, window=512, lengths=[4096, 10**12], tol=0.1)
    (h,) = r.heads  # one prior shared by every layer and head
    assert (h.prior.layers, h.prior.head, h.prior.mechanism) == (None, None, mechanism)
    assert h.prior.classification.label == "dilutes"
    assert "bounded" in h.prior.classification.evidence["why"]
    for row in h.masses:  # uniform prior: M = W / l exactly (30 digits computed)
        with mpmath.workdps(40):
            exact = mpmath.mpf(512) / row["length"]
            assert abs(row["window_mass"] - exact) <= mpmath.mpf(10) ** -29 * exact
    assert h.within_tol is False
    # the margin offered is priors.margin's for the same W, L0, L1, tol
    assert r.margin.delta == select_margin(512, 10**12, 0.1).delta


def test_mistral_sliding_window_is_summable(tmp_path):
    cfg = write_config(tmp_path, {"model_type": "mistral", "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "sliding_window": 4096})
    r = diagnose(cfg, window=512, lengths=[2048, 10**15])
    assert [h.prior.layers for h in r.heads] == [None]  # every layer: one entry
    for h in r.heads:
        assert h.prior.classification.label == "summable"
        assert h.masses[0]["distant_mass"] == mpmath.mpf(2048 - 512) / 2048
        assert h.masses[1]["distant_mass"] == mpmath.mpf(4096 - 512) / 4096


def test_gemma2_layer_types_alternate(tmp_path):
    cfg = write_config(tmp_path, {
        "model_type": "gemma2", "num_hidden_layers": 4, "num_attention_heads": 4,
        "sliding_window": 64,
        "layer_types": ["sliding_attention", "full_attention"] * 2})
    r = diagnose(cfg, window=8, lengths=[128])
    assert [(h.prior.layers, h.prior.classification.label) for h in r.heads] == [
        ((0, 2), "summable"), ((1, 3), "dilutes")]


# -------------------------------------------------------------------- T5 (safetensors)


def _t5_checkpoint(directory, tables, *, model_type="t5", nb=8, md=20, per_layer=False,
                   bf16=False):
    """A synthetic T5 checkpoint: config + the relative_attention_bias tables only."""
    from safetensors.numpy import save_file

    heads = next(iter(tables.values())).shape[1]
    write_config(directory, {"model_type": model_type, "num_layers": 2, "num_heads": heads,
                             "relative_attention_num_buckets": nb,
                             "relative_attention_max_distance": md})
    key = "{}.block.{}.layer.0.SelfAttention.relative_attention_bias.weight"
    arrays = {key.format(stack, layer): t for (stack, layer), t in tables.items()}
    path = os.path.join(directory, "model.safetensors")
    if not bf16:
        save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()},
                  path)
        return
    # bfloat16: numpy has no such type; write the file by hand (header + top 16 bits)
    header, blobs, offset = {}, [], 0
    for k, v in arrays.items():
        bits = (np.asarray(v, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
        blob = bits.tobytes()
        header[k] = {"dtype": "BF16", "shape": list(v.shape),
                     "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def test_t5_tables_read_from_safetensors(tmp_path):
    rng = np.random.default_rng(0)
    dec = rng.normal(size=(8, 3)).astype(np.float32)
    enc = rng.normal(size=(8, 3)).astype(np.float32)
    _t5_checkpoint(tmp_path, {("decoder", 0): dec, ("encoder", 0): enc})
    r = diagnose(str(tmp_path), window=4, lengths=[50, 10**15])
    assert [h.prior.head for h in r.heads] == [0, 1, 2]
    for h, res in enumerate(r.heads):
        assert res.prior.params["table"] == [float(x) for x in dec[:, h]]
        assert res.prior.classification.label == "dilutes"
        # independent evaluation: sum e^{table[bucket(d)]} by brute force over d < 50
        # (float32 and float64 buckets agree for (8, 20) on these distances)
        from priors.encodings import t5_bucket

        e = np.exp(dec[t5_bucket(np.arange(50), 8, 20), h].astype(np.float64))
        assert float(res.masses[0]["window_mass"]) == pytest.approx(e[:4].sum() / e.sum(),
                                                                    rel=1e-13)
    # the encoder's last row: the past half (4 buckets) of the bidirectional table
    assert [res.prior.params["table"] for res in r.encoder_heads] == [
        [float(x) for x in enc[:4, h]] for h in range(3)]


def test_umt5_has_one_table_per_layer_and_bf16_is_exact(tmp_path):
    rng = np.random.default_rng(1)
    t0 = rng.normal(size=(8, 2)).astype(np.float32)
    t1 = rng.normal(size=(8, 2)).astype(np.float32)
    _t5_checkpoint(tmp_path, {("decoder", 0): t0, ("decoder", 1): t1}, model_type="umt5",
                   bf16=True)
    r = diagnose(str(tmp_path), window=4, lengths=[32])
    assert [(h.prior.layers, h.prior.head) for h in r.heads] == [
        ((0,), 0), ((0,), 1), ((1,), 0), ((1,), 1)]
    widened = (t0.view(np.uint32) & 0xFFFF0000).view(np.float32)  # bf16 truncation written
    assert r.heads[1].prior.params["table"] == [float(x) for x in widened[:, 1]]


def test_t5_config_only_has_class_but_no_masses(tmp_path):
    cfg = write_config(tmp_path, {"model_type": "t5", "num_layers": 2, "num_heads": 2})
    r = diagnose(cfg, window=4, lengths=[32])
    assert [h.prior.classification.label for h in r.heads] == ["dilutes"] * 2
    assert all(h.masses == [] for h in r.heads)


# ------------------------------------------------------------------------------- the CLI


def test_json_schema(tmp_path, capsys):
    cfg = write_config(tmp_path, BLOOM)
    assert main([cfg, "--window", "8", "--length", "64", "1e15", "--score-bound", "0.5",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == cfg
    assert len(out["heads"]) == 6
    h = out["heads"][0]
    for key in ("layers", "head", "mechanism", "params", "class", "masses"):
        assert key in h
    assert h["layers"] is None and h["head"] == 0 and h["mechanism"] == "alibi"
    assert [m["length"] for m in h["masses"]] == [64, 10**15]
    m = h["masses"][0]
    assert isinstance(m["window_mass"], str) and isinstance(m["distant_mass"], str)
    lo, hi = (mpmath.mpf(x) for x in m["window_mass_bracket"])
    assert lo <= mpmath.mpf(m["window_mass"]) <= hi
    # the command prints Diagnosis.to_json(indent=2), the JSON text of to_dict()
    diag = diagnose(cfg, window=8, lengths=[64, 10**15], score_bound=0.5)
    assert diag.to_dict() == out
    assert diag.to_json(indent=2) == json.dumps(out, indent=2)


def test_text_states_precision_and_tol(tmp_path, capsys):
    cfg = write_config(tmp_path, {"model_type": "llama", "num_hidden_layers": 2,
                                  "num_attention_heads": 4})
    assert main([cfg, "--window", "64", "--length", "4096", "--tol", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "significant digits" in out and "margin" in out and "NO" in out


def test_plot_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    cfg = write_config(tmp_path, BLOOM)
    png = tmp_path / "d.png"
    assert main([cfg, "--window", "8", "--length", "64", "4096", "--plot", str(png)]) == 0
    assert png.stat().st_size > 1000


def _bad(argv, capsys) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("priors.diagnose: error:")
    return lines[0]


def test_bad_input_one_line_exit_2(tmp_path, capsys):
    assert "no such file" in _bad([str(tmp_path / "missing")], capsys)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "not valid JSON" in _bad([str(broken)], capsys)
    bert = write_config(tmp_path / "bert", {"model_type": "bert", "num_hidden_layers": 2,
                                            "num_attention_heads": 2})
    assert "encoder-only" in _bad([bert], capsys)
    odd = write_config(tmp_path / "odd", {"model_type": "my-own", "num_hidden_layers": 2})
    assert "unsupported model_type" in _bad([odd], capsys)
    nohead = write_config(tmp_path / "nohead", {"model_type": "bloom", "n_layer": 2})
    assert "heads" in _bad([nohead], capsys)
    odd_attn = write_config(tmp_path / "mpt", {"model_type": "mpt", "n_layers": 2, "n_heads": 2,
                                               "attn_config": [1, 2]})
    assert "config" in _bad([odd_attn], capsys)
    cfg = write_config(tmp_path / "ok", BLOOM)
    assert "window" in _bad([cfg, "--window", "100", "--length", "50"], capsys)
    assert "tol" in _bad([cfg, "--tol", "2"], capsys)
    # a broken safetensors file next to a T5 config
    t5 = tmp_path / "t5"
    write_config(t5, {"model_type": "t5", "num_layers": 2, "num_heads": 2})
    (t5 / "model.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{garb")
    assert "safetensors" in _bad([str(t5)], capsys)


def test_nothing_written_on_error(tmp_path, capsys):
    png = tmp_path / "never.png"
    _bad([str(tmp_path / "missing"), "--plot", str(png)], capsys)
    assert not png.exists()
    assert os.listdir(tmp_path) == []


def test_config_only_path_imports_no_torch(tmp_path):
    cfg = write_config(tmp_path, BLOOM)
    code = (
        "import sys\n"
        "from priors.diagnose.__main__ import main\n"
        f"assert main([{cfg!r}, '--json']) == 0\n"
        "heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'sympy') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_benchmark_naive_baseline_agrees_and_runs(tmp_path):
    """The benchmark's naive O(l) baseline computes the same mass as the diagnosis."""
    pytest.importorskip("safetensors")
    from benchmarks.diagnose import naive_alibi_distant, write_t5_base

    cfg = write_config(tmp_path / "b", BLOOM)
    r = diagnose(cfg, window=64, lengths=[10**4])
    for h in r.heads:
        naive = naive_alibi_distant(h.prior.params["slope"], 64, 10**4)
        exact = float(h.masses[0]["distant_mass"])
        # 1e4 float64 terms; relative error well below 1e-10 unless the mass underflows
        assert naive == pytest.approx(exact, rel=1e-10, abs=1e-300)
    os.makedirs(tmp_path / "t5")
    write_t5_base(str(tmp_path / "t5"))
    t5 = diagnose(str(tmp_path / "t5"), window=512, lengths=[4096])
    assert len(t5.heads) == 12 and len(t5.encoder_heads) == 12

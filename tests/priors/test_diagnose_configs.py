"""``priors.diagnose`` from configs and synthetic files, without torch: windows and chunks,
MPT as transformers runs it, temperatures in the brackets, refusals, hostile files, the
options' limits and the plot.

References are closed forms evaluated independently: a uniform prior over ``k`` keys has
``D = (k - W) / k``; Theorem 3's bracket of a uniform prior is
``D^+ = E (l - W) / (W + E (l - W))`` with ``E = e^{2B}``; the MPT slopes transformers
applies are ``2^(-8 k / P)``.
"""

from __future__ import annotations

import json
import math
import os
import struct

import mpmath
import numpy as np
import pytest

from priors.diagnose import diagnose
from priors.diagnose.__main__ import main
from priors.diagnose.report import DPS_RANGE
from priors.diagnose.windowed import ChunkedWindow
from priors.encodings import NoPE


def _cfg(tmp_path, cfg: dict, name: str = "c") -> str:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def _ratio(x, num: int, den: int) -> bool:
    """``x`` (30 significant digits computed) equals ``num / den`` to 1e-28 relative."""
    with mpmath.workdps(40):
        ref = mpmath.mpf(num) / den
        return abs(x - ref) <= mpmath.mpf(10) ** -28 * ref


def _bad(argv, capsys) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("priors.diagnose: error:"), lines
    return lines[0]


def test_phi3_sliding_window_is_applied(tmp_path):
    """Phi-3-mini-4k's numbers: sliding_window = 2047 on every layer, so at
    l = 4096 with W = 512 the last row sees 2047 keys: D = 1535 / 2047 = 0.7499, not 0.875."""
    d = _cfg(tmp_path, {"model_type": "phi3", "num_hidden_layers": 32,
                        "num_attention_heads": 32, "sliding_window": 2047,
                        "max_position_embeddings": 4096})
    (h,) = diagnose(d, window=512, lengths=[4096]).heads
    assert h.prior.encoding.span == 2047
    assert _ratio(h.masses[0]["distant_mass"], 1535, 2047)


def test_gpt_neo_local_layers(tmp_path):
    d = _cfg(tmp_path, {"model_type": "gpt_neo", "num_layers": 24, "num_heads": 16,
                        "max_position_embeddings": 2048})  # defaults: global/local x 12, 256
    r = diagnose(d, window=64, lengths=[600])
    assert [(h.prior.layers, h.prior.params.get("sliding_window")) for h in r.heads] == [
        (tuple(range(0, 24, 2)), None), (tuple(range(1, 24, 2)), 256)]
    # the local layers' last row sees 256 of 600 keys
    assert _ratio(r.heads[1].masses[0]["distant_mass"], 256 - 64, 256)
    assert _ratio(r.heads[0].masses[0]["distant_mass"], 600 - 64, 600)


def test_mpt_as_transformers_runs_it(tmp_path, capsys):
    """MosaicML's code reads alibi and alibi_bias_max; transformers' MptModel always adds
    ALiBi with alibi_bias_max = 8: that is the prior --measure checks."""
    base = {"model_type": "mpt", "n_layers": 2, "n_heads": 4, "d_model": 32}
    ideal = [2.0 ** (-8 * k / 4) for k in range(1, 5)]  # powers of two: exact in float32
    off = diagnose(_cfg(tmp_path, {**base, "attn_config": {"alibi": False}}, "off"),
                   window=4, lengths=[64])
    assert [h.prior.encoding.name for h in off.heads] == ["nope"] * 4
    assert [h.prior.measured_encoding.slope for h in off.heads] == ideal
    four = diagnose(_cfg(tmp_path, {**base, "attn_config": {"alibi_bias_max": 4}}, "four"),
                    window=4, lengths=[64])
    assert [h.prior.encoding.slope for h in four.heads] == [2.0 ** (-k) for k in range(1, 5)]
    assert [h.prior.measured_encoding.slope for h in four.heads] == ideal
    assert main([_cfg(tmp_path, {**base, "attn_config": {"alibi_bias_max": 4}}, "four")]) == 0
    assert "transformers' MptModel always uses 8" in capsys.readouterr().out
    huge = _cfg(tmp_path, {**base, "attn_config": {"alibi_bias_max": 1e308}}, "huge")
    assert "underflow to 0" in _bad([huge], capsys)
    listed = _cfg(tmp_path, {**base, "attn_config": [1, 2]}, "listed")
    msg = _bad([listed], capsys)
    assert "attn_config must be a JSON object, got a list" in msg and "Error" not in msg


def test_rope_theta_from_rope_parameters_and_non_finite_refused(tmp_path, capsys):
    base = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4}
    v5 = diagnose(_cfg(tmp_path, {**base, "rope_parameters": {"rope_type": "default",
                                                              "rope_theta": 500000.0}}, "v5"),
                  window=4, lengths=[64])
    assert v5.heads[0].prior.params["rope_theta"] == 500000.0
    none = diagnose(_cfg(tmp_path, base, "none"), window=4, lengths=[64])
    assert none.heads[0].prior.params["rope_theta"] == "not in the config"
    d = tmp_path / "nan"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 2, '
                                   '"num_attention_heads": 4, "rope_theta": NaN}')
    assert "rope_theta is not a finite number" in _bad([str(d)], capsys)


def test_unknown_family_with_rotary_keys_is_assumed_and_said_so(tmp_path, capsys):
    d = _cfg(tmp_path, {"model_type": "my-rotary", "num_hidden_layers": 2,
                        "num_attention_heads": 4, "rope_theta": 10000.0})
    assert main([d]) == 0
    assert "rotary positions are assumed" in capsys.readouterr().out


def test_unknown_window_is_refused_not_ignored(tmp_path, capsys):
    d = _cfg(tmp_path, {"model_type": "my-rotary", "num_hidden_layers": 2,
                        "num_attention_heads": 4, "rope_theta": 10000.0,
                        "sliding_window": 128})
    r = diagnose(d, window=4, lengths=[64])
    assert [h.prior.refusal is not None and h.masses == [] for h in r.heads] == [True]
    assert main([d, "--window", "4", "--length", "64"]) == 0
    out = capsys.readouterr().out
    assert "refused" in out and "how model_type 'my-rotary' applies it is not known" in out
    assert "nothing to draw" in _bad([d, "--window", "4", "--length", "64", "--plot",
                                      str(tmp_path / "p.png")], capsys)
    assert not (tmp_path / "p.png").exists()


def _safetensors(path, tensors: dict, *, truncate: int = 0, pad: int = 0) -> None:
    header, blobs, offset = {}, [], 0
    for k, v in tensors.items():
        blob = np.ascontiguousarray(v, dtype="<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape),
                     "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    data = struct.pack("<Q", len(raw)) + raw + b"".join(blobs) + b"\0" * pad
    path.write_bytes(data[: len(data) - truncate])


def test_weight_files_checked_and_kept_inside_the_directory(tmp_path, capsys):
    bloom = {"model_type": "bloom", "n_layer": 2, "n_head": 4, "hidden_size": 32}
    ok = tmp_path / "ok"
    _cfg(tmp_path, bloom, "ok")
    _safetensors(ok / "model.safetensors", {"w": np.zeros((4, 4))})
    assert main([str(ok), "--window", "4", "--length", "64"]) == 0
    assert "(not read: the prior comes from the config)" in capsys.readouterr().out
    cut = tmp_path / "cut"
    _cfg(tmp_path, bloom, "cut")
    _safetensors(cut / "model.safetensors", {"w": np.zeros((4, 4))}, truncate=5)
    assert "is truncated" in _bad([str(cut)], capsys)
    padded = tmp_path / "padded"
    _cfg(tmp_path, bloom, "padded")
    _safetensors(padded / "model.safetensors", {"w": np.zeros((4, 4))}, pad=3)
    assert "3 bytes after the last tensor" in _bad([str(padded)], capsys)
    out = tmp_path / "evil"
    _cfg(tmp_path, bloom, "evil")
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w": "../../../../etc/passwd"}}))
    assert "outside the model directory" in _bad([str(out)], capsys)
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w": "/etc/passwd"}}))
    assert "outside the model directory" in _bad([str(out)], capsys)


def test_t5_weights_read_and_longt5_encoders(tmp_path, capsys):
    rng = np.random.default_rng(0)
    key = "{}.block.0.layer.0.{}.relative_attention_bias.weight"
    tables = {key.format("decoder", "SelfAttention"): rng.normal(size=(8, 2)),
              key.format("encoder", "LocalSelfAttention"): rng.normal(size=(8, 2))}
    cfg = {"model_type": "longt5", "num_layers": 2, "num_heads": 2,
           "relative_attention_num_buckets": 8, "relative_attention_max_distance": 20,
           "local_radius": 5}
    d = tmp_path / "local"
    _cfg(tmp_path, cfg, "local")
    _safetensors(d / "model.safetensors", tables)
    r = diagnose(str(d), window=2, lengths=[64])
    assert [h.prior.encoding.span for h in r.encoder_heads] == [6, 6]  # local_radius + 1
    assert r.model.weights_read == [str(d / "model.safetensors")]
    assert main([str(d), "--window", "2", "--length", "64"]) == 0
    assert "weights read: model.safetensors" in capsys.readouterr().out
    g = tmp_path / "global"
    _cfg(tmp_path, {**cfg, "encoder_attention_type": "transient-global"}, "global")
    _safetensors(g / "model.safetensors", tables)
    r = diagnose(str(g), window=2, lengths=[64])
    assert r.encoder_heads == [] and "transient-global" in r.model.encoder_note
    assert main([str(g), "--window", "2", "--length", "64"]) == 0
    assert "encoder heads: left out" in capsys.readouterr().out


def test_dps_has_one_range_at_every_door(tmp_path, capsys):
    d = _cfg(tmp_path, {"model_type": "bloom", "n_layer": 2, "n_head": 4})
    lo, hi = DPS_RANGE
    for bad in (lo - 1, hi + 1, 5):
        msg = _bad([d, "--dps", str(bad)], capsys)
        assert "--dps" in msg and f"[{lo}, {hi}]" in msg and "--digits" not in msg
        with pytest.raises(ValueError, match=r"dps must be an integer in"):
            diagnose(d, dps=bad)
    assert main([d, "--dps", str(hi), "--length", "4096"]) == 0
    assert main([d, "--dps", str(lo), "--length", "4096"]) == 0
    capsys.readouterr()
    assert "--digits" in _bad([d, "--dps", str(lo), "--digits", str(lo + 1)], capsys)


def test_plot_refuses_empty_names_and_empty_charts(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    bloom = _cfg(tmp_path, {"model_type": "bloom", "n_layer": 2, "n_head": 4})
    assert "--plot" in _bad([bloom, "--plot", ""], capsys)
    assert "--plot-log only applies with --plot" in _bad([bloom, "--plot-log"], capsys)
    t5 = _cfg(tmp_path, {"model_type": "t5", "num_layers": 2, "num_heads": 2}, "t5")
    png = tmp_path / "t5.png"
    assert "nothing to draw" in _bad([t5, "--plot", str(png)], capsys)
    assert not png.exists()
    out = tmp_path / "log.png"
    assert main([bloom, "--window", "8", "--length", "64", "4096", "--plot", str(out),
                 "--plot-log"]) == 0
    assert out.stat().st_size > 1000


def test_plot_labels_every_curve_with_its_own_style(tmp_path):
    pytest.importorskip("matplotlib")
    from priors.diagnose.plot import _panels, plot_curves

    d = _cfg(tmp_path, {"model_type": "bloom", "n_layer": 30, "n_head": 32})
    r = diagnose(d, window=8, lengths=[64, 4096])
    curves = plot_curves(r, points=8)
    assert len(curves) == 32
    assert len({c.label for c in curves}) == 32  # every head labelled, heads 28-31 too
    assert curves[31].label == "all layers, head 31"
    assert list(_panels(curves)) == ["decoder"]  # 32 <= 40 curves: one panel
    g = _cfg(tmp_path, {"model_type": "gemma2", "num_hidden_layers": 6,
                        "num_attention_heads": 4, "sliding_window": 16}, "g")
    (sliding, full) = plot_curves(diagnose(g, window=4, lengths=[64]), points=8)
    assert sliding.label == "layers 0,2,4, all heads" and full.label.startswith("layers 1,3,5")


def test_chunked_window_masses_are_uniform_over_the_chunk():
    enc = ChunkedWindow(base=NoPE(), chunk=100)
    for length in (100, 101, 150, 200, 12345):
        k = (length - 1) % 100 + 1
        assert _ratio(enc.window_mass(30, length), min(30, k), k)
    assert enc.classify().label == "summable" and not enc.limit_known


def test_temperature_scales_the_bound_in_each_bracket(tmp_path):
    """Qwen's logn: at l the bracket is Theorem 3's with B replaced by tau(l) B, for a
    uniform prior D^+ = E (l - W) / (W + E (l - W)), E = e^{2 tau B}."""
    d = _cfg(tmp_path, {"model_type": "qwen", "num_hidden_layers": 2,
                        "num_attention_heads": 4, "seq_length": 1024,
                        "rotary_emb_base": 10000})
    b, w = 0.25, 64
    r = diagnose(d, window=w, lengths=[512, 4096, 10**6], score_bound=b)
    (h,) = r.heads
    for row in h.masses:
        length = row["length"]
        tau = max(1.0, math.log(length) / math.log(1024))
        assert row["temperature"] == tau
        with mpmath.workdps(40):
            e = mpmath.exp(2 * mpmath.mpf(tau * b))  # tau B rounded to float64, as stated
            ref = e * (length - w) / (w + e * (length - w))
            assert abs(row["distant_mass_bracket"][1] - ref) <= mpmath.mpf(10) ** -28 * ref
    assert h.prior.classification.evidence["critical_score_bound"] == pytest.approx(
        math.log(1024) / 2)
    text = json.dumps(r.to_dict())
    assert "NaN" not in text and "Infinity" not in text


def test_plot_output_path_policy(tmp_path, capsys):
    """--plot is checked before any work: a device, a FIFO, a directory, a dangling link,
    a missing directory or a suffix matplotlib cannot write is one line, exit 2, and left
    as it was; a regular file (or the file a link points to) is replaced atomically."""
    pytest.importorskip("matplotlib")
    bloom = _cfg(tmp_path, {"model_type": "bloom", "n_layer": 2, "n_head": 4})
    args = [bloom, "--window", "8", "--length", "64"]
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling.png"
    dangling.symlink_to(tmp_path / "nowhere.png")
    folder = tmp_path / "folder.png"
    folder.mkdir()
    for bad in ("/dev/null", str(fifo), str(dangling), str(folder),
                str(tmp_path / "missing" / "p.png"), str(tmp_path / "p.xyz"), ""):
        assert "--plot" in _bad([*args, "--plot", bad], capsys)
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    assert fifo.is_fifo() and dangling.is_symlink() and folder.is_dir()
    target = tmp_path / "target.png"
    target.write_bytes(b"old")
    link = tmp_path / "link.png"
    link.symlink_to(target)
    assert main([*args, "--plot", str(link)]) == 0
    assert link.is_symlink() and target.read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_weight_index_naming_a_fifo_is_refused_not_read(tmp_path, capsys):
    d = tmp_path / "fifo"
    _cfg(tmp_path, {"model_type": "t5", "num_layers": 2, "num_heads": 2}, "fifo")
    os.mkfifo(d / "shard.safetensors")  # reading it would block forever
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w": "shard.safetensors"}}))
    assert "not a regular file" in _bad([str(d)], capsys)

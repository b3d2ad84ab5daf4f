"""``--measure``'s check and verdicts: the vectorised check against a row-by-row reference,
and every way the verdict can fail, be inconclusive or warn.

The reference (``_naive``) walks each row of each head in plain numpy: it takes the logs of
the weights, subtracts the bias the prior gives at each visible distance, and evaluates
Theorem 3's bracket from exact mpmath sums of ``e^{b(d)}`` (``Encoding.weight_sum``), none of
which the vectorised check uses (it multiplies by ``e^{-b}``, keeps running float64 sums
and splits the rows into blocks and the heads over threads).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace

import mpmath
import numpy as np
import pytest

from priors.diagnose import checks
from priors.diagnose.checks import check_layer, row_prior
from priors.diagnose.measurement import Measurement
from priors.diagnose.windowed import ChunkedWindow, SlidingWindow
from priors.encodings import ALiBi, NoPE, T5Buckets


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(-1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def _attention(enc, n: int, heads: int, scale: float, seed: int) -> np.ndarray:
    """Softmax of content N(0, scale^2) plus the prior's bias, over the keys it allows."""
    rng = np.random.default_rng(seed)
    out = np.zeros((heads, n, n), dtype=np.float32)
    for i in range(n):
        length = i + 1
        b = np.asarray(enc.bias(np.arange(length, dtype=float),
                                length=length if enc.length_dependent else None))[::-1]
        z = np.where(np.isfinite(b), b + scale * rng.standard_normal((heads, length)), -np.inf)
        out[:, i, :length] = _softmax_rows(z)
    return out


def _naive(a: np.ndarray, enc, window: int) -> dict:
    """Row by row: measured masses, spread, the brackets of ``M`` and of ``D`` from exact
    sums (module docstring)."""
    n = a.shape[-1]
    checked = outside = trivial = 0
    spreads, slack = [], []
    for i in range(window - 1, n):
        length = i + 1
        lkw = length if enc.length_dependent else None
        b = np.asarray(enc.bias(np.arange(length, dtype=float), length=lkw))
        w = a[i, i::-1].astype(np.float64)  # by distance
        seen = np.isfinite(b)
        s_w = enc.weight_sum(0, window, length=lkw, dps=30)
        t = enc.weight_sum(window, length, length=lkw, dps=30)
        if t == 0:
            trivial += 1
            continue
        s = np.log(w[seen]) - b[seen]
        spread = (s.max() - s.min()) / 2
        x = w[:window][seen[:window]].sum()
        y = w[window:][seen[window:]].sum()
        m, dist = x / (x + y), y / (x + y)
        with mpmath.workdps(30):  # Theorem 3 for M and for D = 1 - M
            e = mpmath.exp(2 * mpmath.mpf(spread))
            m_lo, m_hi = s_w / (s_w + e * t), e * s_w / (e * s_w + t)
            d_lo, d_hi = t / (e * s_w + t), e * t / (s_w + e * t)
        checked += 1
        spreads.append(spread)
        slack.append(float(min(min(m - m_lo, m_hi - m) / m, min(dist - d_lo, d_hi - dist) / dist)))
        outside += not (float(m_lo) * (1 - 1e-5) <= m <= float(m_hi) * (1 + 1e-5)
                        and float(d_lo) * (1 - 1e-5) <= dist <= float(d_hi) * (1 + 1e-5))
    return {"rows_checked": checked, "rows_outside": outside, "rows_trivial": trivial,
            "spread_max": max(spreads) if spreads else None,
            "spread_median": float(np.median(spreads)) if spreads else None,
            "min_relative_slack": min(slack) if slack else None}


PRIORS = {
    "nope": NoPE(),
    "alibi": ALiBi(0.3),
    "t5": T5Buckets(8, 20, tuple(np.random.default_rng(3).normal(size=8))),
    "sliding": SlidingWindow(base=ALiBi(0.05), span=21),
    "chunked": ChunkedWindow(base=NoPE(), chunk=17),
}


@pytest.mark.parametrize("name", sorted(PRIORS))
@pytest.mark.parametrize("block", [1 << 20, 300])
def test_vectorised_check_equals_the_row_by_row_reference(name, block, monkeypatch):
    """Every head's totals as the naive reference computes them; ``block = 300`` splits the
    rows into many blocks (a few rows each) and the heads over two threads."""
    monkeypatch.setattr(checks, "BLOCK_ELEMENTS", block)
    enc, n, w, heads = PRIORS[name], 70, 6, 3
    a = _attention(enc, n, heads, scale=0.7, seed=1)
    got = check_layer(a, [row_prior(enc, n, w)] * heads, w, threads=2)
    for h in range(heads):
        ref = _naive(a[h], enc, w)
        for key in ("rows_checked", "rows_outside", "rows_trivial"):
            assert got[h][key] == ref[key], key
        for key in ("spread_max", "spread_median"):
            # ours: logs of the products a_d e^{-b(d)}, formed in float32 where e^{-b} fits
            # (|b| <= 80): two roundings of 2^-24 in each of max and min, halved: 1.2e-7
            assert got[h][key] == pytest.approx(ref[key], rel=1e-9, abs=1.2e-7)
        # slack: moved by the spread's 1.2e-7 (through e^{2B}: 2.4e-7 relative) and by
        # the running sums (1e-12)
        assert got[h]["min_relative_slack"] == pytest.approx(ref["min_relative_slack"],
                                                             rel=1e-5, abs=1e-6)
        assert got[h]["rows_underflow"] == got[h]["rows_masked_by_model"] == 0
        assert got[h]["prior_sum_error"] <= 1e-12


def test_masked_keys_are_told_apart_from_underflow():
    """A window the prior lacks (the model masks keys in every head) fails as masked; a
    weight that underflowed in one head only is underflow; keys the prior masks but the
    model attends fail as such."""
    n, w, heads = 60, 4, 3
    model = SlidingWindow(base=NoPE(), span=20)  # what the "model" applies
    a = _attention(model, n, heads, scale=0.3, seed=2)
    ignored = check_layer(a, [row_prior(NoPE(), n, w)] * heads, w)  # the window ignored
    assert all(r["rows_masked_by_model"] == n - 20 for r in ignored)
    assert all(r["rows_underflow"] == 0 and r["rows_checked"] == 20 - w for r in ignored)
    a2 = a.copy()
    a2[1, 40, 30] = 0.0  # one head's weight underflowed inside the window
    right = check_layer(a2, [row_prior(model, n, w)] * heads, w)
    assert [r["rows_underflow"] for r in right] == [0, 1, 0]
    assert all(r["rows_masked_by_model"] == 0 and r["rows_attending_masked"] == 0
               for r in right)
    wider = check_layer(_attention(NoPE(), n, heads, 0.3, 4), [row_prior(model, n, w)] * heads,
                        w)
    assert all(r["rows_attending_masked"] == n - 20 for r in wider)


def test_trivial_rows_are_left_out_of_the_slack_and_length_w_is_inconclusive():
    n, w = 8, 8  # only the row l = W: no distant key, M = 1 whatever the content
    a = _attention(NoPE(), n, 2, 1.0, 0)
    rows = check_layer(a, [row_prior(NoPE(), n, w)] * 2, w)
    assert all(r["rows_checked"] == 0 and r["rows_trivial"] == 1 for r in rows)
    assert all(r["min_relative_slack"] is None for r in rows)
    meas = Measurement(w, [n], "test", [dict(r, length=n, layer=0, head=h)
                                        for h, r in enumerate(rows)])
    verdict, reasons, _ = meas.findings()
    assert verdict == "inconclusive" and "no row could be checked" in reasons[0]
    # strict JSON: no NaN or Infinity anywhere
    json.loads(meas.to_json(), parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))


def test_far_and_implausible_warnings():
    """The bias subtracted differs from the one applied (MPT's alibi_bias_max 4 against
    transformers' 8): the check still passes (the spread absorbs it), but the spread is
    implausible and the masses are far from the prior, and the output says so."""
    n, w, heads = 64, 8, 2
    applied, assumed = ALiBi(2.0**-4), ALiBi(4.0)  # the assumed slope far too steep
    a = _attention(applied, n, heads, 0.1, 5)
    rows = check_layer(a, [row_prior(assumed, n, w)] * heads, w)
    meas = Measurement(w, [n], "test", [dict(r, length=n, layer=0, head=h)
                                        for h, r in enumerate(rows)])
    verdict, _, warnings = meas.findings()
    assert verdict == "pass"  # Theorem 3 holds for any prior, given the row's own spread
    # s_d = log a_d + 4 d grows by about 4 - 1/16 per key: a spread near 124 over 63 keys;
    # the prior's window holds all but e^{-32} of the mass, the measured one about 40%
    assert all(r["spread_max"] > 50 and r["content_needed"] > 10 for r in rows)
    assert any("far from the prior" in x for x in warnings)
    assert any("implausible" in x for x in warnings)
    right = check_layer(a, [row_prior(applied, n, w)] * heads, w)
    assert all(r["content_needed"] < 1 for r in right)  # content N(0, 0.1^2): small


def test_prior_sums_that_disagree_with_the_bias_fail_the_verdict():
    class Wrong(ALiBi):
        def _weight_sum(self, lo, hi, length, dps):
            return ALiBi(self.slope * 1.1)._weight_sum(lo, hi, length, dps)

    n, w = 40, 4
    a = _attention(ALiBi(0.2), n, 2, 0.5, 6)
    rows = check_layer(a, [row_prior(Wrong(0.2), n, w)] * 2, w)
    meas = Measurement(w, [n], "test", [dict(r, length=n, layer=0, head=h)
                                        for h, r in enumerate(rows)])
    verdict, reasons, _ = meas.findings()
    assert verdict == "fail" and "disagree" in reasons[0]


torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def phi3(tmp_path_factory):
    """A tiny Phi-3 with sliding_window = 31 on every layer."""
    cfg = transformers.Phi3Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  max_position_embeddings=512,
                                  original_max_position_embeddings=512, sliding_window=31,
                                  pad_token_id=0, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    d = str(tmp_path_factory.mktemp("phi3"))
    transformers.Phi3ForCausalLM(cfg).save_pretrained(d)
    return d


def test_an_ignored_window_fails_the_measurement(phi3, capsys, monkeypatch):
    from priors.diagnose import diagnose
    from priors.diagnose.__main__ import main
    from priors.diagnose.measure import measure

    before = dict(os.environ)
    r = diagnose(phi3, window=8, lengths=[128])
    good = measure(phi3, r.model, [128], 8, progress=None)
    # rows l = 9 .. 128 have distant keys inside the window of 31: 120 per head
    assert good.verdict == "pass" and good.rows_checked == 2 * 4 * (128 - 8)
    assert dict(os.environ) == before  # nothing written into the environment
    # the same model diagnosed as if the window were not there
    blind = replace(r.model, heads=[replace(p, encoding=NoPE()) for p in r.model.heads])
    bad = measure(phi3, blind, [128], 8, progress=None)
    verdict, reasons, _ = bad.findings()
    assert verdict == "fail" and "masks keys the prior keeps" in reasons[0]
    # the command line exits 1 and says why
    import priors.diagnose.bounded as bounded
    from priors.diagnose.layers import Layer

    monkeypatch.setattr(bounded, "layer_plan", lambda cfg, mt, n: ([Layer("full")] * n, ""))
    assert main([phi3, "--window", "8", "--length", "128", "--measure", "--measure-length",
                 "128"]) == 1
    out = capsys.readouterr().out
    assert "verdict FAIL" in out and "masks keys the prior keeps" in out


def test_text_needs_tokenizer_files(phi3, tmp_path, capsys):
    from priors.diagnose.__main__ import main

    text = tmp_path / "t.txt"
    text.write_text("some words " * 50)
    assert main([phi3, "--window", "8", "--length", "64", "--measure", "--measure-length",
                 "64", "--text", str(text)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no tokenizer files" in err[0]


def test_measure_json_is_strict_and_has_entropy_and_sinks(phi3, capsys):
    from priors.diagnose.__main__ import main

    assert main([phi3, "--window", "8", "--length", "64", "--measure", "--measure-length",
                 "64", "--json"]) == 0
    text = capsys.readouterr().out
    out = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    m = out["measure"]
    assert m["verdict"] == "pass" and m["reasons"] == []
    for rec in m["heads"]:
        # a row over k = 31 visible keys: entropy at most ln 31
        assert rec["entropy_uniform"] == pytest.approx(math.log(31), rel=1e-15)
        assert 0 < rec["entropy"] <= math.log(31) + 1e-9
        assert 0 <= rec["first_token_weight"] <= 1
    sinks = sum(r["sink"] for r in m["heads"])
    assert m["sinks"] == {"64": {"sinks": sinks, "heads": 8, "rate": sinks / 8}}

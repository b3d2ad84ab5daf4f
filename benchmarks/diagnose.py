"""Benchmark: ``priors.diagnose`` on model-sized inputs.

What is measured (wall clock, in-process, ``time.perf_counter``, median of ``repeats``
calls after one warm-up):

* ``alibi-7b``: ``priors.diagnose.diagnose`` of a config-only BLOOM-7b1-like model (30
  layers, 32 heads, written to a temporary ``config.json``) at ``W = 512`` and the default
  lengths 4096, 65536, 1e6, 1e9, 1e15 (32 distinct priors x 5 lengths); target well under
  a second;
* ``t5-base``: a T5-base-sized checkpoint (12 layers, 12 heads, 32 buckets): synthetic random
  relative-attention tables plus a T5-base-sized embedding, saved as safetensors (only the
  header and the two tables are read) -- 12 decoder + 12 encoder heads x 5 lengths; target
  a couple of seconds;
* ``naive``: the same ALiBi masses by direct float64 summation over every distance up to
  ``l`` (feasible only up to ``l = 1e6``) for one head, the cost the O(1) closed forms
  avoid; ``ratio`` rows give each diagnosis time over the naive time of one head at 1e6;
* ``bracket-check``: ``--measure``'s per-row Theorem 3 check
  (``priors.diagnose.checks.check_layer``, two threads) on synthetic attention of a
  32-layer, 32-head model at ``l = 4096`` (``W = 512``, a uniform prior: every row from
  ``l = W`` on, all heads): one layer's causal softmax of N(0, 1) logits, float32, checked
  32 times (4 with ``--quick``); one timed pass (a pass is tens of seconds; ``cpu_s`` is the
  process's CPU time over both threads, a load-independent figure), beside the row-by-row
  numpy loop of one head (``naive_bracket_check``);
* ``tiny-measure``: ``python -m priors.diagnose DIR --measure`` on a 2-layer, 4-head Llama
  (``l = 1024``) in a fresh interpreter, beside ``import torch, transformers`` and the model
  class in another: the part of ``--measure`` that is not the import.

Run alone with ``python -m benchmarks.diagnose [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

BLOOM_7B = {
    "model_type": "bloom", "architectures": ["BloomForCausalLM"], "n_layer": 30,
    "n_head": 32, "hidden_size": 4096, "vocab_size": 250880, "torch_dtype": "bfloat16",
}
T5_BASE = {
    "model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "num_layers": 12,
    "num_heads": 12, "d_model": 768, "d_kv": 64, "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128, "vocab_size": 32128,
}


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up (imports, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _row(case: str, times: list[float], **extra: object) -> dict[str, object]:
    row: dict[str, object] = {"benchmark": "diagnose", "case": case}
    row.update(extra)
    row.update(median_s=statistics.median(times), min_s=min(times), max_s=max(times),
               runs=len(times))
    return row


def write_t5_base(directory: str, seed: int = 0) -> None:
    """A T5-base-sized checkpoint's relative-attention tables (random, float32)."""
    from safetensors.numpy import save_file

    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(T5_BASE, fh)
    rng = np.random.default_rng(seed)
    key = "{}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    tensors = {key.format(s): rng.normal(size=(32, 12)).astype(np.float32)
               for s in ("encoder", "decoder")}
    # a few large unrelated tensors, as a real checkpoint has: only the header is read
    tensors["shared.weight"] = np.zeros((32128, 64), dtype=np.float32)
    save_file(tensors, os.path.join(directory, "model.safetensors"))


def naive_alibi_distant(slope: float, window: int, length: int) -> float:
    """Direct float64 summation of e^{-m d} over d < length (O(length))."""
    e = np.exp(-slope * np.arange(length, dtype=np.float64))
    return float(e[window:].sum() / e.sum())


def synthetic_layer(heads: int = 32, n: int = 4096, seed: int = 0) -> np.ndarray:
    """One layer's causal attention, ``heads x n x n`` float32: the softmax of N(0, 1)
    logits over the keys ``j <= i`` of each row (2 GiB at the default size)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((heads, n, n), dtype=np.float32)
    for i0 in range(0, n, 256):
        i1 = min(n, i0 + 256)
        z = rng.standard_normal((heads, i1 - i0, i1), dtype=np.float32)
        z[:, np.arange(i1 - i0)[:, None] < np.arange(i1)[None, :] - i0] = -np.inf
        z -= z.max(-1, keepdims=True)
        np.exp(z, out=z)
        out[:, i0:i1, :i1] = z / z.sum(-1, keepdims=True)
    return out


def naive_bracket_check(a: np.ndarray, window: int) -> int:
    """Theorem 3 on one head's rows by a plain loop (uniform prior): rows outside."""
    outside = 0
    for i in range(window, a.shape[-1]):
        row = a[i, : i + 1].astype(np.float64)
        s = np.log(row)
        b = (s.max() - s.min()) / 2
        m = row[-window:].sum() / row.sum()
        t_over_s = (i + 1 - window) / window
        lo, hi = 1 / (1 + np.exp(2 * b) * t_over_s), 1 / (1 + np.exp(-2 * b) * t_over_s)
        outside += not lo * (1 - 1e-5) <= m <= hi * (1 + 1e-5)
    return outside


def _bracket_check_rows(quick: bool) -> list[dict[str, object]]:
    from priors.diagnose.checks import check_layer, row_prior
    from priors.encodings import NoPE

    heads, n, window = 32, 4096, 512
    layers = 4 if quick else 32
    a = synthetic_layer(heads, n)
    prior = row_prior(NoPE(), n, window)
    check_layer(a[:, :1024, :1024], [row_prior(NoPE(), 1024, window)] * heads, window)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(layers):
        rows = check_layer(a, [prior] * heads, window)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert all(r["rows_outside"] == 0 for r in rows)
    t_naive = _timed(lambda: naive_bracket_check(a[0], window), 1)
    out = [_row(f"bracket-check-{layers}x{heads}x{n}", [total], layers=layers, heads=heads,
                length=n, window=window, per_layer_s=total / layers, cpu_s=cpu),
           _row("naive-bracket-check-one-head", t_naive, heads=1, length=n)]
    out.append({"benchmark": "diagnose", "case": "ratio naive one head / vectorised one head",
                "ratio": statistics.median(t_naive) / (total / layers / heads)})
    return out


def write_tiny_llama(directory: str) -> None:
    """A 2-layer, 4-head random Llama (transformers' own class), saved to ``directory``."""
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=4096)
    transformers.LlamaForCausalLM(cfg).save_pretrained(directory)


def _tiny_measure_rows(directory: str, repeats: int) -> list[dict[str, object]]:
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    measure = [sys.executable, "-m", "priors.diagnose", directory, "--window", "8",
               "--length", "1024", "--measure", "--measure-length", "1024"]
    imports = [sys.executable, "-c", "import torch, transformers; "
               "transformers.LlamaForCausalLM"]

    def call(cmd: list[str]) -> None:
        subprocess.run(cmd, check=True, capture_output=True, env=env)

    t_measure = _timed(lambda: call(measure), repeats)
    t_import = _timed(lambda: call(imports), repeats)
    return [_row("tiny-measure (2 x 4 heads, l = 1024)", t_measure, heads=8, length=1024),
            _row("import torch + transformers", t_import),
            {"benchmark": "diagnose", "case": "ratio tiny-measure / import",
             "ratio": statistics.median(t_measure) / statistics.median(t_import)}]


def run(quick: bool = False) -> list[dict[str, object]]:
    from priors.diagnose import diagnose

    repeats = 3 if quick else 7
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "bloom7b.json")
        with open(cfg, "w", encoding="utf-8") as fh:
            json.dump(BLOOM_7B, fh)
        t_alibi = _timed(lambda: diagnose(cfg), repeats)
        rows.append(_row("alibi-7b", t_alibi, heads=32, lengths=5))
        t5 = os.path.join(tmp, "t5")
        os.mkdir(t5)
        write_t5_base(t5)
        t_t5 = _timed(lambda: diagnose(t5), repeats)
        rows.append(_row("t5-base", t_t5, heads=24, lengths=5))
        slope = 2.0 ** (-8 * 32 / 32)
        t_naive = _timed(lambda: naive_alibi_distant(slope, 512, 10**6), repeats)
        rows.append(_row("naive-one-head-1e6", t_naive, heads=1, lengths=1))
        naive = statistics.median(t_naive)
        for case, t in (("alibi-7b", t_alibi), ("t5-base", t_t5)):
            rows.append({"benchmark": "diagnose", "case": f"ratio {case} / naive-one-head-1e6",
                         "ratio": statistics.median(t) / naive})
        rows += _bracket_check_rows(quick)
        try:
            tiny = os.path.join(tmp, "tiny-llama")
            write_tiny_llama(tiny)
        except ImportError:
            return rows  # torch / transformers not installed: no --measure to time
        rows += _tiny_measure_rows(tiny, 3 if quick else 5)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.diagnose")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = run(args.quick)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

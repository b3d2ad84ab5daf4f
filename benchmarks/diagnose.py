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
  avoid; ``ratio`` rows give each diagnosis time over the naive time of one head at 1e6.

Run alone with ``python -m benchmarks.diagnose [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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

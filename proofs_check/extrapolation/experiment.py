"""The whole experiment: train every (variant, seed), evaluate, summarise, write results.

Presets (``QUICK`` and ``FULL``) fix everything that affects the numbers; the results
file records the preset, the resolved exponents, the corpus fingerprint and the device.
Each finished run's evaluation is cached beside its checkpoint (``eval.json``), so an
interrupted experiment restarted with the same settings redoes only unfinished runs.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import torch

from priors.encodings import LogDistance
from proofs_check.extrapolation.data import default_cache_dir, heldout_windows, load_corpus
from proofs_check.extrapolation.evaluate import evaluate_model
from proofs_check.extrapolation.model import ModelConfig
from proofs_check.extrapolation.results import summarize_variant, write_json_atomic
from proofs_check.extrapolation.train import TrainConfig, run_key, train
from proofs_check.extrapolation.variants import (
    DEFAULT_VARIANTS,
    QUICK_VARIANTS,
    Variant,
    parse_variants,
)

__all__ = ["FULL", "QUICK", "ExperimentConfig", "ExperimentInputError", "run_experiment"]


class ExperimentInputError(ValueError):
    """The corpus cannot feed the experiment (bad root, too few held-out bytes)."""


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that fixes the numbers of one experiment."""

    preset: str
    variants: tuple[Variant, ...]
    seeds: tuple[int, ...]
    train_length: int
    window: int
    lengths: tuple[int, ...]
    steps: int
    batch: int
    lr: float
    warmup: int
    n_windows: int
    ckpt_every: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    heldout_fraction: float = 0.05

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", parse_variants(self.variants))
        if not self.seeds:
            raise ValueError("seeds and variants must not be empty")
        if list(self.lengths) != sorted(set(self.lengths)) or self.lengths[0] != self.train_length:
            raise ValueError(
                f"lengths must increase and start at the training length {self.train_length}, "
                f"got {self.lengths!r}"
            )
        if not 1 <= self.window <= self.train_length:
            raise ValueError(f"window must be in [1, train_length], got {self.window!r}")


def _doubling(l0: int, factor: int) -> tuple[int, ...]:
    out, length = [], l0
    while length <= l0 * factor:
        out.append(length)
        length *= 2
    return tuple(out)


#: About 10 minutes on 2 idle cores: training length 64, lengths 64..2048 (32x).
QUICK = ExperimentConfig(
    preset="quick", variants=QUICK_VARIANTS, seeds=(0, 1, 2), train_length=64, window=16,
    lengths=_doubling(64, 32), steps=500, batch=32, lr=2e-3, warmup=50, n_windows=24,
    ckpt_every=100,
)
#: The thorough run: every default variant, training length 128, lengths 128..4096.
FULL = ExperimentConfig(
    preset="full", variants=DEFAULT_VARIANTS, seeds=(0, 1, 2), train_length=128, window=32,
    lengths=_doubling(128, 32), steps=4000, batch=32, lr=2e-3, warmup=100, n_windows=64,
    ckpt_every=500,
)


def _model_config(cfg: ExperimentConfig, variant: Variant) -> ModelConfig:
    exponent = variant.exponent(cfg.window, cfg.lengths[-1])
    return ModelConfig(variant, cfg.d_model, cfg.n_layers, cfg.n_heads, exponent=exponent)


def _run_dir(cfg: ExperimentConfig, variant: Variant, seed: int, cache: Path, fp: str) -> tuple:
    mcfg = _model_config(cfg, variant)
    tcfg = TrainConfig(
        steps=cfg.steps, batch=cfg.batch, seq_len=cfg.train_length, lr=cfg.lr,
        warmup=cfg.warmup, seed=seed, ckpt_every=cfg.ckpt_every,
    )
    key = run_key(mcfg, tcfg, fp)
    return mcfg, tcfg, key, cache / "runs" / f"{variant.name}-seed{seed}-{key}"


def _run_one(
    cfg: ExperimentConfig, variant: Variant, seed: int, device: str, cache: Path,
    corpus_root: str | Path | None, threads: int | None, log: TextIO | str | None,
) -> dict[str, Any]:
    """Train (or resume) and evaluate one (variant, seed); cache and return its eval."""
    if threads is not None:  # a worker process: its own thread count
        torch.set_num_threads(threads)
    if log == "stderr":
        log = sys.stderr
    corpus = load_corpus(heldout_fraction=cfg.heldout_fraction, cache_dir=cache,
                         root=corpus_root)
    windows = heldout_windows(corpus.heldout, cfg.lengths[-1], cfg.n_windows)
    mcfg, tcfg, key, run_dir = _run_dir(cfg, variant, seed, cache, corpus.fingerprint)
    eval_path = run_dir / "eval.json"
    if eval_path.is_file():
        return json.loads(eval_path.read_text())
    if log is not None:
        print(f"training {variant.name} seed {seed} -> {run_dir}", file=log, flush=True)
    dev = torch.device(device)
    t_run = time.time()
    model, info = train(mcfg, tcfg, corpus.train, ckpt_path=run_dir / "ckpt.pt",
                        device=dev, log=log, key=key)
    t_eval = time.time()
    ev = evaluate_model(model, windows, list(cfg.lengths), window=cfg.window,
                        score_bytes=cfg.train_length, device=dev)
    tail = info["losses"][-50:]  # last 50 training losses, nats -> bits per byte
    ev["final_train_bpb"] = sum(tail) / len(tail) / math.log(2)
    run_dir.mkdir(parents=True, exist_ok=True)
    ev["seconds"] = {"train": round(t_eval - t_run, 1),
                     "evaluate": round(time.time() - t_eval, 1),
                     "resumed": info["resumed"]}
    write_json_atomic(ev, eval_path)
    return ev


def run_experiment(
    cfg: ExperimentConfig,
    *,
    device: str = "cpu",
    cache_dir: str | Path | None = None,
    corpus_root: str | Path | None = None,
    jobs: int = 1,
    cached_only: bool = False,
    log: TextIO | str | None = "stderr",
) -> dict[str, Any]:
    """Train and evaluate every (variant, seed) of ``cfg``; returns the results dict.

    ``corpus_root``: another directory of ``.py`` files instead of the standard library.
    ``jobs``: runs in parallel worker processes (spawned; one torch thread each), for
    ``jobs`` CPU cores; 1 runs everything in this process.
    ``cached_only``: train nothing; summarise the finished runs found in the cache (a
    partial experiment: each variant's ``seeds`` lists the seeds it has; variants without
    any are left out).
    ``log``: progress stream (``"stderr"``: the current ``sys.stderr``; None: silent).
    """
    if log == "stderr":
        log = sys.stderr
    dev = torch.device(device)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        corpus = load_corpus(heldout_fraction=cfg.heldout_fraction, cache_dir=cache,
                             root=corpus_root)
        heldout_windows(corpus.heldout, cfg.lengths[-1], cfg.n_windows)
    except ValueError as exc:
        raise ExperimentInputError(f"corpus: {exc}") from None
    t0 = time.time()
    todo = [(v, seed) for v in cfg.variants for seed in cfg.seeds]
    done: dict[tuple[Variant, int], dict[str, Any]] = {}
    if cached_only:
        for v, seed in todo:
            path = _run_dir(cfg, v, seed, cache, corpus.fingerprint)[3] / "eval.json"
            if path.is_file():
                done[(v, seed)] = json.loads(path.read_text())
    elif jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {
                job: pool.submit(_run_one, cfg, *job, str(dev), cache, corpus_root, 1,
                                 None if log is None else "stderr")
                for job in todo
            }
            done = {job: f.result() for job, f in futures.items()}
    else:
        done = {job: _run_one(cfg, *job, str(dev), cache, corpus_root, None, log)
                for job in todo}
    variants: dict[str, Any] = {}
    for v in cfg.variants:
        mcfg = _model_config(cfg, v)
        seeds = [seed for seed in cfg.seeds if (v, seed) in done]
        if not seeds:
            continue
        evals = [done[(v, seed)] for seed in seeds]
        summary = summarize_variant(evals, tol=v.value if v.kind == "margin" else None)
        summary["seed_list"] = seeds
        if mcfg.exponent is not None:
            summary["alpha"] = mcfg.exponent
        if v.kind == "margin":  # G(alpha) over [W, Lmax] at B = 0 (docs/theory.md §7): <= tol
            summary["margin_growth_exact"] = float(
                LogDistance(mcfg.exponent).distant_mass(cfg.window, cfg.lengths[-1])
            )
        variants[v.name] = summary
    return {
        "experiment": "length extrapolation; docs/extrapolation.md",
        "config": {**asdict(cfg), "variants": [v.name for v in cfg.variants]},
        "device": str(dev),
        "dtype": "float32 (model), float64 (masses and sums)",
        "torch": torch.__version__,
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "threads": torch.get_num_threads(),
        "corpus": corpus.describe(),
        "wall_seconds_this_invocation": round(time.time() - t0, 1),
        "partial": cached_only and len(done) < len(todo),
        "variants": variants,
    }


def with_overrides(cfg: ExperimentConfig, **kw: Any) -> ExperimentConfig:
    """``cfg`` with the non-None keyword values replaced (validated again)."""
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})

"""The whole experiment: train every (variant, seed), evaluate, summarise, write results.

Presets (``QUICK``, ``FULL``, ``GPU``) fix everything that affects the numbers; the results
file records the preset, the resolved exponents, the corpus fingerprint and the device.
Each run's evaluation is cached beside its checkpoint, one file per part (the sliding
baseline, each length, each probe length) keyed by the evaluation settings, so an
interrupted experiment restarted with the same settings redoes only what is missing, and
a longer ``lengths`` evaluates only the new lengths.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from proofs_check.extrapolation.data import default_cache_dir, load_corpus, window_ends
from proofs_check.extrapolation.evaluate import (
    evaluate_baseline,
    evaluate_length,
    evaluate_probe,
)
from proofs_check.extrapolation.model import ByteTransformer, ModelConfig
from proofs_check.extrapolation.probe import count_probe_bytes
from proofs_check.extrapolation.results import summarize_variant, write_json_atomic
from proofs_check.extrapolation.train import TrainConfig, run_key, train
from proofs_check.extrapolation.variants import (
    DEFAULT_VARIANTS,
    GPU_VARIANTS,
    QUICK_VARIANTS,
    Variant,
    parse_variants,
)

__all__ = [
    "FULL",
    "GPU",
    "PRESETS",
    "PROBE_WINDOW_STRIDE",
    "QUICK",
    "ExperimentConfig",
    "ExperimentInputError",
    "doubling",
    "model_config",
    "probe_distances",
    "run_experiment",
    "with_overrides",
]

#: Version of the evaluation protocol (part of the cache key of every evaluation).
EVAL_VERSION = "eval/2: sliding baseline, fixed targets, probe"


class ExperimentInputError(ValueError):
    """The corpus cannot feed the experiment (bad root, too few held-out bytes)."""


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that fixes the numbers of one experiment.

    ``lengths``: the evaluated context lengths, from the training length up;
    ``design_length``: the longest length the experiment is designed for (the margin
    selector's ``Lmax`` and the probe's long length), independent of ``lengths`` so that
    evaluating further changes no model; ``max_context``: the longest length the
    held-out windows allow (fixes the windows, so the targets stay the same)."""

    preset: str
    variants: tuple[Variant, ...]
    seeds: tuple[int, ...]
    train_length: int
    window: int
    lengths: tuple[int, ...]
    design_length: int
    max_context: int
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
    probe: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", parse_variants(self.variants))
        if not self.seeds:
            raise ValueError("seeds must not be empty")
        if list(self.lengths) != sorted(set(self.lengths)) or self.lengths[0] != self.train_length:
            raise ValueError(
                f"lengths must increase and start at the training length {self.train_length}, "
                f"got {self.lengths!r}"
            )
        if not 1 <= self.window <= self.train_length:
            raise ValueError(f"window must be in [1, train_length], got {self.window!r}")
        if not 2 * self.train_length <= self.design_length <= self.max_context:
            raise ValueError("need 2 train_length <= design_length <= max_context, got "
                             f"{self.train_length}, {self.design_length}, {self.max_context}")
        if self.lengths[-1] > self.max_context:
            raise ValueError(f"lengths must stay <= max_context = {self.max_context}, got "
                             f"{self.lengths[-1]}")

    @property
    def score_bytes(self) -> int:
        """Targets scored per window: the training length."""
        return self.train_length

    @property
    def probe_lengths(self) -> tuple[int, ...]:
        """The probe's context lengths: the training length and the design length."""
        return (self.train_length, self.design_length)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, variants by name."""
        return {**asdict(self), "variants": [v.name for v in self.variants]}


def doubling(l0: int, longest: int) -> tuple[int, ...]:
    """``l0, 2 l0, 4 l0, ...`` up to ``longest``."""
    out, length = [], l0
    while length <= longest:
        out.append(length)
        length *= 2
    return tuple(out)


#: The probe reads every second held-out window (it needs a forward pass per distance).
PROBE_WINDOW_STRIDE = 2


def probe_distances(length: int, train_length: int) -> list[int]:
    """The probe distances at context ``length``: up to the training length ``1, 4, 16,
    ...``; beyond it ``L0 / 4, L0, 4 L0, ...``; always below ``length - 2``, then
    ``length - 2`` itself (the farthest key a query can retrieve)."""
    out, d = [], (1 if length <= train_length else max(1, train_length // 4))
    while d < length - 2:
        out.append(d)
        d *= 4
    return [*out, length - 2]


#: Minutes on 2 cores: 7 variants x 3 seeds, training length 64, lengths 64..2048 (32x).
QUICK = ExperimentConfig(
    preset="quick", variants=QUICK_VARIANTS, seeds=(0, 1, 2), train_length=64, window=16,
    lengths=doubling(64, 2048), design_length=2048, max_context=4096, steps=500, batch=32,
    lr=2e-3, warmup=50, n_windows=32, ckpt_every=100,
)
#: The thorough CPU run: every default variant, 5 seeds, training length 128, to 4096.
FULL = ExperimentConfig(
    preset="full", variants=DEFAULT_VARIANTS, seeds=(0, 1, 2, 3, 4), train_length=128,
    window=32, lengths=doubling(128, 4096), design_length=4096, max_context=8192, steps=4000,
    batch=32, lr=2e-3, warmup=100, n_windows=64, ckpt_every=500,
)
#: For a GPU: a larger model (4 layers, d_model 256, 8 heads), training length 512 to
#: 16384 (32x), 6 seeds, the softmax variants and the held-out families.
GPU = ExperimentConfig(
    preset="gpu", variants=GPU_VARIANTS, seeds=(0, 1, 2, 3, 4, 5), train_length=512,
    window=64, lengths=doubling(512, 16384), design_length=16384, max_context=16384,
    steps=4000, batch=32, lr=1e-3, warmup=200, n_windows=64, ckpt_every=500, d_model=256,
    n_layers=4, n_heads=8,
)
PRESETS = {"quick": QUICK, "full": FULL, "gpu": GPU}


def model_config(cfg: ExperimentConfig, variant: Variant) -> ModelConfig:
    """The architecture and resolved exponent of ``variant`` in ``cfg``."""
    exponent = variant.exponent(cfg.window, cfg.design_length)
    return ModelConfig(variant, cfg.d_model, cfg.n_layers, cfg.n_heads, exponent=exponent)


def _run_dir(cfg: ExperimentConfig, variant: Variant, seed: int, cache: Path, fp: str) -> tuple:
    mcfg = model_config(cfg, variant)
    tcfg = TrainConfig(
        steps=cfg.steps, batch=cfg.batch, seq_len=cfg.train_length, lr=cfg.lr,
        warmup=cfg.warmup, seed=seed, ckpt_every=cfg.ckpt_every, probe=cfg.probe,
    )
    key = run_key(mcfg, tcfg, fp)
    return mcfg, tcfg, key, cache / "runs" / f"{variant.name}-seed{seed}-{key}"


def _eval_key(cfg: ExperimentConfig, ends: np.ndarray) -> str:
    blob = json.dumps({"version": EVAL_VERSION, "ends": ends.tolist(), "window": cfg.window,
                       "score_bytes": cfg.score_bytes}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _parts(cfg: ExperimentConfig) -> list[tuple[str, int]]:
    """The evaluation parts of one run: the baseline, each length, each probe length."""
    return ([("baseline", cfg.train_length)] + [("length", n) for n in cfg.lengths]
            + ([("probe", n) for n in cfg.probe_lengths] if cfg.probe else []))


def _part_path(run_dir: Path, key: str, part: tuple[str, int]) -> Path:
    return run_dir / f"eval-{key}-{part[0]}-{part[1]}.json"


def _assemble(cfg: ExperimentConfig, found: dict[tuple[str, int], Any], meta: dict[str, Any]
              ) -> dict[str, Any]:
    return {**meta, "baseline": found[("baseline", cfg.train_length)],
            "per_length": [found[("length", n)] for n in cfg.lengths],
            "probe": [found[("probe", n)] for n in cfg.probe_lengths] if cfg.probe else []}


def _cached_eval(cfg: ExperimentConfig, run_dir: Path, key: str) -> dict[str, Any] | None:
    meta_path = run_dir / "run.json"
    paths = {part: _part_path(run_dir, key, part) for part in _parts(cfg)}
    if not meta_path.is_file() or not all(p.is_file() for p in paths.values()):
        return None
    found = {part: json.loads(p.read_text()) for part, p in paths.items()}
    return _assemble(cfg, found, json.loads(meta_path.read_text()))


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
    ends, _ = window_ends(corpus.heldout_spans, cfg.n_windows, max_context=cfg.max_context,
                          score_bytes=cfg.score_bytes)
    mcfg, tcfg, key, run_dir = _run_dir(cfg, variant, seed, cache, corpus.fingerprint)
    ekey = _eval_key(cfg, ends)
    cached = _cached_eval(cfg, run_dir, ekey)
    if cached is not None:
        return cached
    if log is not None:
        print(f"training/evaluating {variant.name} seed {seed} -> {run_dir}", file=log, flush=True)
    dev = torch.device(device)
    t_run = time.time()
    model, info = train(mcfg, tcfg, corpus.train, ckpt_path=run_dir / "ckpt.pt",
                        device=dev, log=log, key=key)
    meta_path = run_dir / "run.json"
    if not meta_path.is_file():
        tail = info["losses"][-50:]  # last 50 training losses, nats -> bits
        meta = {"final_train_loss_bits": sum(tail) / len(tail) / math.log(2),
                "train_seconds": round(time.time() - t_run, 1),
                "priors": _prior_records(model)}
        write_json_atomic(meta, meta_path)
    found: dict[tuple[str, int], Any] = {}
    for part in _parts(cfg):
        path = _part_path(run_dir, ekey, part)
        if path.is_file():
            found[part] = json.loads(path.read_text())
            continue
        kind, n = part
        if kind == "baseline":
            res = evaluate_baseline(model, corpus.heldout, ends, train_length=cfg.train_length,
                                    score_bytes=cfg.score_bytes, device=dev)
        elif kind == "length":
            res = evaluate_length(model, corpus.heldout, ends, n, window=cfg.window,
                                  train_length=cfg.train_length, score_bytes=cfg.score_bytes,
                                  device=dev)
        else:
            res = evaluate_probe(model, corpus.heldout, ends[::PROBE_WINDOW_STRIDE], n,
                                 probe_distances(n, cfg.train_length), device=dev)
        write_json_atomic(res, path)
        found[part] = res
    return _assemble(cfg, found, json.loads(meta_path.read_text()))


def _prior_records(model: ByteTransformer) -> list[dict[str, Any]]:
    return [
        {"name": e.name,
         "params": {k: list(v) if isinstance(v, tuple) else v for k, v in e.params.items()},
         "class": e.classify().label}
        for e in model.pos.priors()
    ]


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
    ``cached_only``: train and evaluate nothing; summarise the runs whose evaluations are
    all in the cache (a partial experiment: each variant's ``seed_list`` lists the seeds
    it has; variants without any are left out).
    ``log``: progress stream (``"stderr"``: the current ``sys.stderr``; None: silent).
    """
    if log == "stderr":
        log = sys.stderr
    dev = torch.device(device)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        corpus = load_corpus(heldout_fraction=cfg.heldout_fraction, cache_dir=cache,
                             root=corpus_root)
        ends, files = window_ends(corpus.heldout_spans, cfg.n_windows,
                                  max_context=cfg.max_context, score_bytes=cfg.score_bytes)
    except ValueError as exc:
        raise ExperimentInputError(f"corpus: {exc}") from None
    t0 = time.time()
    todo = [(v, seed) for v in cfg.variants for seed in cfg.seeds]
    done: dict[tuple[Variant, int], dict[str, Any]] = {}
    if cached_only:
        ekey = _eval_key(cfg, ends)
        for v, seed in todo:
            found = _cached_eval(cfg, _run_dir(cfg, v, seed, cache, corpus.fingerprint)[3], ekey)
            if found is not None:
                done[(v, seed)] = found
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
        seeds = [seed for seed in cfg.seeds if (v, seed) in done]
        if not seeds:
            continue
        summary = summarize_variant([done[(v, seed)] for seed in seeds], files.tolist(),
                                    files[::PROBE_WINDOW_STRIDE].tolist())
        summary["seed_list"] = seeds
        exponent = model_config(cfg, v).exponent
        if exponent is not None:
            summary["alpha"] = exponent
        if v.kind == "margin":
            summary["tol"] = v.value
        variants[v.name] = summary
    return {
        "experiment": "length extrapolation; docs/extrapolation.md",
        "config": cfg.to_dict(),
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "dtype": "float32 (model), float64 (masses and sums)",
        "torch": torch.__version__,
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "threads": torch.get_num_threads(),
        "jobs": jobs,
        "corpus": {**corpus.describe(), "probe_bytes_in_corpus": count_probe_bytes(corpus.train)
                   + count_probe_bytes(corpus.heldout)},
        "windows": {"ends": ends.tolist(), "files": files.tolist(),
                    "distinct_files": int(np.unique(files).size),
                    "eval_version": EVAL_VERSION},
        "wall_seconds_this_invocation": round(time.time() - t0, 1),
        "summarised_from_cache": cached_only,
        "partial": cached_only and len(done) < len(todo),
        "variants": variants,
    }


def with_overrides(cfg: ExperimentConfig, **kw: Any) -> ExperimentConfig:
    """``cfg`` with the non-None keyword values replaced (validated again); ``longest``
    sets ``lengths`` to the doubling from the training length up to it."""
    longest = kw.pop("longest", None)
    if longest is not None:
        kw["lengths"] = doubling(cfg.train_length, longest)
        if kw["lengths"][-1] != longest:
            raise ValueError(f"--longest must be the training length {cfg.train_length} "
                             f"times a power of 2, got {longest}")
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})

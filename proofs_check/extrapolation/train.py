"""Training: AdamW with linear warm-up and cosine decay, checkpoints and exact resume.

Everything a step does is a function of ``(seed, step)``: the batch offsets (and, with
``probe``, the planted retrieval probes of ``proofs_check.extrapolation.probe``) come from
a ``torch.Generator`` seeded with ``seed * 1_000_003 + step`` and the learning rate from
the schedule, so a run resumed from a checkpoint (model, optimiser and step) takes the same
steps as an uninterrupted one (checked bit for bit in the tests on CPU). Checkpoints are
written atomically every ``ckpt_every`` steps and at the end, under the cache directory
(never in the repository); progress goes to stderr.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from proofs_check.extrapolation.model import ByteTransformer, ModelConfig
from proofs_check.extrapolation.probe import plant_training_probes, probe_loss

__all__ = ["TrainConfig", "batch_at", "lr_at", "run_key", "train"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (``seq_len`` is the training length ``L_train``; ``probe``:
    every row carries a planted retrieval probe and the loss adds its term)."""

    steps: int = 4000
    batch: int = 32
    seq_len: int = 128
    lr: float = 2e-3
    weight_decay: float = 0.1
    warmup: int = 100
    min_lr_frac: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    ckpt_every: int = 500
    probe: bool = True

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "seq_len", "ckpt_every"):
            val = getattr(self, name)
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {val!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {self.warmup!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be > 0, got {self.lr!r}")


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of step ``step`` (0-based): linear warm-up over ``warmup`` steps, then
    cosine from ``lr`` down to ``min_lr_frac * lr`` at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(cfg.steps - cfg.warmup, 1)
    frac = min((step - cfg.warmup) / span, 1.0)
    return cfg.lr * (cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))


def batch_at(
    stream: torch.Tensor, step: int, cfg: TrainConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Inputs and next-byte targets ``(batch, seq_len)`` int64 of step ``step`` and the
    planted probe values ``(batch,)`` (None without ``probe``): random offsets and probes
    drawn from a generator seeded by ``(seed, step)`` only."""
    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    hi = stream.numel() - cfg.seq_len - 1
    if hi < 1:
        raise ValueError(f"training stream too short for seq_len={cfg.seq_len}")
    off = torch.randint(0, hi, (cfg.batch,), generator=gen)
    idx = off[:, None] + torch.arange(cfg.seq_len + 1)[None, :]  # (batch, seq_len + 1)
    win = stream[idx].long()
    x, y = win[:, :-1], win[:, 1:]
    if not cfg.probe:
        return x, y, None
    return plant_training_probes(x, y, gen)


def run_key(model_cfg: ModelConfig, train_cfg: TrainConfig, corpus_fp: str) -> str:
    """16 hex digits identifying a run (architecture, variant, optimisation, corpus)."""
    blob = json.dumps(
        {"model": model_cfg.to_dict(), "train": asdict(train_cfg), "corpus": corpus_fp},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _save_atomic(obj: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _make_optimizer(model: ByteTransformer, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "pos." not in n]
    keep = [p for n, p in model.named_parameters() if p.dim() < 2 or "pos." in n]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": keep, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.99))


def train(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    stream: np.ndarray | torch.Tensor,
    *,
    ckpt_path: str | os.PathLike[str] | None = None,
    device: str | torch.device = "cpu",
    stop_after: int | None = None,
    log: TextIO | str | None = "stderr",
    key: str = "",
) -> tuple[ByteTransformer, dict[str, Any]]:
    """Train (or resume) one run; returns the model and ``{"step", "losses", "resumed"}``.

    ``ckpt_path``: checkpoint file; when it exists with the same ``key`` the run resumes
    from it (a different key is a ``ValueError``). ``stop_after``: stop (with a checkpoint)
    after this many steps in total, for interrupted runs and their tests.
    ``losses``: the training loss of every step taken so far (nats: the mean next-byte
    loss, plus the mean probe loss with ``probe``).
    ``log``: progress stream (``"stderr"``: the current ``sys.stderr``; None: silent).
    """
    if log == "stderr":
        log = sys.stderr
    device = torch.device(device)
    data = torch.as_tensor(np.array(stream, dtype=np.uint8, copy=True))  # writable copy
    torch.manual_seed(train_cfg.seed)
    model = ByteTransformer(model_cfg).to(device)
    opt = _make_optimizer(model, train_cfg)
    step, losses, resumed = 0, [], False
    path = Path(ckpt_path) if ckpt_path is not None else None
    if path is not None and path.is_file():
        state = torch.load(path, map_location=device, weights_only=False)
        if state.get("key") != key:
            raise ValueError(f"ckpt_path {str(path)!r} belongs to another run")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, losses, resumed = int(state["step"]), list(state["losses"]), True
    end = train_cfg.steps if stop_after is None else min(train_cfg.steps, stop_after)
    model.train()
    t0, last = time.time(), time.time()

    def checkpoint() -> None:
        if path is not None:
            _save_atomic(
                {"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                 "losses": losses, "key": key},
                path,
            )

    while step < end:
        x, y, values = batch_at(data, step, train_cfg)
        x, y = x.to(device), y.to(device)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, train_cfg)
        logits, _ = model(x)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
        )
        if values is not None:
            loss = loss + probe_loss(logits, values)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
        opt.step()
        losses.append(loss.item())
        step += 1
        if step % train_cfg.ckpt_every == 0 or step == end:
            checkpoint()
        if log is not None and (time.time() - last > 20 or step == end):
            last = time.time()
            recent = losses[-50:]
            print(
                f"  [{model_cfg.variant.name} seed {train_cfg.seed}] step {step}/{train_cfg.steps}"
                f" training loss {sum(recent) / len(recent) / math.log(2):.3f} bits "
                f"({time.time() - t0:.0f} s)",
                file=log,
                flush=True,
            )
    model.eval()
    return model, {"step": step, "losses": losses, "resumed": resumed}

"""Paired evaluation of one trained model, and what the theory predicts beside it.

Windows: ``N`` positions ``e_i`` of the held-out stream (``data.window_ends``); the scored
targets are the ``S = score_bytes`` bytes ``stream[e - S + 1 .. e]``, the same at every
length (``S = L0``, the training length).

* **Baseline** (:func:`evaluate_baseline`): every scored target predicted from exactly the
  ``L0`` bytes before it (a sliding window; each target has the context of a training
  row's last position).
* **Length ``L``** (:func:`evaluate_length`): the model reads ``stream[e - L : e]`` once and
  the ``S`` targets are scored from their positions ``L - S .. L - 1`` (each has at least
  ``L - S + 1`` bytes of context; at ``L = L0`` the first has 1 byte: the prefix scoring,
  kept to show what the sliding baseline corrects). Bits per byte per window.
* **Retrieval** (:func:`evaluate_probe`): ``proofs_check.extrapolation.probe`` at length ``L``
  and distances ``d``: per window whether the value is the most likely next byte, and its
  loss in bits; beside it, per head, the prior's distant mass ``D_L(d)`` (keys at distance
  ``>= d``) and log-weight ``ln p_L(d) = b(d) - ln S(L)`` of the key at ``d``.

Per layer and head, at the final query row (query length exactly ``L``):

* measured window mass ``M = sum_{d < W} A[L, L - d]`` and distant mass ``1 - M`` (summed
  over ``d >= W`` directly), beside the exact prior mass ``M_L(W) = S_W / S_L`` of the
  head's ``priors.encodings`` prior (docs/theory.md §5, ``B = 0``);
* Theorem 3's content-score bracket ``M^- <= M <= M^+`` (docs/theory.md §5) with
  ``B = (max_j s - min_j s) / 2`` over the row's keys (the full spread: scores lie within
  ``B`` of their midpoint, and a constant shift of a row changes nothing, so the theorem
  applies and must hold), and with the trimmed ``B_95`` = half the 2.5%..97.5% quantile
  range (not covered by the theorem: how often it still holds is a measurement);
* the dilution ``Lambda_h(L)`` of ``proofs_check.extrapolation.lossmodel`` (the prior's).

Precision: the model runs in float32 (CPU reference) and masses are accumulated in
float64 from float32 probabilities; a bracket "holds" with a slack of ``1e-5``, about a
hundred float32 roundings of a probability sum (rows of up to 16384 keys).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from proofs_check.extrapolation.lossmodel import head_dilutions
from proofs_check.extrapolation.model import ByteTransformer
from proofs_check.extrapolation.probe import probe_inputs

__all__ = [
    "BRACKET_SLACK",
    "bracket",
    "evaluate_baseline",
    "evaluate_length",
    "evaluate_probe",
    "prior_masses",
    "prior_summary",
]

#: Slack of the bracket test for float32 attention rows (module docstring).
BRACKET_SLACK = 1e-5
_MAX_ELEMENTS = 1 << 25  # per-chunk bound on batch * heads * L * L


def prior_masses(encodings: list[Any], window: int, length: int) -> dict[str, np.ndarray]:
    """``(H,)`` arrays ``S_W``, ``T = S_L - S_W`` (the tail, summed directly), exact window
    and distant mass at query length ``length`` for one prior per head (float64 from
    the priors' ``dps``-digit values)."""
    s_w, tail, m, dist = [], [], [], []
    for enc in encodings:
        lkw = length if enc.length_dependent else None
        s_w.append(float(enc.weight_sum(0, window, length=lkw, dps=20)))
        tail.append(float(enc.weight_sum(window, length, length=lkw, dps=20)))
        m.append(float(enc.window_mass(window, length, dps=20)))
        dist.append(float(enc.distant_mass(window, length, dps=20)))
    return {k: np.asarray(v) for k, v in
            (("S_W", s_w), ("T", tail), ("window_mass", m), ("distant_mass", dist))}


def bracket(s_w: np.ndarray, tail: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Theorem 3's ``(M^-, M^+)`` for scores within ``b`` of a constant (docs/theory.md §5):
    ``M^- = S_W / (S_W + e^{2B} T)``, ``M^+ = e^{2B} S_W / (e^{2B} S_W + T)``, broadcast.

    At ``B = 0`` both are the prior's ``S_W / S_l``; the bracket widens with ``B``:

    >>> lo, hi = bracket(np.array([2.0, 2.0]), np.array([3.0, 3.0]), np.array([0.0, 0.5]))
    >>> [round(float(x), 4) for x in lo], [round(float(x), 4) for x in hi]
    ([0.4, 0.197], [0.4, 0.6444])
    """
    e2b = np.exp(np.minimum(2.0 * np.asarray(b, dtype=np.float64), 700.0))
    return s_w / (s_w + e2b * tail), e2b * s_w / (e2b * s_w + tail)


def _contexts(stream: np.ndarray, ends: np.ndarray, length: int) -> torch.Tensor:
    """``(N, length + 1)`` int64: ``stream[e - length : e + 1]`` per window end ``e``."""
    idx = np.asarray(ends)[:, None] + np.arange(-length, 1)[None, :]
    if idx.min() < 0 or idx.max() >= stream.size:
        raise ValueError(f"windows of length {length} do not fit the held-out stream")
    return torch.as_tensor(np.asarray(stream)[idx].astype(np.int64))


def _chunk(batch_len: int, heads: int, length: int) -> int:
    return max(1, min(batch_len, _MAX_ELEMENTS // (heads * length * length)))


@torch.no_grad()
def _last_log_probs(model: ByteTransformer, x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """float64 log-probabilities ``(B, 256)`` of the next byte after each row of ``x``."""
    step = _chunk(x.shape[0], model.cfg.n_heads, x.shape[1])
    out = []
    for i in range(0, x.shape[0], step):
        logits, _ = model(x[i : i + step].to(device))
        out.append(torch.log_softmax(logits[:, -1, :].double(), dim=-1).cpu())
    return torch.cat(out)


def evaluate_baseline(
    model: ByteTransformer, stream: np.ndarray, ends: np.ndarray, *, train_length: int,
    score_bytes: int, device: str | torch.device = "cpu",
) -> dict[str, Any]:
    """The sliding baseline: ``{"bpb": [N]}`` bits per byte of each window's scored targets,
    each predicted from exactly ``train_length`` bytes (module docstring)."""
    dev = torch.device(device)
    model = model.to(dev).eval()
    ctx = _contexts(stream, ends, score_bytes - 1 + train_length)  # (N, S + L0)
    n_win = ctx.shape[0]
    rows = ctx.unfold(1, train_length + 1, 1)  # (N, S, L0 + 1): target k and its L0 bytes
    flat = rows.reshape(-1, train_length + 1)
    lp = _last_log_probs(model, flat[:, :-1], dev)  # (N * S, 256)
    bits = -lp.gather(-1, flat[:, -1:])[:, 0] / math.log(2)
    return {"bpb": bits.reshape(n_win, score_bytes).mean(-1).tolist()}


@torch.no_grad()
def evaluate_length(
    model: ByteTransformer, stream: np.ndarray, ends: np.ndarray, length: int, *, window: int,
    train_length: int, score_bytes: int, device: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Bits per byte, masses and brackets at context length ``length`` (module docstring).

    Returns per window ``bpb`` and ``window_mass`` (mean over layers and heads), per layer
    and head the mean measured masses, per head the exact prior masses and dilution, and
    the bracket statistics (fraction of rows where it holds, mean width, mean ``B``) for
    the full and the trimmed spread."""
    if length < max(window, score_bytes):
        raise ValueError(f"length must be >= max(window, score_bytes), got {length}")
    dev = torch.device(device)
    model = model.to(dev).eval()
    win = _contexts(stream, ends, length)  # (N, L + 1)
    step = _chunk(win.shape[0], model.cfg.n_heads, length)
    nll, wmass, dmass, b_full, b_trim = [], [], [], [], []
    for i in range(0, win.shape[0], step):
        w = win[i : i + step].to(dev)
        x, y = w[:, :-1], w[:, 1:]  # (b, L) inputs and their next bytes
        logits, recs = model(x, record_rows=1)
        lp = torch.log_softmax(logits[:, -score_bytes:, :].double(), dim=-1)
        tgt = y[:, -score_bytes:]
        nll.append((-lp.gather(-1, tgt[..., None])[..., 0]).mean(-1).cpu() / math.log(2))
        wm, dm, bf, bt = [], [], [], []
        for rec in recs:  # one per layer
            a = rec["attn"][:, :, 0, :].double()  # (b, H, L): row of query length L
            s = rec["scores"][:, :, 0, :].double()  # (b, H, L) content scores
            wm.append(a[..., length - window :].sum(-1))  # d = L - j < W
            dm.append(a[..., : length - window].sum(-1))  # d >= W
            bf.append((s.amax(-1) - s.amin(-1)) / 2)
            probs = torch.tensor([0.025, 0.975], dtype=s.dtype, device=s.device)
            q = torch.quantile(s, probs, dim=-1)  # (2, b, H)
            bt.append((q[1] - q[0]) / 2)
        for acc, vals in ((wmass, wm), (dmass, dm), (b_full, bf), (b_trim, bt)):
            acc.append(torch.stack(vals, dim=1).cpu())  # (b, layers, H)
    m = torch.cat(wmass).numpy()  # (N, layers, H)
    priors = model.pos.priors()
    exact = prior_masses(priors, window, length)
    dil = head_dilutions(priors, train_length, length, score_bytes)
    entry: dict[str, Any] = {
        "length": length,
        "bpb": torch.cat(nll).numpy().tolist(),  # (N,)
        "window_mass_windows": m.mean((1, 2)).tolist(),  # (N,) mean over layers, heads
        "window_mass": m.mean(0).tolist(),  # (layers, H)
        "distant_mass": torch.cat(dmass).numpy().mean(0).tolist(),
        "exact_window_mass": exact["window_mass"].tolist(),  # (H,)
        "exact_distant_mass": exact["distant_mass"].tolist(),
        "dilution_per_head": None if dil is None else dil.tolist(),
    }
    if not model.pos.variant.uses_operator:
        spreads = {"full": torch.cat(b_full).numpy(), "trim": torch.cat(b_trim).numpy()}
        for tag, bvals in spreads.items():
            lo, hi = bracket(exact["S_W"], exact["T"], bvals)  # (N, layers, H)
            holds = (m >= lo - BRACKET_SLACK) & (m <= hi + BRACKET_SLACK)
            entry[f"bracket_{tag}"] = {
                "holds_fraction": float(holds.mean()),
                "mean_width": float((hi - lo).mean()),
                "mean_B": float(bvals.mean()),
            }
    return entry


def prior_summary(encodings: list[Any], length: int, distances: list[int]) -> dict[str, Any]:
    """Per head and distance ``d``: the distant mass ``D_L(d)`` and the log-weight
    ``ln p_L(d) = b(d) - ln S(L)`` of the prior at query length ``length``; ``None``
    entries for a length-dependent prior's log-weights (float64 from ``priors``)."""
    dist, logp = [], []
    for enc in encodings:
        lkw = length if enc.length_dependent else None
        total = enc.weight_sum(0, length, length=lkw, dps=20)
        dist.append([float(enc.weight_sum(d, length, length=lkw, dps=20) / total)
                     for d in distances])
        b = np.asarray(enc.bias(np.asarray(distances, dtype=float), length=lkw), dtype=float)
        logp.append((b - float(np.log(float(total)))).tolist())
    return {"distant_mass": dist, "log_weight": logp}  # (H, len(distances)) each


@torch.no_grad()
def evaluate_probe(
    model: ByteTransformer, stream: np.ndarray, ends: np.ndarray, length: int,
    distances: list[int], *, device: str | torch.device = "cpu",
) -> dict[str, Any]:
    """The retrieval probe at context ``length`` and each distance of ``distances``
    (module docstring): per distance and window ``correct`` (0/1) and ``bits``, and the
    prior's distant mass and log-weight at each distance per head."""
    dev = torch.device(device)
    model = model.to(dev).eval()
    win = _contexts(stream, ends, length)[:, :-1]  # (N, L) the last L inputs
    correct, bits = [], []
    for d in distances:
        x, v = probe_inputs(win, d)
        lp = _last_log_probs(model, x, dev)  # (N, 256)
        correct.append((lp.argmax(-1) == v).double().tolist())
        bits.append((-lp.gather(-1, v[:, None])[:, 0] / math.log(2)).tolist())
    return {"length": length, "distances": list(distances), "correct": correct, "bits": bits,
            "prior": prior_summary(model.pos.priors(), length, list(distances))}

"""Paired evaluation of one trained model, and what the theory predicts beside it.

Paired design: ``N`` held-out windows of ``Lmax + 1`` bytes; at each context length ``L``
the model reads the last ``L`` bytes of the same window and is scored (bits per byte) on
the same final ``score_bytes`` next-byte predictions. Differences between lengths are
therefore differences on identical targets, window by window.

Per layer and head, at the final query row (query length exactly ``L``):

* measured window mass ``M = sum_{d < W} A[L, L - d]`` and distant mass ``1 - M`` (summed
  over ``d >= W`` directly), beside the exact prior mass ``M_L(W) = S_W / S_L`` of the
  head's ``priors.encodings`` prior (docs/theory.md §5, ``B = 0``);
* Theorem 3's content-score bracket ``M^- <= M <= M^+`` (docs/theory.md §5) with
  ``B = (max_j s - min_j s) / 2`` over the row's keys (the full spread: scores lie within
  ``B`` of their midpoint, and a constant shift of a row changes nothing, so the theorem
  applies and must hold), and with the trimmed ``B_95`` = half the 2.5%..97.5% quantile
  range (not covered by the theorem: how often it still holds is a measurement).

Precision: the model runs in float32 (CPU reference) and masses are accumulated in
float64 from float32 probabilities; a bracket "holds" with a slack of ``1e-5``, about a
hundred float32 roundings of a probability sum (rows of up to 4096 keys).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from proofs_check.extrapolation.model import ByteTransformer

__all__ = ["BRACKET_SLACK", "bracket", "evaluate_model", "prior_masses"]

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


@torch.no_grad()
def _run_length(
    model: ByteTransformer, windows: torch.Tensor, length: int, score_bytes: int, window: int,
    device: torch.device,
) -> dict[str, np.ndarray]:
    n_win, span = windows.shape
    lmax = span - 1
    heads = model.cfg.n_heads
    chunk = max(1, _MAX_ELEMENTS // (heads * length * length))
    nll, wmass, dmass, b_full, b_trim = [], [], [], [], []
    for i in range(0, n_win, chunk):
        w = windows[i : i + chunk].to(device)
        x = w[:, lmax - length : lmax]  # (b, L) the last L inputs
        y = w[:, lmax - length + 1 :]  # (b, L) their next bytes
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
    return {
        "bpb": torch.cat(nll).numpy(),  # (N,)
        "window_mass": torch.cat(wmass).numpy(),  # (N, layers, H)
        "distant_mass": torch.cat(dmass).numpy(),
        "B_full": torch.cat(b_full).numpy(),
        "B_trim": torch.cat(b_trim).numpy(),
    }


def evaluate_model(
    model: ByteTransformer,
    windows: np.ndarray | torch.Tensor,
    lengths: list[int],
    *,
    window: int,
    score_bytes: int,
    device: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Paired evaluation (module docstring) at every length of ``lengths``.

    ``windows``: ``(N, Lmax + 1)`` int bytes with ``Lmax = max(lengths)``. Returns a
    JSON-friendly dict: per length the per-window bits per byte, the per-layer/head
    measured masses (mean over windows), the exact prior masses per head, and the bracket
    statistics (fraction of rows where it holds, mean width, for the full and the trimmed
    spread).
    """
    win = torch.as_tensor(np.asarray(windows), dtype=torch.long)
    lmax = win.shape[1] - 1
    if not lengths or max(lengths) != lmax or min(lengths) < max(window, score_bytes):
        raise ValueError(
            f"lengths must end at the window span {lmax} and start at >= "
            f"max(window, score_bytes) = {max(window, score_bytes)}, got {lengths!r}"
        )
    dev = torch.device(device)
    model = model.to(dev).eval()
    priors = model.pos.priors()
    out: dict[str, Any] = {"lengths": list(lengths), "per_length": []}
    for length in lengths:
        r = _run_length(model, win, length, score_bytes, window, dev)
        exact = prior_masses(priors, window, length)
        entry: dict[str, Any] = {
            "length": length,
            "bpb": r["bpb"].tolist(),
            "window_mass": r["window_mass"].mean(0).tolist(),  # (layers, H)
            "distant_mass": r["distant_mass"].mean(0).tolist(),
            "exact_window_mass": exact["window_mass"].tolist(),  # (H,)
            "exact_distant_mass": exact["distant_mass"].tolist(),
        }
        if not model.pos.variant.uses_operator:
            for tag in ("full", "trim"):
                lo, hi = bracket(exact["S_W"], exact["T"], r[f"B_{tag}"])  # (N, layers, H)
                m = r["window_mass"]
                holds = (m >= lo - BRACKET_SLACK) & (m <= hi + BRACKET_SLACK)
                entry[f"bracket_{tag}"] = {
                    "holds_fraction": float(holds.mean()),
                    "mean_width": float((hi - lo).mean()),
                    "mean_B": float(r[f"B_{tag}"].mean()),
                }
        out["per_length"].append(entry)
    out["priors"] = [
        {"name": e.name,
         "params": {k: list(v) if isinstance(v, tuple) else v for k, v in e.params.items()},
         "class": e.classify().label}
        for e in priors
    ]
    return out

"""The retrieval probe: a value planted at distance ``d``, recalled at a query byte.

What distant attention mass buys (docs/extrapolation.md): every training row carries one
planted pair, so the probe is trained into the same models whose loss is measured.

Planting (training row of ``n`` inputs ``x`` and targets ``y``, ``y[t] = x[t + 1]``)
    A value byte ``v`` drawn from ``VALUE_BYTES`` (16 byte values that never occur in the
    corpus) is written at input position ``n - 1 - d`` with ``d`` uniform in
    ``[1, n - 2]``, the query byte ``QUERY`` at the last input position ``n - 1``, and the
    last target is ``v``: to predict it the model must find the one value byte ``d``
    positions back. The training loss is the mean next-byte loss of the row plus the mean
    probe loss of the batch (:func:`probe_loss`), weight 1: without the second term the
    probe is one target in ``n`` and a model of this size does not learn it in the quick
    preset's 500 steps.

Evaluation (:func:`probe_inputs`)
    On the held-out windows, at context length ``L``: the last ``L`` inputs of the window
    with ``v`` written at position ``L - 1 - d`` and ``QUERY`` at ``L - 1``; the values
    cycle through ``VALUE_BYTES`` over the windows. Recorded: whether the most likely next
    byte is ``v`` (accuracy; chance among the value bytes is 1/16, and a model that has
    not learned the probe puts its mass elsewhere) and the loss on ``v`` in bits.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "QUERY",
    "VALUE_BYTES",
    "count_probe_bytes",
    "plant_training_probes",
    "probe_inputs",
    "probe_loss",
]

#: The query byte (a control character absent from the standard library's sources).
QUERY = 0x01
#: The 16 value bytes (control characters 0x10..0x1F, absent from those sources).
VALUE_BYTES = tuple(range(0x10, 0x20))


def count_probe_bytes(stream: np.ndarray) -> int:
    """How often the probe's bytes occur in ``stream`` (0 for the standard library: the
    probe is then unambiguous; recorded in the results for any other corpus)."""
    counts = np.bincount(np.asarray(stream, dtype=np.uint8), minlength=256)
    return int(counts[QUERY] + counts[list(VALUE_BYTES)].sum())


def plant_training_probes(
    x: torch.Tensor, y: torch.Tensor, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Copies of ``x``, ``y`` ``(B, n)`` with one probe per row (module docstring), and the
    values ``(B,)``; the draws come from ``gen`` (the step's generator)."""
    bsz, n = x.shape
    if n < 3:
        raise ValueError(f"a probe needs rows of at least 3 inputs, got {n}")
    d = torch.randint(1, n - 1, (bsz,), generator=gen)  # (B,) distances in [1, n - 2]
    v = torch.as_tensor(VALUE_BYTES)[torch.randint(0, len(VALUE_BYTES), (bsz,), generator=gen)]
    rows = torch.arange(bsz)
    x, y = x.clone(), y.clone()
    x[rows, n - 1 - d] = v
    y[rows, n - 2 - d] = v  # the target of the position before the value is the value
    x[rows, n - 1] = QUERY
    y[rows, n - 2] = QUERY
    y[rows, n - 1] = v
    return x, y, v


def probe_loss(logits: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) of the values at the last position; ``logits (B, n, 256)``."""
    return torch.nn.functional.cross_entropy(logits[:, -1, :], values.to(logits.device))


def probe_inputs(windows: torch.Tensor, distance: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, v)``: ``windows (N, L)`` of inputs with the value ``v[i] = VALUE_BYTES[i mod
    16]`` at position ``L - 1 - distance`` and ``QUERY`` at ``L - 1`` (module docstring)."""
    n_win, length = windows.shape
    if not 1 <= distance <= length - 2:
        raise ValueError(f"distance must be in [1, L - 2] = [1, {length - 2}], got {distance}")
    v = torch.as_tensor(VALUE_BYTES)[torch.arange(n_win) % len(VALUE_BYTES)]
    x = windows.clone()
    x[:, length - 1 - distance] = v
    x[:, length - 1] = QUERY
    return x, v

"""docs/theory.md §8: changing the bias only beyond the training length.

Change ``b(d)`` only for ``d >= L_train`` (``L_train >= W``), by a change of one sign
``c(d)`` (random magnitudes, some exactly zero). For softmax attention with any scores:

* every row ``l <= L_train`` is unchanged -- exactly: those rows only see distances
  ``d <= l - 1 < L_train`` (``s8_rows_unchanged``, measured bit for bit);
* for ``l > L_train`` the distant mass ``D_l(W)`` (attention on distances ``>= W``) moves
  weakly in the direction of the change: every changed weight lies beyond the window, so
  raising them moves mass out of the window and lowering them moves it in
  (``s8_distant_mass_direction``).

Both are measured on every row and every head of a set of biases (the ALiBi slopes of 8
heads, log-distance priors at several alphas, no bias) under random Gaussian scores, with
the torch operators ``bias_matrix`` and ``softmax_with_bias``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from proofs_check.result import CheckSpec, Measurement, theorem_check, worst_of
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "check_direction", "check_rows_unchanged", "head_biases"]

THEOREM = "Bias change beyond L_train (§8)"


def head_biases(n: int, *, dtype: torch.dtype, device: str) -> tuple[list[str], torch.Tensor]:
    """``(names, (H, n, n) bias)``: 8 ALiBi heads, log-distance alphas, and NoPE."""
    from priors.encodings import ALiBi, LogDistance, NoPE, alibi_slopes
    from proofs_check.operators.biases import bias_matrix

    encs = [ALiBi(slope=m) for m in alibi_slopes(8)]
    encs += [LogDistance(alpha=a) for a in (0.5, 1.0, 1.05, 1.5, 2.5)]
    encs.append(NoPE())
    names = [f"{e.name} {e.params}" for e in encs]
    return names, torch.stack([bias_matrix(e, n, dtype=dtype, device=device) for e in encs])


def _changed(bias: torch.Tensor, start: int, sign: float, gen: torch.Generator,
             scale: float) -> torch.Tensor:
    """``bias + c(l - j)`` with ``c(d) = sign * U(0, scale) * Bernoulli(0.8)`` for ``d >= start``.

    One change per head, shared by all rows (it is a change of ``b(d)``); ``c(d) = 0`` for
    ``d < start``. Masked entries (``-inf``) stay masked.
    """
    h, n, _ = bias.shape
    mag = torch.rand(h, n, generator=gen, dtype=torch.float64) * scale
    mag *= torch.rand(h, n, generator=gen, dtype=torch.float64) < 0.8  # some zero changes
    d = torch.arange(n)
    mag[:, d < start] = 0.0
    dist = (d.unsqueeze(1) - d.unsqueeze(0)).clamp(min=0)  # (n, n) distance l - j
    change = sign * torch.gather(mag, 1, dist.reshape(1, -1).expand(h, -1)).reshape(h, n, n)
    change = change.to(dtype=bias.dtype, device=bias.device)
    return torch.where(torch.isfinite(bias), bias + change, bias)


def _distant(attn: torch.Tensor, window: int) -> torch.Tensor:
    """``D_l(W)`` for every head and row: ``(H, n)``, summed in float64."""
    n = attn.shape[-1]
    d = torch.arange(n, device=attn.device)
    beyond = (d.unsqueeze(1) - d.unsqueeze(0)) >= window  # (n, n)
    return (attn.to(torch.float64) * beyond).sum(-1)


@theorem_check("s8_rows_unchanged", THEOREM)
@uses("biased_softmax")
def check_rows_unchanged(
    n: int = 192,
    train_length: int = 64,
    window: int = 16,
    samples: int = 2,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Rows ``l <= L_train`` are bit-for-bit unchanged by a change of ``b(d)``, ``d >= L_train``.

    Measured: the largest ``|A'[l, j] - A[l, j]|`` over rows ``l <= L_train``, every head,
    both signs of the change and every score sample. Reference 0, tolerance 0 (the rows
    receive identical inputs, so the outputs must be identical).

    Attention is ``system.biased_softmax(scores, bias)``. Negative control: the bias read at
    distance ``d + 1`` (``bias_off_by_one``, an off-by-one distance convention): row
    ``L_train`` then sees the changed ``b(L_train)`` and the check must fail.
    """
    if not 1 <= window <= train_length < n:
        raise ValueError("need 1 <= window <= train_length < n")
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    names, bias = head_biases(n, dtype=dtype, device=device)
    h = bias.shape[0]
    for _ in range(samples):
        scores = torch.randn(h, n, n, generator=gen, dtype=torch.float64)
        scores = scores.to(dtype=dtype, device=device)
        base = system.biased_softmax(scores, bias)
        for sign in (1.0, -1.0):
            new = system.biased_softmax(scores, _changed(bias, train_length, sign, gen, 1.0))
            diff = (new[:, :train_length] - base[:, :train_length]).abs().max()
            worst = worst_of(worst, diff)
    return Measurement(
        quantity="max |A' - A|, rows l <= L_train (b changed at d >= L_train)",
        measured=worst,
        reference=0.0,
        relation="==",
        allowance=0.0,
        params={"heads": names},
    )


@theorem_check("s8_distant_mass_direction", THEOREM)
@uses("biased_softmax")
def check_direction(
    n: int = 192,
    train_length: int = 64,
    window: int = 16,
    samples: int = 2,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """For ``l > L_train``, ``D_l(W)`` moves weakly with the sign of the change (§8).

    Measured: the largest ``-sign (D'_l - D_l)`` over rows ``l > L_train``, every head, both
    signs and every score sample (``<= 0``: never against the change). Reference 0,
    tolerance ``4 n eps(dtype)`` (each distant mass is a sum of at most ``n`` softmax
    entries, each within a few ulps). A system in which no ``D_l`` moves beyond the tolerance
    (a softmax that drops the bias) meets the weak inequality without testing it: then the
    measured value is ``inf`` (the changes are material, so the real one moves most rows).

    Attention is ``system.biased_softmax(scores, bias)``. Negative control: the bias applied
    with the wrong sign (``bias_sign_flipped``); the changes are material (magnitudes up to
    1 on most distances), so the distant mass moves against them and the check must fail.
    """
    if not 1 <= window <= train_length < n:
        raise ValueError("need 1 <= window <= train_length < n")
    gen = torch.Generator().manual_seed(seed)
    tol = 4 * n * torch.finfo(dtype).eps
    worst = -float("inf")
    moved = 0
    total = 0
    where: dict[str, Any] = {}
    names, bias = head_biases(n, dtype=dtype, device=device)
    h = bias.shape[0]
    for k in range(samples):
        scores = torch.randn(h, n, n, generator=gen, dtype=torch.float64)
        scores = scores.to(dtype=dtype, device=device)
        d_base = _distant(system.biased_softmax(scores, bias),
                          window)[:, train_length:]  # (H, n - L_train)
        for sign in (1.0, -1.0):
            changed = _changed(bias, train_length, sign, gen, 1.0)
            d_new = _distant(system.biased_softmax(scores, changed),
                             window)[:, train_length:]
            v = -sign * (d_new - d_base)  # > 0: against the change
            moved += int((sign * (d_new - d_base) > tol).sum())
            total += v.numel()
            i = int(v.argmax())  # a NaN entry is the argmax: it becomes the worst case
            if math.isnan(float(v.flatten()[i])) or float(v.flatten()[i]) > worst:
                head, row = divmod(i, v.shape[1])
                worst = float(v.flatten()[i])
                where = {"head": names[head], "row": train_length + row + 1, "sign": sign,
                         "sample": k, "D_before": float(d_base[head, row]),
                         "D_after": float(d_new[head, row])}
    return Measurement(
        quantity="max -sign (D'_l(W) - D_l(W)), rows l > L_train, all heads "
                 "(inf if no D_l moves)",
        measured=worst if moved else math.inf,
        reference=0.0,
        relation="<=",
        allowance=tol,
        params={"heads": names},
        details={"worst_case": where, "worst_against_change": worst, "strictly_moved": moved,
                 "row_head_cases": total},
    )


CHECKS = (
    CheckSpec(
        name="s8_rows_unchanged",
        theorem=THEOREM,
        section="§8",
        run=check_rows_unchanged,
        ci={"n": 192, "train_length": 64, "window": 16, "samples": 2},
        default={"n": 512, "train_length": 128, "window": 32, "samples": 3},
        full={"n": 2048, "train_length": 512, "window": 64, "samples": 4},
        negative={"system": System(biased_softmax=mutants.bias_off_by_one)},
    ),
    CheckSpec(
        name="s8_distant_mass_direction",
        theorem=THEOREM,
        section="§8",
        run=check_direction,
        ci={"n": 192, "train_length": 64, "window": 16, "samples": 2},
        default={"n": 512, "train_length": 128, "window": 32, "samples": 3},
        full={"n": 2048, "train_length": 512, "window": 64, "samples": 4},
        negative={"system": System(biased_softmax=mutants.bias_sign_flipped)},
    ),
)

"""THEORY.md §2, Proposition 2.4: reductions of the prefix-consistent operator.

* ``rho = 0`` is exactly the causal softmax (``kappa = 0`` removes the column term of
  ``F_l``); and for ``rho -> 0`` the operator tends to it continuously: row ``l`` satisfies
  ``log a = s + kappa (-log C') - log Z``, so ``|log a - log softmax| <= 2 kappa max|log C'|``.
  ``prop24_softmax`` measures both the ``rho = 0`` path and ``rho = 1e-12`` through the
  exact solver against ``torch.softmax`` on the masked scores.
* Adding a constant to every score of one row leaves the output unchanged (``Z_l`` absorbs
  it): ``prop24_row_shift``.
"""

from __future__ import annotations

import math

import torch

from proofs_check.operators.causal_ot import causal_ot_attention
from proofs_check.result import CheckResult, CheckSpec, dtype_name, make_result, stopwatch

__all__ = ["CHECKS", "check_row_shift", "check_softmax"]

THEOREM = "Proposition 2.4 (§2)"


def _masked_softmax(s: torch.Tensor) -> torch.Tensor:
    n = s.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
    return torch.softmax(s.masked_fill(upper, -math.inf), dim=-1)


def check_softmax(
    n: int = 64,
    samples: int = 2,
    score_bound: float = 3.0,
    *,
    small_rho: float = 1e-12,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> CheckResult:
    """``rho = 0`` and ``rho = small_rho`` (exact solver) vs ``torch.softmax``: max abs diff.

    Tolerance ``1e-10`` (float64): ``|log a - log softmax| <= 2 kappa log(n) + round-off``
    with ``kappa ~ 1e-12``, plus the exact solver's stopping error (``< 1e-10`` in ``log Z``,
    quadratic convergence) on weights ``<= 1``. float32: ``1e-5``.

    ``small_rho = 1e-3`` (negative control, a wrong ``rho``): the correction ``kappa log C'``
    is then ``~1e-3`` and must exceed the tolerance.
    """
    gen = torch.Generator().manual_seed(seed)
    with stopwatch() as elapsed:
        s = score_bound * (2 * torch.rand(samples, n, n, generator=gen, dtype=torch.float64) - 1)
        s = s.to(dtype=dtype, device=device)
        ref = _masked_softmax(s).double()
        at_zero = float((causal_ot_attention(s, 0.0).weights.double() - ref).abs().max())
        near = causal_ot_attention(s, small_rho, method="exact").weights.double()
        at_small = float((near - ref).abs().max())
    return make_result(
        check="prop24_softmax",
        theorem=THEOREM,
        quantity="max |A(rho=0 and rho->0) - softmax|",
        measured=max(at_zero, at_small),
        reference=0.0,
        relation="==",
        tol=1e-10 if dtype == torch.float64 else 1e-5,
        params={"n": n, "samples": samples, "score_bound": score_bound,
                "small_rho": small_rho, "seed": seed},
        dtype=dtype_name(dtype),
        device=str(device),
        seconds=elapsed(),
        details={"rho_0": at_zero, "rho_small": at_small},
    )


def check_row_shift(
    n: int = 64,
    rhos: tuple[float, ...] = (0.3, 0.9),
    samples: int = 2,
    shift_scale: float = 5.0,
    *,
    shift_kind: str = "row",
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> CheckResult:
    """Adding ``c_l`` to every score of row ``l`` changes nothing: max ``|A(S + c) - A(S)|``.

    Tolerance ``1e-12`` (float64): the exact solver sees shifted logs of size up to
    ``|c| <= 3 shift_scale``; ``Z_l`` absorbs the shift, so only round-off of those logs
    (``~1e-14``) and the Newton stopping error remain. float32: ``1e-5``.

    ``shift_kind = "column"`` (negative control) adds ``c_j`` to every score of key ``j``
    instead, which is not an invariance.
    """
    if shift_kind not in ("row", "column"):
        raise ValueError(f"shift_kind must be 'row' or 'column', got {shift_kind!r}")
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    with stopwatch() as elapsed:
        s = torch.randn(samples, n, n, generator=gen, dtype=torch.float64)
        c = shift_scale * torch.randn(samples, n, generator=gen, dtype=torch.float64)
        shift = c.unsqueeze(-1) if shift_kind == "row" else c.unsqueeze(-2)
        s, shifted = s.to(dtype=dtype, device=device), (s + shift).to(dtype=dtype,
                                                                      device=device)
        for rho in rhos:
            a = causal_ot_attention(s, rho, method="exact").weights.double()
            b = causal_ot_attention(shifted, rho, method="exact").weights.double()
            worst = max(worst, float((a - b).abs().max()))
    return make_result(
        check="prop24_row_shift",
        theorem=THEOREM,
        quantity=f"max |A(S + {shift_kind} constant) - A(S)|",
        measured=worst,
        reference=0.0,
        relation="==",
        tol=1e-12 if dtype == torch.float64 else 1e-5,
        params={"n": n, "rhos": list(rhos), "samples": samples, "shift_scale": shift_scale,
                "shift_kind": shift_kind, "seed": seed},
        dtype=dtype_name(dtype),
        device=str(device),
        seconds=elapsed(),
    )


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="prop24_softmax",
        theorem=THEOREM,
        section="§2.4",
        run=check_softmax,
        ci={"n": 32, "samples": 1},
        default={"n": 128, "samples": 2},
        full={"n": 512, "samples": 4},
        negative={"small_rho": 1e-3},
    ),
    CheckSpec(
        name="prop24_row_shift",
        theorem=THEOREM,
        section="§2.4",
        run=check_row_shift,
        ci={"n": 32, "samples": 1},
        default={"n": 128, "samples": 2},
        full={"n": 512, "samples": 4},
        negative={"shift_kind": "column"},
    ),
)

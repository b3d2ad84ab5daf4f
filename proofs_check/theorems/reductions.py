"""docs/theory.md §2, Proposition 2.4: reductions of the prefix-consistent operator.

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

from proofs_check.result import CheckSpec, Measurement, theorem_check, worst_of
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "check_row_shift", "check_softmax"]

THEOREM = "Proposition 2.4 (§2)"


def _masked_softmax(s: torch.Tensor) -> torch.Tensor:
    n = s.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
    return torch.softmax(s.masked_fill(upper, -math.inf), dim=-1)


@theorem_check("prop24_softmax", THEOREM)
@uses("operator")
def check_softmax(
    n: int = 64,
    samples: int = 2,
    score_bound: float = 3.0,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """``rho = 0`` and ``rho = 1e-12`` (exact solver) vs ``torch.softmax``: max abs diff.

    Tolerance ``1e-10`` (float64): ``|log a - log softmax| <= 2 kappa log(n) + round-off``
    with ``kappa ~ 1e-12``, plus the exact solver's stopping error (``< 1e-10`` in ``log Z``,
    quadratic convergence) on weights ``<= 1``. float32: ``1e-5``.

    Negative control: scores multiplied by 1.01 inside the operator (a wrong temperature,
    ``system.operator``).
    """
    gen = torch.Generator().manual_seed(seed)
    s = score_bound * (2 * torch.rand(samples, n, n, generator=gen, dtype=torch.float64) - 1)
    s = s.to(dtype=dtype, device=device)
    ref = _masked_softmax(s).double()
    at_zero = float((system.operator(s, 0.0).weights.double() - ref).abs().max())
    near = system.operator(s, 1e-12, method="newton").weights.double()
    at_small = float((near - ref).abs().max())
    return Measurement(
        quantity="max |A(rho=0 and rho->0) - softmax|",
        measured=worst_of(at_zero, at_small),
        reference=0.0,
        relation="==",
        allowance=1e-10 if dtype == torch.float64 else 1e-5,
        details={"rho_0": at_zero, "rho_small": at_small},
    )


@theorem_check("prop24_row_shift", THEOREM)
@uses("operator")
def check_row_shift(
    n: int = 64,
    rhos: tuple[float, ...] = (0.3, 0.9),
    samples: int = 2,
    shift_scale: float = 5.0,
    *,
    system: System | None = None,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    seed: int = 0,
) -> Measurement:
    """Adding ``c_l`` to every score of row ``l`` changes nothing: max ``|A(S + c) - A(S)|``.

    ``c_l ~ N(0, shift_scale^2)``. Tolerance ``1e-12`` (float64): the exact solver sees
    shifted logs of size up to ``|c| <= 3 shift_scale``; ``Z_l`` absorbs the shift, so only
    round-off of those logs (``~1e-14``) and the Newton stopping error remain. float32:
    ``1e-5``.

    Negative control: scores clamped to ``[-5, 5]`` inside the operator (a "stability" clamp
    that is not shift-invariant, ``system.operator``).
    """
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    s = torch.randn(samples, n, n, generator=gen, dtype=torch.float64)
    c = shift_scale * torch.randn(samples, n, generator=gen, dtype=torch.float64)
    s, shifted = (s.to(dtype=dtype, device=device),
                  (s + c.unsqueeze(-1)).to(dtype=dtype, device=device))
    for rho in rhos:
        a = system.operator(s, rho, method="newton").weights.double()
        b = system.operator(shifted, rho, method="newton").weights.double()
        worst = worst_of(worst, (a - b).abs().max())
    return Measurement(
        quantity="max |A(S + row constant) - A(S)|",
        measured=worst,
        reference=0.0,
        relation="==",
        allowance=1e-12 if dtype == torch.float64 else 1e-5,
    )


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="prop24_softmax",
        theorem=THEOREM,
        section="§2.4",
        run=check_softmax,
        ci={"n": 32, "samples": 1},
        default={"n": 2048, "samples": 2},
        full={"n": 4096, "samples": 4},
        negative={"system": System(operator=mutants.temperature(1.01))},
    ),
    CheckSpec(
        name="prop24_row_shift",
        theorem=THEOREM,
        section="§2.4",
        run=check_row_shift,
        ci={"n": 32, "samples": 1},
        default={"n": 2048, "samples": 2},
        full={"n": 4096, "samples": 4},
        negative={"system": System(operator=mutants.clamped_scores(5.0))},
    ),
)

"""The qualitative predictions of docs/theory.md §5 and §7, checked on a results file.

Each prediction compares a measured quantity with a stated amount and a margin of three
standard errors (``se`` of ``results``: the larger of the paired-over-windows and the
over-seeds standard error), so that a prediction that holds is not noise.

Masses, by the class of the prior (docs/theory.md §5):

* diluting priors (``class == "dilutes"``) lose window mass: the measured window mass at
  ``Lmax`` is below its value at ``L0`` by at least half the exact prior's loss and by
  more than ``3 se``;
* summable priors stay within their predicted growth: the measured distant-mass growth
  over ``[L0, Lmax]`` exceeds the exact prior's growth by at most ``GROWTH_SLACK`` (a
  stated allowance for the content scores) ``+ 3 se``; the margin exponent
  ``1 + delta*`` of ``margin-T`` grows by at most ``T + 3 se`` (its guarantee,
  docs/theory.md §7, is ``G <= T`` at ``B = 0`` over ``[W, Lmax]``, which contains
  ``[L0, Lmax]``).

Loss, by the growth ``G`` of the exact prior's distant mass over ``[L0, Lmax]`` (the
quantity the margin selector bounds, docs/theory.md §7), not by the class: the class is a
statement about ``l -> inf``, and a summable prior close to the boundary (log-distance
``alpha = 1.1``: ``G = 0.23`` from 128 to 4096) loses as much window mass over the lengths
measured as a diluting one. A prior with ``G > FLAT_GROWTH`` degrades:
``change@Lmax - 3 se > DEGRADE_MIN`` bits/byte; a prior with ``G <= FLAT_GROWTH`` (the
tolerance ``--tol 0.1`` of the margin examples) holds: ``change@Lmax <= HOLD_MAX + 3 se``.

Here ``se`` of a growth is the standard error over seeds of the per-seed growth.

Learned priors are classified by their learned values (a KERPLE-log head with learned
``r1 > 1`` is summable); a variant whose heads fall in both classes is not checked.

The causal OT variants (``ot-R``) are checked the same way against their constant-score
prior ``CausalOTPrior(R)`` (Theorem 2: it dilutes at ``l^-(1-R)``, so both predictions are
"loses window mass" and "degrades"). Theorem 3's bracket is about additive biases under
softmax and is not measured for them; Theorem 1's content-score bound
``W e^{2B(1-R)} l^-(1-R)`` is not used either: at these score spreads it exceeds 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEGRADE_MIN", "FLAT_GROWTH", "GROWTH_SLACK", "HOLD_MAX", "Prediction",
           "check_predictions"]

#: A prior whose exact growth exceeds FLAT_GROWTH must lose more than this (bits per byte).
DEGRADE_MIN = 0.05
#: A prior whose exact growth is at most FLAT_GROWTH may change by at most this, plus 3 se.
HOLD_MAX = 0.02
#: Exact distant-mass growth over [L0, Lmax] up to which the loss is predicted to hold.
FLAT_GROWTH = 0.1
#: Growth of the measured distant mass allowed beyond the exact prior's (summable priors).
GROWTH_SLACK = 0.05


@dataclass(frozen=True)
class Prediction:
    """One checked prediction: what was claimed, measured, the threshold, the verdict."""

    variant: str
    claim: str
    measured: float
    threshold: float
    holds: bool

    def line(self) -> str:
        mark = "holds" if self.holds else "FAILS"
        return (f"{self.variant:<12} {self.claim:<50} measured {self.measured:+.4f} "
                f"threshold {self.threshold:+.4f}  {mark}")


def check_predictions(results: dict[str, Any]) -> list[Prediction]:
    """The predictions of the module docstring for every variant of ``results``."""
    out: list[Prediction] = []
    for name, v in results["variants"].items():
        classes = v["classes"]
        if len(classes) != 1:
            continue  # heads in both classes: no single prediction
        first, last = v["per_length"][0], v["per_length"][-1]
        se, m_se = last["se"], max(last["window_mass_se_seeds"], first["window_mass_se_seeds"])
        if classes[0] == "dilutes":
            lost = first["window_mass"] - last["window_mass"]
            exact_lost = first["exact_window_mass"] - last["exact_window_mass"]
            thr = max(0.5 * exact_lost, 3 * m_se)
            out.append(Prediction(name, "window mass lost L0->Lmax > max(exact/2, 3 se)",
                                  lost, thr, lost > thr))
        else:
            growth, g_se = v["distant_growth_measured"], v["distant_growth_se_seeds"]
            if "tol" in v:
                thr, claim = v["tol"] + 3 * g_se, f"distant-mass growth <= tol {v['tol']} + 3 se"
            else:
                thr = v["distant_growth_exact"] + GROWTH_SLACK + 3 * g_se
                claim = f"distant-mass growth <= exact + {GROWTH_SLACK} + 3 se"
            out.append(Prediction(name, claim, growth, thr, growth <= thr))
        if v["distant_growth_exact"] > FLAT_GROWTH:
            thr = DEGRADE_MIN + 3 * se
            out.append(Prediction(name, f"G > {FLAT_GROWTH}: change@Lmax > {DEGRADE_MIN} + 3 se",
                                  last["change"], thr, last["change"] > thr))
        else:
            thr = HOLD_MAX + 3 * se
            out.append(Prediction(name, f"G <= {FLAT_GROWTH}: change@Lmax <= {HOLD_MAX} + 3 se",
                                  last["change"], thr, last["change"] <= thr))
    return out

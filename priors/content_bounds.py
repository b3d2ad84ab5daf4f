"""Window and distant masses of a prior under bounded content scores (docs/theory.md §5).

A row of attention with additive prior weights ``e^{b(d)}`` and content scores
``|s| <= B`` puts on the window (distances ``d < W``) the mass

    M_l(W) = sum_{d<W} e^{b(d)+s_d} / sum_{d<l} e^{b(d)+s_d}.

With ``S_W = sum_{d<W} e^{b(d)}``, the prior tail ``T_l = S_l - S_W`` and ``E = e^{2B}``:

    M^-_l(W) = S_W / (S_W + E T_l)     <=  M_l(W)  <=  M^+_l(W) = E S_W / (E S_W + T_l),

attained by scores ``-B`` on the window and ``+B`` beyond it (and the reverse). The
distant mass ``D = 1 - M`` is bracketed by

    D^-_l(W) = T_l / (E S_W + T_l)      <=  D_l(W)  <=  D^+_l(W) = E T_l / (S_W + E T_l).

Everything is written in terms of the tail ``T_l`` (never ``S_l - S_W`` or ``1 - M``),
so no bound loses digits when the distant mass is tiny. The functions are plain
arithmetic and accept any number type that supports it (``float``, ``mpmath.mpf``,
``flint.arb`` balls, where the result is a rigorous enclosure).

>>> m_lo, m_hi = window_mass_bounds(2.0, 6.0, 1.0)     # B = 0: both equal S_W / S_l
>>> m_lo == m_hi == 0.25
True
>>> d_lo, d_hi = distant_mass_bounds(2.0, 6.0, 1.0)
>>> d_lo == d_hi == 0.75
True
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["distant_mass_bounds", "window_mass_bounds"]

Num = TypeVar("Num")


def window_mass_bounds(window_sum: Num, tail_sum: Num, score_factor: Num) -> tuple[Num, Num]:
    """``(M^-, M^+)`` of docs/theory.md §5 from ``S_W``, ``T_l = S_l - S_W`` and ``E = e^{2B}``.

    ``M^- = S_W / (S_W + E T)``, ``M^+ = E S_W / (E S_W + T)``. With ``E = 1`` (``B = 0``)
    both are the exact prior window mass ``S_W / S_l``.
    """
    lower = window_sum / (window_sum + score_factor * tail_sum)
    upper = score_factor * window_sum / (score_factor * window_sum + tail_sum)
    return lower, upper


def distant_mass_bounds(window_sum: Num, tail_sum: Num, score_factor: Num) -> tuple[Num, Num]:
    """``(D^-, D^+)`` of docs/theory.md §5: ``D^- = T / (E S_W + T)``, ``D^+ = E T / (S_W + E T)``.

    ``D^- = 1 - M^+`` and ``D^+ = 1 - M^-``, computed without the subtraction.
    """
    lower = tail_sum / (score_factor * window_sum + tail_sum)
    upper = score_factor * tail_sum / (window_sum + score_factor * tail_sum)
    return lower, upper

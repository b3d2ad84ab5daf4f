"""Which column targets a causal transport plan can meet (docs/theory.md §1, Proposition 1).

A nonnegative lower-triangular ``n x n`` matrix with unit row sums has column sums ``b`` with
``b >= 0``, ``sum b = n`` and, for every ``k``,

    sum_{j >= k} b_j <= n - k + 1

(columns ``j >= k`` are reached only by the ``n - k + 1`` rows ``l >= k``), and conversely
every such ``b`` is the column-sum vector of one (Proposition 1 (b): rows filled in order
never get stuck). With ``b = 1`` every inequality is an equality and the identity is the
only plan (Proposition 1 (c)), the causal obstruction to balanced OT attention.

>>> import numpy as np
>>> tail_condition(np.ones(4)), tail_condition(np.array([0.5, 1.0, 1.0, 1.5]))
(True, False)
"""

from __future__ import annotations

import numpy as np

__all__ = ["tail_condition"]


def tail_condition(b: np.ndarray, *, slack: float = 0.0, atol: float = 1e-9) -> bool:
    """``sum_{j >= k} b_j <= n - k + 1 + slack + atol`` for every ``k = 1..n`` (Proposition 1).

    ``b``: the column targets (1-D, ``b[j-1]`` for key ``j``), taken to satisfy the other
    hypotheses of Proposition 1 (b), ``b >= 0`` and ``sum b = n``; only the tail inequalities
    are tested. ``atol`` absorbs the round-off of the float64 tail sums (``n`` terms);
    ``slack`` moves the bound itself (0 is the theorem).
    """
    b = np.asarray(b, dtype=np.float64)
    if b.ndim != 1:
        raise ValueError(f"b must be a 1-D array of column targets, got shape {b.shape}")
    n = len(b)
    tails = np.cumsum(b[::-1])[::-1]  # tails[k-1] = sum_{j >= k} b_j
    return bool(np.all(tails <= n - np.arange(n) + slack + atol))

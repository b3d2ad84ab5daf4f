"""Theorem 3 checked row by row on one layer's attention, all heads at once (docs/theory.md §5).

Input: the weights ``a`` of one layer, shape ``H x n x n`` (float32, row ``i`` is the query at
position ``i``, i.e. query length ``l = i + 1``), and each head's ``RowPrior``: the bias
``b(d)`` the model's code adds, the keys each row may see (``span``: all ``l`` of them, a
sliding window, a chunk) and the prior sums ``log S_W(l)``, ``log T_l`` of every row.

Per head and row ``l >= W``:

* measured window and distant masses ``M = X / (X + Y)``, ``D = Y / (X + Y)``, with
  ``X = sum_{d < W} a_d`` and ``Y = sum_{d >= W} a_d`` over the keys the row may see
  (float64 sums of the float32 weights; ``D`` from its own sum, so a tiny ``D`` keeps its
  digits);
* the content spread: the logits are ``log a_d + c`` (softmax is invariant to a row constant
  and ``log`` inverts ``exp`` where ``a_d > 0``), so the content scores ``s_d = log a_d - b(d)``
  are known up to ``c`` and ``B_l = (max s - min s) / 2`` is the smallest bound with
  ``|s_d - c'| <= B_l``; computed as ``log max u - log min u`` of ``u_d = a_d e^{-b(d)}``
  (float64 products, two logarithms per row);
* Theorem 3's bracket for ``B_l``: ``M^- = 1 / (1 + e^{2B} T/S_W) <= M <= M^+ = 1 / (1 +
  e^{-2B} T/S_W)`` and the same for ``D``, each within the relative tolerance ``RTOL``.

Because ``B_l`` comes from the same row, the bracket holds for any prior whose sums agree
with its bias: the check tests "model weights -> our bias -> our prior sums -> Theorem 3".
The sums are float64 running sums of ``e^{b(d)}`` in the log domain, checked against the
encoding's exact ``weight_sum`` at anchor lengths (relative ``SUM_RTOL``): a prior whose
exact sums disagree with its bias is reported as such (the tests' negative control).

Rows are told apart: *trivial* (``T_l = 0``: the row sees no distant key, ``M = 1`` for any
content; excluded from the slack), *underflow* (a weight the prior allows is exactly 0 in
some heads but not all: ``e^{z}`` underflowed), *masked by the model* (a key the prior
allows is 0 in every head of the layer, in a layer of two or more heads: a mask the
prior does not have), *attending masked keys* (weight on a key the prior masks). Only
the rest are checked. Per head also: the entropy of the last row (nats) and the mean
weight on the first token over all rows (attention-sink score; a sink above 0.3).
Everything is vectorised over heads and over blocks of rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["RTOL", "SINK_THRESHOLD", "SUM_RTOL", "RowPrior", "check_layer", "row_prior"]

#: Relative tolerance of the bracket check (float32 weights; see the module docstring).
RTOL = 1e-5
#: Relative agreement required of the running prior sums with the exact ``weight_sum``.
SUM_RTOL = 1e-9
#: A head whose mean weight on the first token exceeds this is an attention sink.
SINK_THRESHOLD = 0.3
#: Elements of one float64 work block (heads x rows x columns).
BLOCK_ELEMENTS = 1 << 20


@dataclass(frozen=True, eq=False)
class RowPrior:
    """One head's prior at sequence length ``n``: ``bias[d]`` (float64, ``d < n``),
    ``span[i]`` keys seen by row ``i``, ``log_sw[i]`` and ``log_t[i]`` (``-inf``: no tail)."""

    bias: np.ndarray
    span: np.ndarray
    log_sw: np.ndarray
    log_t: np.ndarray
    zero_bias: bool
    sum_error: float


def _anchors(lo: int, hi: int, count: int = 12) -> list[int]:
    if hi <= lo:
        return []
    return sorted({int(x) for x in np.geomspace(lo, hi, count)} | {lo, hi})


def row_prior(enc: Any, n: int, window: int) -> RowPrior:
    """The ``RowPrior`` of ``enc`` (``NoPE``/``ALiBi``/``T5``-like, or ``SlidingWindow`` /
    ``ChunkedWindow`` around one) at length ``n``."""
    from priors.diagnose.windowed import ChunkedWindow, SlidingWindow

    rows = np.arange(n)
    if isinstance(enc, SlidingWindow):
        base, span = enc.base, np.minimum(rows + 1, enc.span)
    elif isinstance(enc, ChunkedWindow):
        base, span = enc.base, rows % enc.chunk + 1
    else:
        base, span = enc, rows + 1
    bias = np.asarray(base.bias(np.arange(n, dtype=np.float64)), dtype=np.float64)
    head = np.logaddexp.accumulate(bias)  # head[m-1] = log sum_{d<m} e^{b(d)}
    tail = np.logaddexp.accumulate(bias[window:]) if n > window else np.empty(0)
    log_sw = head[np.minimum(window, span) - 1]
    log_t = np.full(n, -np.inf)
    has_tail = span > window
    log_t[has_tail] = tail[span[has_tail] - window - 1]
    import mpmath

    err = 0.0  # the running sums against the encoding's exact ones
    for m in _anchors(1, int(span.max())):
        for lo, logs in ((0, head), (window, tail)):
            if m <= lo:
                continue
            exact = base.weight_sum(lo, m, dps=20)
            if exact > 0:
                ours = mpmath.exp(mpmath.mpf(float(logs[m - lo - 1])))
                err = max(err, float(abs(ours / exact - 1)))
    zero = bool(np.all(bias[: int(span.max())] == 0))
    return RowPrior(bias, span, log_sw, log_t, zero, err)


def _group(priors: list[RowPrior], threads: int) -> list[tuple[RowPrior, list[int]]]:
    """Heads sharing one prior, split into at most ``threads`` units of work."""
    groups: dict[int, tuple[RowPrior, list[int]]] = {}
    for h, p in enumerate(priors):
        groups.setdefault(id(p), (p, []))[1].append(h)
    out = []
    for p, heads in groups.values():
        parts = min(threads, len(heads)) if len(groups) < threads else 1
        step = -(-len(heads) // parts)
        out += [(p, heads[k:k + step]) for k in range(0, len(heads), step)]
    return out


class _Rows:
    """Per (head, row) accumulators of one layer, float64 arrays ``H x n``."""

    def __init__(self, h: int, n: int) -> None:
        self.win = np.zeros((h, n))
        self.dist = np.zeros((h, n))
        self.umax = np.zeros((h, n))
        self.umin = np.full((h, n), np.inf)
        self.outside = np.zeros((h, n))


def _toeplitz(padded: np.ndarray, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    """The view ``T[r, k] = f(d)`` at the distance ``d = (r0 + r) - (c0 + k)`` of rows
    ``[r0, r1)`` and columns ``[c0, c1)``, from ``padded = [0] * n + [f(0), ..., f(n-1)]``
    (negative distances read the zeros; ``r1 - r0 <= n`` keeps every index inside)."""
    n = len(padded) // 2
    start = n + r0 - c0
    step = padded.strides[0]
    return as_strided(padded[start:], shape=(r1 - r0, c1 - c0), strides=(step, -step),
                      writeable=False)


def _rowsum(x: np.ndarray) -> np.ndarray:
    """Row sums of a float32 block accumulated in float64 over slices of 1024 columns
    (numpy's pairwise float32 sum inside each: relative error below 1e-6)."""
    out = np.zeros(x.shape[:-1])
    for k in range(0, x.shape[-1], 1024):
        out += x[..., k:k + 1024].sum(-1, dtype=np.float32)
    return out


def _block(a: np.ndarray, hs: Any, r0: int, r1: int, cols: tuple[int, int], prior: RowPrior,
           window: int, acc: _Rows, kind: str, ev: tuple[np.ndarray, bool]) -> None:
    """Accumulate the columns ``[c0, c1)`` of rows ``[r0, r1)`` for the heads ``hs`` sharing
    ``prior``; ``kind`` from ``_columns``."""
    c0, c1 = cols
    if c1 <= c0:
        return
    blk = a[hs, r0:r1, c0:c1]  # (G, r, w) float32
    sel = (hs, slice(r0, r1))
    e_vec, wide = ev
    e = None if prior.zero_bias else _toeplitz(e_vec, r0, r1, c0, c1)
    if kind == "masked":  # narrow edges (about the rows' count wide): masks per entry
        d = np.arange(r0, r1)[:, None] - np.arange(c0, c1)[None, :]
        valid = (d >= 0) & (d < prior.span[r0:r1, None])
        blk64 = blk.astype(np.float64)
        acc.win[sel] += np.einsum("grw,rw->gr", blk64, valid & (d < window))
        acc.dist[sel] += np.einsum("grw,rw->gr", blk64, valid & (d >= window))
        acc.outside[sel] = np.maximum(acc.outside[sel], (blk * ~valid).max(-1))
        em = valid if e is None else np.where(valid, e, 0.0)
        u = blk64 * em
        hi = u.max(-1)
        lo = np.where(valid, u, np.inf).min(-1)
    else:
        (acc.dist if kind == "distant" else acc.win)[sel] += _rowsum(blk)
        u = blk if e is None else blk * (e if wide else e.astype(np.float32))
        hi, lo = u.max(-1), u.min(-1)
    acc.umax[sel] = np.maximum(acc.umax[sel], hi)
    acc.umin[sel] = np.fmin(acc.umin[sel], lo)


def _columns(prior: RowPrior, r0: int, r1: int, window: int) -> list[tuple[int, int, str]]:
    """Column blocks of the rows ``[r0, r1)``: ``distant`` (every entry a distant key every
    row may see), ``window`` (every entry a window key every row may see), ``masked`` (the
    edges between them, where each entry's kind is looked up)."""
    rows = np.arange(r0, r1)
    first = rows - prior.span[r0:r1] + 1  # first key each row may see
    c0, lo_all = int(first.min()), int(first.max())
    p1 = max(c0, min(lo_all, r1))
    p2 = max(p1, min(r0 - window + 1, r1))  # distant for every row: j <= r0 - W
    p3 = max(p2, min(max(r1 - window, lo_all), r1))  # in every row's window: j >= r1 - W
    p4 = max(p3, min(r0 + 1, r1))  # at or before every row's query: j <= r0
    return [(c0, p1, "masked"), (p1, p2, "distant"), (p2, p3, "masked"), (p3, p4, "window"),
            (p4, r1, "masked")]


def _zero_rows(a: np.ndarray, r: int, prior: RowPrior,
               heads: list[int]) -> tuple[set[int], set[int]]:
    """Heads of row ``r`` with a zero weight on an allowed key: (masked in every head,
    underflow in some)."""
    lo = r - int(prior.span[r]) + 1
    zero = a[:, r, lo:r + 1] == 0  # (H, k)
    every = zero.all(0) if a.shape[0] > 1 else np.zeros(zero.shape[1], dtype=bool)
    masked, under = set(), set()
    for h in heads:
        if zero[h].any():
            (masked if (zero[h] & every).any() else under).add(h)
    return masked, under


def _unit(a: np.ndarray, prior: RowPrior, heads: list[int], window: int, acc: _Rows) -> None:
    n = a.shape[-1]
    hs: Any = (slice(heads[0], heads[-1] + 1) if heads == list(range(heads[0], heads[-1] + 1))
               else np.asarray(heads))
    width = int(prior.span.max())
    support = prior.bias[:width]
    # float32 products when e^{-b} stays inside the float32 range on the keys seen
    wide = bool(np.max(np.abs(support), initial=0.0) > 80)
    with np.errstate(over="ignore"):
        ev = (np.concatenate([np.zeros(n), np.exp(-prior.bias)]), wide)
    step = max(1, BLOCK_ELEMENTS // max(1, len(heads) * width))
    rows_hs = hs
    for r0 in range(window - 1, n, step):
        r1 = min(n, r0 + step)
        for c0, c1, kind in _columns(prior, r0, r1, window):
            _block(a, hs, r0, r1, (c0, c1), prior, window, acc, kind, ev)
        c_first = int((np.arange(r0, r1) - prior.span[r0:r1] + 1).min())
        if c_first > 0:  # keys the prior masks for every row of the block
            sel = (rows_hs, slice(r0, r1))
            acc.outside[sel] = np.maximum(acc.outside[sel],
                                          a[hs, r0:r1, :c_first].max(-1))


def check_layer(a: Any, priors: list[RowPrior], window: int, *, rtol: float = RTOL,
                threads: int = 2) -> list[dict[str, Any]]:
    """Per head of one layer's attention ``a`` (``H x n x n``, numpy or torch, float32):
    the row totals of the module docstring, with the heads split over ``threads``."""
    a = np.asarray(a.numpy() if hasattr(a, "numpy") else a, dtype=np.float32)
    nh, n = a.shape[0], a.shape[-1]
    if a.shape != (nh, n, n):
        raise ValueError(f"weights must be H x n x n, got {a.shape}")
    if len(priors) != nh:
        raise ValueError(f"one prior per head: {nh} heads, {len(priors)} priors")
    if n < window:
        raise ValueError(f"length {n} is shorter than the window {window}")
    acc = _Rows(nh, n)
    units = _group(priors, max(1, threads))
    if threads > 1 and len(units) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda u: _unit(a, u[0], u[1], window, acc), units))
    else:
        for p, heads in units:
            _unit(a, p, heads, window, acc)
    return _totals(a, priors, acc, window, rtol)


def _zero_classes(a: np.ndarray, priors: list[RowPrior], acc: _Rows,
                  rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(masked_by_model, underflow)``, each ``H x len(rows)``: rows with a zero weight on a
    key the prior allows, in every head of the layer or in some."""
    nh = acc.win.shape[0]
    zero = (acc.umin[:, rows] <= 0) | np.isnan(acc.umin[:, rows])
    masked = np.zeros((nh, len(rows)), dtype=bool)
    under = np.zeros((nh, len(rows)), dtype=bool)
    for k in np.flatnonzero(zero.any(0)):
        heads = [h for h in range(nh) if zero[h, k]]
        m, u = _zero_rows(a, int(rows[k]), priors[heads[0]], heads)
        masked[list(m), k] = True
        under[list(u), k] = True
    return masked, under


def _bracket(p: RowPrior, acc: _Rows, h: int, rows: np.ndarray,
             rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the content spread, whether ``M`` and ``D`` lie in Theorem 3's bracket, and
    the smaller relative slack of the two."""
    win, dist = acc.win[h, rows], acc.dist[h, rows]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        m_meas, d_meas = win / (win + dist), dist / (win + dist)
        spread = (np.log(acc.umax[h, rows]) - np.log(acc.umin[h, rows])) / 2
        x = p.log_t[rows] - p.log_sw[rows]  # ln(T / S_W)
        m_lo = 1.0 / (1.0 + np.exp(np.minimum(2 * spread + x, 700.0)))
        m_hi = 1.0 / (1.0 + np.exp(np.minimum(x - 2 * spread, 700.0)))
        d_lo = 1.0 / (1.0 + np.exp(np.minimum(-x + 2 * spread, 700.0)))
        d_hi = 1.0 / (1.0 + np.exp(np.minimum(-x - 2 * spread, 700.0)))
        inside = ((m_meas >= m_lo * (1 - rtol)) & (m_meas <= m_hi * (1 + rtol))
                  & (d_meas >= d_lo * (1 - rtol)) & (d_meas <= d_hi * (1 + rtol)))
        slack = np.minimum(np.minimum(m_meas - m_lo, m_hi - m_meas) / np.maximum(m_meas, 1e-300),
                           np.minimum(d_meas - d_lo, d_hi - d_meas) / np.maximum(d_meas, 1e-300))
    return spread, inside, slack


def _last_row(a: np.ndarray, p: RowPrior, acc: _Rows, h: int) -> dict[str, Any]:
    """The last row's masses beside the prior's, its entropy, and the spread the content
    would need to move the prior's masses to the measured ones."""
    last = a.shape[-1] - 1
    row = a[h, last, last - int(p.span[last]) + 1:last + 1].astype(np.float64)
    nz = row[row > 0]
    w, d = acc.win[h, last], acc.dist[h, last]
    needed = None
    if w > 0 and d > 0 and np.isfinite(p.log_t[last]):
        needed = abs((math.log(w) - math.log(d)) - (p.log_sw[last] - p.log_t[last])) / 2
    return {
        "measured_window_mass": float(w / (w + d)),
        "measured_distant_mass": float(d / (w + d)),
        "prior_window_mass": float(1.0 / (1.0 + np.exp(p.log_t[last] - p.log_sw[last]))),
        "prior_distant_mass": float(1.0 / (1.0 + np.exp(p.log_sw[last] - p.log_t[last]))),
        "content_needed": needed,
        "entropy": float(-(nz * np.log(nz)).sum() / row.sum() + np.log(row.sum())),
        "entropy_uniform": math.log(int(p.span[last])),
    }


def _totals(a: np.ndarray, priors: list[RowPrior], acc: _Rows, window: int,
            rtol: float) -> list[dict[str, Any]]:
    nh, n = acc.win.shape
    rows = np.arange(window - 1, n)
    masked, under = _zero_classes(a, priors, acc, rows)
    first = a[:, :, 0].astype(np.float64).mean(-1)
    out = []
    for h in range(nh):
        p = priors[h]
        attends_masked = acc.outside[h, rows] > 0
        trivial = ~np.isfinite(p.log_t[rows])
        bad = masked[h] | under[h] | attends_masked | (acc.win[h, rows] + acc.dist[h, rows] <= 0)
        ok = ~bad & ~trivial
        spread, inside, slack = _bracket(p, acc, h, rows, rtol)
        sp = spread[ok]
        out.append({
            **_last_row(a, p, acc, h),
            "spread_max": float(sp.max()) if sp.size else None,
            "spread_median": float(np.median(sp)) if sp.size else None,
            "rows_checked": int(ok.sum()),
            "rows_outside": int((ok & ~inside).sum()),
            "rows_trivial": int((trivial & ~bad).sum()),
            "rows_underflow": int(under[h].sum()),
            "rows_masked_by_model": int(masked[h].sum()),
            "rows_attending_masked": int(attends_masked.sum()),
            "min_relative_slack": float(slack[ok].min()) if ok.any() else None,
            "first_token_weight": float(first[h]),
            "sink": bool(first[h] > SINK_THRESHOLD),
            "prior_sum_error": p.sum_error,
        })
    return out

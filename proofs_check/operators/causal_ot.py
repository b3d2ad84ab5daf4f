r"""The prefix-consistent causal optimal-transport attention operator (THEORY §1-§2).

Row ``l`` of the operator (queries ``l = 1..n``, keys ``j <= l``) minimises over the simplex

.. math::

    F_l(a) = \sum_j a_j (\log a_j - s_{lj}) + \kappa \sum_j \phi(C_{l-1,j} + a_j),
    \qquad \phi(x) = x \log x - x,\quad \kappa = \rho / (1 - \rho),

with ``C[l-1, j] = sum_{k=j}^{l-1} a[k, j]`` the mass key ``j`` received from earlier rows.
Its minimiser is the fixed point of Lemma 2.1, ``a_j (C_j + a_j)^kappa = e^{s_j} / Z_l``,
``sum_j a_j = 1``. Because row ``l`` depends only on rows ``< l``, the operator is
prefix-consistent (Proposition 2.3); ``rho = 0`` is softmax (Proposition 2.4).

Methods
-------
``"sinkhorn"``
    Lemma 2.2 in the log domain: all rows at once, ``A = rowsoftmax(S + logV)``,
    ``C' = cumsum_rows(A)``, ``logV <- rho (logV - log C')``; about ``rho`` contraction a sweep.
``"anderson"``
    The same map with type-II Anderson mixing (memory 6); ``rho = 0.99`` reaches ``1e-10``
    in far fewer sweeps than the plain iteration.
``"exact"``
    Lemma 2.1 row by row: a safeguarded Newton iteration on ``log Z_l`` per row, each key's
    scalar monotone equation solved by Newton, vectorised over the batch and the keys.
``"auto"``
    ``"exact"`` (fastest and most accurate measured on CPU at ``n <= 2048`` for
    ``rho >= 0.6``; see ``benchmarks/operators.py``) -- see :func:`causal_ot_attention`.

The arbitrary-precision ground truth is :func:`causal_ot_exact_mp`; the O(n)-memory streaming
solver is :func:`stream_causal_ot`.
"""

from __future__ import annotations

import warnings

import torch

from ._causal_ot_common import (
    CausalOTResult,
    ConvergenceInfo,
    ConvergenceWarning,
    causal_softmax,
    compute_dtype,
    default_tol,
    live_mask,
    validate_rho,
    validate_scores,
)
from ._causal_ot_exact import exact_dense
from ._causal_ot_grad import attach_implicit_grad
from ._causal_ot_mp import causal_ot_exact_mp
from ._causal_ot_sinkhorn import anderson, sinkhorn
from ._causal_ot_stream import stream_causal_ot

__all__ = [
    "METHODS",
    "CausalOTResult",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "causal_ot_attention",
    "causal_ot_exact_mp",
    "stream_causal_ot",
]

METHODS = ("auto", "sinkhorn", "anderson", "exact")

_DEFAULT_MAX_ITER = {"sinkhorn": 100_000, "anderson": 2_000, "exact": 100}


def _auto_method(n: int, rho: float) -> str:
    return "exact"


def causal_ot_attention(
    scores: torch.Tensor,
    rho: float,
    *,
    method: str = "auto",
    tol: float | None = None,
    max_iter: int | None = None,
) -> CausalOTResult:
    r"""Prefix-consistent causal OT attention weights (THEORY §2, Lemmas 2.1-2.2).

    Parameters
    ----------
    scores : torch.Tensor, shape ``(..., n, n)``
        Attention scores ``s[l, j]`` (row ``l`` is index ``l-1``). Entries above the diagonal
        are ignored (they may hold anything); ``-inf`` entries on or below it are masked keys:
        they get weight exactly 0 and never count as mass, i.e. they behave like removed keys.
        float16/bfloat16 are computed in float32 and cast back.
    rho : float in ``[0, 1)``
        Balancing strength; ``kappa = rho/(1-rho)``. ``rho = 0`` short-circuits to the masked
        softmax code path (bit-identical to ``torch.softmax`` on the masked scores).
    method : ``"auto"``, ``"sinkhorn"``, ``"anderson"`` or ``"exact"``
        See the module docstring. ``"auto"`` currently means ``"exact"``.
    tol : float, optional
        Default ``1e-10`` for float64, ``1e-5`` for float32 (float32 stalls near ``5e-7`` in
        the log-potentials). Meaning per method: see :class:`ConvergenceInfo`.
    max_iter : int, optional
        Sweeps (``sinkhorn``: 100000, ``anderson``: 2000) or Newton iterations per row
        (``exact``: 100). Hitting it issues a :class:`ConvergenceWarning` and sets
        ``info.converged = False``.

    Returns
    -------
    CausalOTResult
        ``weights`` (same shape, dtype, device as ``scores``; rows sum to 1, upper triangle
        and masked keys exactly 0), ``info``, ``log_potentials`` (``logV = -kappa log C'``).

    Notes
    -----
    Autograd: when ``scores`` requires grad, the weights carry the implicit gradient of the
    fixed point (independent of the forward method): the adjoint of Lemma 2.2 is solved by
    an Anderson-mixed fixed-point iteration in backward (cost comparable to the forward
    ``anderson`` solve; it warns if its tolerance is not met). No gradient w.r.t. ``rho``.

    Raises
    ------
    ValueError
        Fewer than 2 dims, non-square, ``n = 0``, non-float dtype, NaN or ``+inf`` scores on or
        below the diagonal, a row with every key masked, ``rho`` outside ``[0, 1)`` or not
        finite, unknown ``method``, ``tol <= 0`` or ``max_iter < 1``.

    Examples
    --------
    Rows sum to one and ``rho = 0`` is softmax:

    >>> import torch
    >>> s = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> res = causal_ot_attention(s, 0.5)
    >>> bool(torch.allclose(res.weights.sum(-1), torch.ones(5, dtype=torch.float64)))
    True
    >>> sm = torch.softmax(s.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf")), -1)
    >>> torch.equal(causal_ot_attention(s, 0.0).weights, sm)
    True
    """
    validate_scores(scores)
    rho = validate_rho(rho)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if tol is not None and (not isinstance(tol, (int, float)) or not tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if max_iter is not None and (
        not isinstance(max_iter, int) or isinstance(max_iter, bool) or max_iter < 1
    ):
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")

    out_dtype = scores.dtype
    cdtype = compute_dtype(out_dtype)
    shape = scores.shape
    n = shape[-1]
    s = scores.to(cdtype).reshape(-1, n, n)  # (B, n, n)
    live = live_mask(s.detach())
    tol_v = float(tol) if tol is not None else default_tol(cdtype)

    if rho == 0.0:
        w = causal_softmax(s, live)
        info = ConvergenceInfo("softmax", 0, 0.0, True, tol_v)
        return CausalOTResult(w.reshape(shape).to(out_dtype), info, None)

    chosen = _auto_method(n, rho) if method == "auto" else method
    iters = max_iter if max_iter is not None else _DEFAULT_MAX_ITER[chosen]
    neg_inf = torch.tensor(float("-inf"), dtype=cdtype, device=s.device)
    with torch.no_grad():
        sd = s.detach()
        s_masked = torch.where(live, sd, neg_inf)
        if chosen == "sinkhorn":
            w, log_v, sweeps, res = sinkhorn(s_masked, live, rho, tol_v, iters)
        elif chosen == "anderson":
            w, log_v, sweeps, res = anderson(s_masked, live, rho, tol_v, iters)
        else:
            w, sweeps, res = exact_dense(sd, live, rho, tol_v, iters)
            kappa = rho / (1.0 - rho)
            cp = torch.cumsum(w, dim=-2).clamp_min(torch.finfo(cdtype).tiny)
            log_v = torch.where(live, -kappa * torch.log(cp), torch.zeros((), dtype=cdtype))
    converged = res <= tol_v
    if not converged:
        warnings.warn(
            f"causal_ot_attention(method={chosen!r}, rho={rho}) stopped after {sweeps} "
            f"iterations with residual {res:.3e} > tol={tol_v:g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    info = ConvergenceInfo(chosen, int(sweeps), float(res), bool(converged), tol_v)
    if s.requires_grad and torch.is_grad_enabled():
        adj_iter = max(_DEFAULT_MAX_ITER["anderson"], iters if chosen != "exact" else 0)
        w = attach_implicit_grad(s, w, s_masked, log_v, live, rho, tol_v, adj_iter)
    return CausalOTResult(w.reshape(shape).to(out_dtype), info, log_v.reshape(shape))

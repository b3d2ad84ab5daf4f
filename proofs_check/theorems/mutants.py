"""Deliberately wrong parts for ``System`` substitutions: negative controls and mutation tests.

Each factory returns a part with the signature of the one it replaces (see
``proofs_check.theorems.system``) and a ``__name__`` that says what is wrong with it. None of
them is used by the toolkit itself: they exist so that every check can be shown to catch a
wrong system (docs/theory.md, "How the checks can fail").

Operators (signature of ``causal_ot_attention``):

* ``softmax_operator`` -- ``rho`` ignored (always the causal softmax);
* ``operator_at_scaled_rho(f)`` -- the operator at ``f * rho``;
* ``batch_plan_as_operator`` -- the batch unbalanced plan of §1 (not prefix-consistent);
* ``late_rows_mixed(eps, start)`` -- rows past ``start`` (default: the middle) mixed with
  ``eps`` of uniform attention over their keys;
* ``float32_only(op)`` -- the reference operator in float64, ``op`` in float32;
* ``clamped_scores(c)`` -- scores clipped to ``[-c, c]`` first (breaks row-shift invariance);
* ``temperature(t)`` -- scores multiplied by ``t`` first;
* ``mask_ignored`` -- masked keys (``-inf`` scores) treated as score 0;
* ``only_for_method(m, op)`` -- the reference operator except ``op`` for ``method=m``;
* ``nan_last_row`` -- the last row's weights and the reported residual NaN (an overflow).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import torch

from priors.feasibility import tail_condition
from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn
from proofs_check.operators.causal_ot import (
    CausalOTResult,
    causal_ot_attention,
    stream_causal_ot,
)

__all__ = [
    "MUTANT_OPERATORS",
    "batch_plan_as_operator",
    "batch_plan_at_scaled_rho",
    "bias_off_by_one",
    "bias_sign_flipped",
    "clamped_scores",
    "closed_forms_mismatched",
    "exponent_scaled",
    "exponent_shifted",
    "float32_only",
    "late_rows_mixed",
    "margin_offset",
    "mask_ignored",
    "mirrored_exponent",
    "nan_last_row",
    "noncausal_batch_plan",
    "only_for_method",
    "operator_as_batch_plan",
    "operator_at_scaled_rho",
    "scaled_scores",
    "softmax_operator",
    "stream_at_scaled_rho",
    "temperature",
    "wrong_feasibility",
]


def _named(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__name__ = fn.__qualname__ = name
        return fn

    return decorate


# --------------------------------------------------------------------------- operators


@_named("softmax (rho ignored)")
def softmax_operator(scores: torch.Tensor, rho: float, **_: Any) -> CausalOTResult:
    """The causal softmax whatever ``rho``: the operator with its column term dropped."""
    return causal_ot_attention(scores, 0.0)


def operator_at_scaled_rho(factor: float) -> Callable[..., CausalOTResult]:
    """``causal_ot_attention`` run at ``factor * rho`` (a wrong balancing strength)."""

    @_named(f"operator at {factor:g} rho")
    def op(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
        return causal_ot_attention(scores, factor * rho, **kwargs)

    return op


@_named("batch plan")
def batch_plan_as_operator(scores: torch.Tensor, rho: float, *, method: str = "auto",
                           tol: float | None = None,
                           max_iter: int | None = None) -> CausalOTResult:
    """The batch unbalanced Sinkhorn plan of §1 in the operator's place (``method`` ignored).

    ``info.residual`` is the batch iteration's last increment of ``log v``, so the
    contraction measurement of Lemma 2.2 sees the batch iteration's own rate.
    """
    del method
    if tol is not None:  # the batch solver refuses tolerances below the dtype's resolution
        tol = max(tol, torch.finfo(scores.dtype).eps)
    res = batch_unbalanced_sinkhorn(scores, rho, tol=tol, max_iter=max_iter)
    return CausalOTResult(res.weights, res.info, res.log_potentials)  # one vocabulary


def late_rows_mixed(eps: float = 1e-6, start: int | None = None) -> Callable[..., CausalOTResult]:
    """Rows ``l > start`` (default ``n // 2``) replaced by ``(1 - eps) a + eps uniform``."""

    @_named(f"rows past {'the middle' if start is None else start} mixed with {eps:g} uniform")
    def op(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
        res = causal_ot_attention(scores, rho, **kwargs)
        w = res.weights
        n = w.shape[-1]
        first = n // 2 if start is None else start
        live = torch.ones(n, n, dtype=torch.bool, device=w.device).tril()
        live = live & torch.isfinite(scores) if scores.is_floating_point() else live
        uniform = live.to(w.dtype) / live.sum(-1, keepdim=True).clamp_min(1).to(w.dtype)
        late = (torch.arange(n, device=w.device) >= first).view(-1, 1)
        mixed = torch.where(late, (1 - eps) * w + eps * uniform, w)
        return CausalOTResult(mixed, res.info, res.log_potentials)

    return op


def float32_only(wrong: Callable[..., CausalOTResult]) -> Callable[..., CausalOTResult]:
    """The reference operator on float64 scores, ``wrong`` on float32 (and half) scores."""

    @_named(f"{wrong.__name__}, float32 only")
    def op(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
        if scores.dtype == torch.float64:
            return causal_ot_attention(scores, rho, **kwargs)
        return wrong(scores, rho, **kwargs)

    return op


def clamped_scores(limit: float) -> Callable[..., CausalOTResult]:
    """Scores clipped to ``[-limit, limit]`` before the operator (a "stability" clamp)."""

    @_named(f"scores clamped to +-{limit:g}")
    def op(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
        return causal_ot_attention(scores.clamp(-limit, limit), rho, **kwargs)

    return op


def temperature(factor: float) -> Callable[..., CausalOTResult]:
    """Scores multiplied by ``factor`` before the operator (a wrong temperature)."""

    @_named(f"scores times {factor:g}")
    def op(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
        return causal_ot_attention(scores * factor, rho, **kwargs)

    return op


@_named("mask ignored")
def mask_ignored(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
    """Masked keys (``-inf`` scores on or below the diagonal) treated as score 0."""
    return causal_ot_attention(torch.nan_to_num(scores, neginf=0.0), rho, **kwargs)


def only_for_method(method: str,
                    wrong: Callable[..., CausalOTResult]) -> Callable[..., CausalOTResult]:
    """The reference operator, except ``wrong`` when called with ``method`` (``"auto"``:
    also when no method is given, the path users get by default)."""

    @_named(f"{wrong.__name__}, method={method} only")
    def op(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
        if kwargs.get("method", "auto") == method:
            return wrong(scores, rho, **kwargs)
        return causal_ot_attention(scores, rho, **kwargs)

    return op


@_named("NaN in the last row")
def nan_last_row(scores: torch.Tensor, rho: float, **kwargs: Any) -> CausalOTResult:
    """The reference operator with the last row's weights NaN, as an overflow leaves them.

    ``info.residual`` is NaN too (an overflowing solve has no finite increment). A check fed
    it must report ``holds = False``: a NaN compared with a bound establishes nothing.
    """
    res = causal_ot_attention(scores, rho, **kwargs)
    w = res.weights.clone()
    w[..., -1, :] = float("nan")
    return CausalOTResult(w, replace(res.info, residual=float("nan")), res.log_potentials)


#: The operator mutants of the mutation test (tests/proofs_check/test_mutation.py).
MUTANT_OPERATORS: dict[str, Callable[..., CausalOTResult]] = {
    "softmax (rho ignored)": softmax_operator,
    "operator at 0.85 rho": operator_at_scaled_rho(0.85),
    "batch plan": batch_plan_as_operator,
    "rows past the middle mixed with 1e-6 uniform": late_rows_mixed(1e-6),
    "rows past 384 mixed with 1e-6 uniform": late_rows_mixed(1e-6, start=384),
    "operator at 0.85 rho in float32 only": float32_only(operator_at_scaled_rho(0.85)),
    "scores clamped to +-5": clamped_scores(5.0),
    "scores times 1.01": temperature(1.01),
    "mask ignored": mask_ignored,
    "operator at 0.85 rho, method='anderson' only": only_for_method(
        "anderson", operator_at_scaled_rho(0.85)),
    "rows past the middle mixed with 1e-6 uniform, default method only": only_for_method(
        "auto", late_rows_mixed(1e-6)),
}


# --------------------------------------------------------------------------- other parts


def stream_at_scaled_rho(factor: float) -> Callable[..., Any]:
    """``stream_causal_ot`` at ``factor * rho``."""

    @_named(f"stream at {factor:g} rho")
    def stream(n: int, rho: float, **kwargs: Any) -> Any:
        return stream_causal_ot(n, factor * rho, **kwargs)

    return stream


def batch_plan_at_scaled_rho(factor: float) -> Callable[..., Any]:
    """``batch_unbalanced_sinkhorn`` at ``factor * rho``."""

    @_named(f"batch plan at {factor:g} rho")
    def plan(scores: torch.Tensor, rho: float, **kwargs: Any) -> Any:
        return batch_unbalanced_sinkhorn(scores, factor * rho, **kwargs)

    return plan


@_named("batch plan without the causal mask")
def noncausal_batch_plan(scores: torch.Tensor, rho: float, *, tol: float | None = None,
                         max_iter: int | None = None) -> Any:
    """The unbalanced Sinkhorn plan of §1 on the *full* kernel (the causal mask forgotten).

    Same log-domain iteration as ``batch_unbalanced_sinkhorn`` (rows hard, columns
    KL-relaxed, ``g <- rho (log b - logsumexp_l (S + f))``) with every key visible.
    """
    s = scores.to(torch.float64)
    tol = 1e-10 if tol is None else tol
    max_iter = 200_000 if max_iter is None else max_iter
    g = torch.zeros(s.shape[:-1], dtype=s.dtype)
    for _ in range(max_iter):
        f = -torch.logsumexp(s + g.unsqueeze(-2), dim=-1)
        g_new = -rho * torch.logsumexp(s + f.unsqueeze(-1), dim=-2)
        done = float((g_new - g).abs().max()) <= tol
        g = g_new
        if done:
            break
    f = -torch.logsumexp(s + g.unsqueeze(-2), dim=-1)
    plan = torch.exp(s + f.unsqueeze(-1) + g.unsqueeze(-2)).to(scores.dtype)
    return SimpleNamespace(weights=plan)


@_named("prefix-consistent operator")
def operator_as_batch_plan(scores: torch.Tensor, rho: float, **_: Any) -> Any:
    """The prefix-consistent operator in the batch plan's place (``.weights``)."""
    return SimpleNamespace(weights=causal_ot_attention(scores, rho, method="newton").weights)


def scaled_scores(factor: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """Scores multiplied by ``factor``: beyond the ``B`` a bound is computed with."""

    @_named(f"scores times {factor:g} (beyond B)")
    def transform(s: torch.Tensor) -> torch.Tensor:
        return s * factor

    return transform


def _exponent_field(enc: Any) -> str | None:
    for name in ("alpha", "r1"):
        if hasattr(enc, name) and type(enc).__name__ in ("LogDistance", "KerpleLog"):
            return name
    return None


def exponent_shifted(shift: float) -> Callable[[Any], Any]:
    """Log-distance ``alpha`` / KERPLE-log ``r1`` shifted by ``shift`` (others unchanged)."""

    @_named(f"prior exponent shifted by {shift:g}")
    def transform(enc: Any) -> Any:
        name = _exponent_field(enc)
        if name is None:
            return enc
        return replace(enc, **{name: max(1e-3, getattr(enc, name) + shift)})

    return transform


def exponent_scaled(factor: float) -> Callable[[Any], Any]:
    """Log-distance ``alpha`` / KERPLE-log ``r1`` multiplied by ``factor``."""

    @_named(f"prior exponent times {factor!r}")
    def transform(enc: Any) -> Any:
        name = _exponent_field(enc)
        if name is None:
            return enc
        return replace(enc, **{name: getattr(enc, name) * factor})

    return transform


@_named("prior exponent mirrored about 1")
def mirrored_exponent(enc: Any) -> Any:
    """Log-distance ``alpha = 1 + delta`` replaced by ``1 - delta`` (the wrong side of one)."""
    name = _exponent_field(enc)
    if name is None:
        return enc
    return replace(enc, **{name: 2.0 - getattr(enc, name)})


def closed_forms_mismatched(factor: float) -> Any:
    """``priors.scale_invariant`` with ``cumulative_mass`` taken at ``factor * rho``."""
    import priors.scale_invariant as si

    return SimpleNamespace(
        density=si.density, normaliser=si.normaliser,
        cumulative_mass=functools.wraps(si.cumulative_mass)(
            lambda rho, y, **kw: si.cumulative_mass(factor * float(rho), y, **kw)),
        __name__=f"F at {factor:g} rho")


def wrong_feasibility(slack: float) -> Callable[[Any], bool]:
    """The tail condition with ``n - k + 1 + slack`` in place of ``n - k + 1``."""
    @_named(f"tail condition with slack {slack:g}")
    def condition(b: Any) -> bool:
        return tail_condition(b, slack=slack)

    return condition


def margin_offset(offset: float) -> Callable[..., Any]:
    """``select_margin`` whose ``delta`` is moved by ``offset`` (a selector that is off)."""
    from priors.margin import select_margin

    @_named(f"margin selector off by {offset:g}")
    def select(*args: Any, **kwargs: Any) -> Any:
        sel = select_margin(*args, **kwargs)
        return replace(sel, delta=sel.delta + offset)

    return select


@_named("bias at distance d+1")
def bias_off_by_one(scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``softmax(s + b(d + 1))``: the distance convention off by one."""
    from proofs_check.operators.biases import softmax_with_bias

    # b(l - j + 1) is entry [l + 1, j]; the last row has no row below: [n, j] <- [n, j - 1]
    # (its key 1 keeps b(n - 1), the largest distance the bias matrix holds).
    last = torch.cat([bias[..., -1:, :1], bias[..., -1:, :-1]], dim=-1)
    shifted = torch.cat([bias[..., 1:, :], last], dim=-2)
    return softmax_with_bias(scores, shifted)


@_named("bias with the wrong sign")
def bias_sign_flipped(scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``softmax(s - b)`` on the causal part."""
    from proofs_check.operators.biases import softmax_with_bias

    return softmax_with_bias(scores, torch.where(torch.isfinite(bias), -bias, bias))

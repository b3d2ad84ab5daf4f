"""The system a theorem check measures, and the one way to substitute a wrong part of it.

A check compares what the *system under test* produces (the prefix-consistent operator, the
batch plan, a biased softmax, a prior's closed forms, the margin selector, ...) with a bound
or closed form computed by an independent route. Every check takes one keyword
``system: System | None``; ``None`` (the default) is the project's own code. A ``System``
names the parts to replace -- nothing else about the check changes -- so a negative control
(``CheckSpec.negative = {"system": System(...)}``) or a mutation test feeds the unchanged
check a wrong operator, wrong inputs or a wrong prior and lets it find the error.

Parts (``None`` = the project's own):

``operator``
    ``(scores, rho, *, method=..., tol=..., max_iter=...) -> result`` with ``.weights`` and
    ``.info``: the signature of ``proofs_check.operators.causal_ot_attention``.
``stream``
    ``(n, rho, *, score_fn=None, dtype=..., device=..., ...) -> iterator of (l, row)``:
    ``stream_causal_ot``. When only ``operator`` is substituted, the stream is derived from
    it (the rows of the dense substituted operator), so substituting the operator
    substitutes it everywhere the checks compute it.
``batch_plan``
    ``(scores, rho, *, tol=..., max_iter=...) -> result`` with ``.weights`` (the plan):
    ``batch_unbalanced_sinkhorn`` (docs/theory.md §1).
``biased_softmax``
    ``(scores, bias) -> attention``: ``proofs_check.operators.biases.softmax_with_bias``.
``closed_forms``
    a namespace with ``density``, ``cumulative_mass``, ``normaliser``: ``priors.scale_invariant``.
``feasibility``
    ``(b) -> bool``, the condition of Proposition 1: ``priors.feasibility.tail_condition``.
``select_margin``
    ``priors.margin.select_margin``.
``scores``
    ``(tensor) -> tensor``, applied to every score tensor a check generates before it reaches
    the system (e.g. scores pushed beyond the ``B`` the bound is computed with).
``prior``
    ``(encoding) -> encoding``, applied to every prior a check measures (e.g. a wrong
    exponent); the check keeps computing its reference from the prior it names.

A check declares the parts it uses with ``@uses(...)``; substituting any other part raises
``ValueError`` (a control that substitutes nothing the check looks at would prove nothing).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["PARTS", "System", "rows_of", "uses"]

PARTS = ("operator", "stream", "batch_plan", "biased_softmax", "closed_forms", "feasibility",
         "select_margin", "scores", "prior")


@dataclass(frozen=True)
class System:
    """Parts of the system under test to substitute (``None``: the project's own code).

    ``label`` names the substitution in reports (``params["system"]``).
    """

    operator: Callable[..., Any] | None = None
    stream: Callable[..., Iterator[tuple[int, Any]]] | None = None
    batch_plan: Callable[..., Any] | None = None
    biased_softmax: Callable[..., Any] | None = None
    closed_forms: Any = None
    feasibility: Callable[..., bool] | None = None
    select_margin: Callable[..., Any] | None = None
    scores: Callable[[Any], Any] | None = None
    prior: Callable[[Any], Any] | None = None
    label: str = ""

    def substituted(self) -> tuple[str, ...]:
        """Names of the parts this ``System`` replaces."""
        return tuple(f.name for f in fields(self) if f.name in PARTS
                     and getattr(self, f.name) is not None)

    def __str__(self) -> str:
        parts = self.substituted()
        if not parts:
            return "reference"
        if self.label:
            return self.label
        names = []
        for p in parts:
            part = getattr(self, p)
            names.append(f"{p}: {getattr(part, '__name__', type(part).__name__)}")
        return ", ".join(names)


def rows_of(operator: Callable[..., Any]) -> Callable[..., Iterator[tuple[int, Any]]]:
    """A ``stream_causal_ot``-compatible stream built from a dense operator.

    ``stream(n, rho, score_fn=None, dtype=..., device=...)`` runs ``operator`` once on the
    ``(n, n)`` score matrix (constant scores when ``score_fn`` is ``None``) and yields
    ``(l, row l)`` for ``l = 1..n``.
    """

    def stream(n: int, rho: float, *, score_fn: Callable[..., Any] | None = None,
               dtype: Any = None, device: Any = "cpu", **_: Any) -> Iterator[tuple[int, Any]]:
        import torch

        dtype = torch.float64 if dtype is None else dtype
        s = torch.zeros(n, n, dtype=dtype, device=device)
        if score_fn is not None:
            for ell in range(1, n + 1):
                keys = torch.arange(1, ell + 1, device=device)
                s[ell - 1, :ell] = score_fn(ell, keys).to(dtype)
        w = operator(s, rho, method="newton").weights
        for ell in range(1, n + 1):
            yield ell, w[ell - 1, :ell]

    return stream


def _defaults() -> dict[str, Any]:
    import priors.scale_invariant as closed_forms
    from priors.feasibility import tail_condition
    from priors.margin import select_margin
    from proofs_check.operators.batch_uot import batch_unbalanced_sinkhorn
    from proofs_check.operators.biases import softmax_with_bias
    from proofs_check.operators.causal_ot import causal_ot_attention, stream_causal_ot

    return {"operator": causal_ot_attention, "stream": stream_causal_ot,
            "batch_plan": batch_unbalanced_sinkhorn, "biased_softmax": softmax_with_bias,
            "closed_forms": closed_forms, "feasibility": tail_condition,
            "select_margin": select_margin, "scores": lambda s: s, "prior": lambda e: e}


def resolve(system: System | None, parts: tuple[str, ...]) -> System:
    """Fill every part of ``system`` the check uses; ``ValueError`` for an unused substitution."""
    if system is None:
        system = System()
    if not isinstance(system, System):
        raise ValueError(f"system must be a System or None, got {type(system).__name__}")
    allowed = set(parts) | ({"operator"} if "stream" in parts else set())
    unused = [p for p in system.substituted() if p not in allowed]
    if unused:
        raise ValueError(f"system substitutes {unused}, which this check does not use "
                         f"(it uses {list(parts)})")
    defaults = _defaults()
    filled = {p: getattr(system, p) for p in PARTS}
    if "stream" in parts and filled["stream"] is None and filled["operator"] is not None:
        filled["stream"] = rows_of(filled["operator"])
    filled = {p: defaults[p] if v is None else v for p, v in filled.items()}
    return replace(system, **filled)


def uses(*parts: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the parts a check uses; its ``system`` argument arrives fully resolved.

    The decorated function keeps a ``uses`` attribute (read by the mutation tests to know
    which checks a substituted operator reaches).
    """
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"unknown system parts {bad}; known: {PARTS}")

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(body)
        if "system" not in signature.parameters:
            raise TypeError(f"{body.__name__} must take a 'system' keyword")

        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            bound.arguments["system"] = resolve(bound.arguments["system"], parts)
            return body(*bound.args, **bound.kwargs)

        run.uses = tuple(parts)  # type: ignore[attr-defined]
        return run

    return decorate

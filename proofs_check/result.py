"""The one result type every theorem check returns, and the spec that registers a check.

A check measures a quantity, computes the bound or closed form docs/theory.md states for it
by an independent route, and compares the two. ``CheckResult`` records both, the slack,
whether the statement held, and where (dtype, device, TF32) and how long it ran. A check body
returns a ``Measurement``; ``theorem_check`` (one decorator for every check, and the only code
that does this) forces TF32 off, times it and fills in the rest. ``CheckSpec`` tells the
report command and the tests how to run a check at CI, default and full sizes, and how to
run its negative control: the same, unchanged check fed a wrong system
(``proofs_check.theorems.system``), which must report ``holds = False`` (proof that the
check can fail).

>>> r = make_result(check="demo", theorem="Theorem 1 (§3)", quantity="max a[l,j]",
...                 measured=0.5, reference=1.0, relation="<=")
>>> r.holds, r.slack
(True, 0.5)
>>> make_result(check="demo", theorem="§2", quantity="q", measured=1.0, reference=1.0 + 1e-9,
...             relation="==", allowance=1e-6).holds
True
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RELATIONS", "CheckResult", "CheckSpec", "Measurement", "dtype_name", "make_result",
           "stopwatch", "theorem_check", "worst_of"]

#: ``<=``: measured <= reference (an upper bound); ``>=``: a lower bound;
#: ``==``: |measured - reference| <= allowance (a closed form or an independent solver).
RELATIONS = ("<=", ">=", "==")


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one executable theorem check.

    Attributes
    ----------
    check : short identifier, e.g. ``"thm1_weight_bound"``.
    theorem : the statement and its docs/theory.md section, e.g. ``"Theorem 1 (§3)"``.
    quantity : what was measured, in words a reader of the report understands.
    measured : the measured value (the worst case over everything the check ran).
    reference : the bound or closed form it is compared with.
    relation : one of ``RELATIONS``.
    allowance : how far the measurement may miss the reference and the statement still
        count as holding: the tolerance of an ``==`` comparison, or room on ``<=``/``>=``
        for round-off; stated and justified by the check (0 by default). JSON key
        ``"allowance"``.
    slack : how far inside the statement the measurement lies (positive: holds).
        ``<=``: ``reference + allowance - measured``; ``>=``: ``measured + allowance -
        reference``; ``==``: ``allowance - |measured - reference|``.
    holds : ``slack >= 0`` (and everything finite).
    params : the parameters the check ran with.
    dtype, device, tf32 : where it ran; ``tf32`` is the TF32 state read from torch while the
        check ran (``theorem_check`` forces it off, so ``True`` would mean that failed).
    seconds : wall time of the check's body (``theorem_check``); NaN when it was not timed
        (a check that raised, reported by ``proofs_check.report``).
    details : anything else worth reporting (per-case values, fitted slopes, ...).
    """

    check: str
    theorem: str
    quantity: str
    measured: float
    reference: float
    relation: str
    allowance: float
    slack: float
    holds: bool
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: str = "float64"
    device: str = "cpu"
    tf32: bool = False
    seconds: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (floats as floats; non-finite values as strings)."""

        def clean(value: Any) -> Any:
            if isinstance(value, float) and not math.isfinite(value):
                return repr(value)
            if isinstance(value, Mapping):
                return {str(k): clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            if isinstance(value, (bool, int, str)) or value is None:
                return value
            try:
                return float(value)
            except (TypeError, ValueError):
                return str(value)

        return {
            "check": self.check,
            "theorem": self.theorem,
            "quantity": self.quantity,
            "measured": clean(float(self.measured)),
            "reference": clean(float(self.reference)),
            "relation": self.relation,
            "allowance": clean(float(self.allowance)),
            "slack": clean(float(self.slack)),
            "holds": bool(self.holds),
            "params": clean(dict(self.params)),
            "dtype": self.dtype,
            "device": self.device,
            "tf32": self.tf32,
            "seconds": clean(float(self.seconds)),
            "details": clean(dict(self.details)),
        }

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``."""
        return json.dumps(self.to_dict(), **json_kwargs)


def make_result(
    *,
    check: str,
    theorem: str,
    quantity: str,
    measured: float,
    reference: float,
    relation: str,
    allowance: float = 0.0,
    params: Mapping[str, Any] | None = None,
    dtype: str = "float64",
    device: str = "cpu",
    seconds: float = 0.0,
    details: Mapping[str, Any] | None = None,
    tf32: bool | None = None,
) -> CheckResult:
    """Build a ``CheckResult``, computing ``slack`` and ``holds`` from ``relation``.

    ``tf32`` defaults to the TF32 state torch reports now (``proofs_check.tf32``).
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    measured = float(measured)
    reference = float(reference)
    allowance = float(allowance)
    if not allowance >= 0:
        raise ValueError(f"allowance must be >= 0, got {allowance!r}")
    if relation == "<=":
        slack = reference + allowance - measured
    elif relation == ">=":
        slack = measured + allowance - reference
    else:
        slack = allowance - abs(measured - reference)
    holds = math.isfinite(slack) and slack >= 0
    return CheckResult(
        check=check,
        theorem=theorem,
        quantity=quantity,
        measured=measured,
        reference=reference,
        relation=relation,
        allowance=allowance,
        slack=slack,
        holds=bool(holds),
        params=dict(params or {}),
        dtype=dtype,
        device=str(device),
        tf32=bool(_tf32_now() if tf32 is None else tf32),
        seconds=float(seconds),
        details=dict(details or {}),
    )


def worst_of(*values: Any) -> float:
    """The largest of ``values`` as a float; NaN if any of them is NaN.

    A check's running ``worst = max(worst, x)`` keeps ``worst`` when ``x`` is NaN
    (``max(0.0, nan)`` is ``0.0``: a NaN compares false), so weights or distances that are
    NaN would leave the check holding on nothing. This keeps the NaN, and ``make_result``
    then reports ``holds = False`` (a NaN measurement is not a measurement).

    >>> worst_of(0.0, 1.5, 1.0), worst_of(0.0, float("nan"), 1.0)
    (1.5, nan)
    """
    floats = [float(v) for v in values]
    if any(math.isnan(v) for v in floats):
        return math.nan
    return max(floats)


def dtype_name(dtype: object) -> str:
    """``torch.float64`` -> ``"float64"`` (what results record; no torch import needed)."""
    return str(dtype).removeprefix("torch.")


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """``with stopwatch() as elapsed: ...; elapsed()`` gives seconds since entry."""
    start = time.perf_counter()
    yield lambda: time.perf_counter() - start


def _tf32_now() -> bool:
    from proofs_check.tf32 import tf32_enabled

    return tf32_enabled()


@dataclass(frozen=True)
class Measurement:
    """What a check's body returns; ``theorem_check`` turns it into a ``CheckResult``.

    ``quantity``, ``measured``, ``reference``, ``relation``, ``allowance``, ``details`` as in
    ``CheckResult``; ``params`` adds to the recorded call arguments (values the check
    derived, such as the prefixes it used); ``dtype`` overrides the recorded dtype for
    checks that do not run in a torch dtype (``"mpmath dps 30"``).
    """

    quantity: str
    measured: float
    reference: float
    relation: str
    allowance: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: str | None = None


#: Arguments that say how a check runs or reports, not what it measures: recorded in their own
#: fields (``dtype``, ``device``) or not at all (``progress``).
_NOT_PARAMS = ("dtype", "device", "progress")


def _param(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_param(v) for v in value]
    return str(value)


def theorem_check(check: str, theorem: str) -> Callable[[Callable[..., Measurement]],
                                                       Callable[..., CheckResult]]:
    """Decorate a check body ``f(**params) -> Measurement`` into ``run(**params) -> CheckResult``.

    The wrapper (the same for every check, so no check repeats it):

    * forces TF32 off while the body runs, also when the check is called directly rather
      than through the report, and restores the caller's setting afterwards;
    * records the TF32 state torch reports inside that block, the wall time, ``dtype`` and
      ``device`` (from the arguments of those names; ``Measurement.dtype`` overrides), and
      every call argument as ``params`` (defaults included; ``system`` by its ``str``;
      ``progress``, which only switches on progress lines, left out).

    A body that raises propagates its exception (after TF32 is restored): a direct caller
    sees it, and the report turns it into a failed row.

    >>> @theorem_check("demo", "§0")
    ... def demo(x: float = 0.5, *, dtype: str = "float64", device: str = "cpu"):
    ...     return Measurement("x", x, 1.0, "<=")
    >>> r = demo()
    >>> r.holds, r.params, r.tf32, r.dtype
    (True, {'x': 0.5}, False, 'float64')
    """

    def decorate(body: Callable[..., Measurement]) -> Callable[..., CheckResult]:
        signature = inspect.signature(body)

        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> CheckResult:
            from proofs_check.tf32 import tf32_disabled, tf32_enabled

            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            with tf32_disabled(), stopwatch() as elapsed:
                tf32 = tf32_enabled()
                m = body(*bound.args, **bound.kwargs)
                seconds = elapsed()
            if not isinstance(m, Measurement):
                raise TypeError(f"check {check} returned {type(m).__name__}, not Measurement")
            arguments = bound.arguments
            params = {k: _param(v) for k, v in arguments.items() if k not in _NOT_PARAMS}
            if "system" in arguments:
                params["system"] = str(arguments["system"] or "reference")
            params.update(m.params)
            dtype = m.dtype or dtype_name(arguments.get("dtype", "float64"))
            return make_result(
                check=check, theorem=theorem, quantity=m.quantity, measured=m.measured,
                reference=m.reference, relation=m.relation, allowance=m.allowance, params=params,
                dtype=dtype, device=str(arguments.get("device", "cpu")), seconds=seconds,
                details=m.details, tf32=tf32,
            )

        run.check_name = check  # type: ignore[attr-defined]  (CheckSpec requires it)
        return run

    return decorate


@dataclass(frozen=True)
class CheckSpec:
    """How to run one check.

    ``run(**kwargs)`` returns a ``CheckResult``; it must be a ``theorem_check`` named ``name``
    (``ValueError`` otherwise), so that whoever runs a spec gets TF32 off, the timing and the
    record from that one place. ``ci``, ``default`` and ``full`` are the keyword arguments
    for the test suite, ``python -m proofs_check`` and ``--full``.
    ``negative`` are keyword arguments added to ``ci`` that feed the unchanged check a wrong
    system, always as ``{"system": System(...)}`` (``proofs_check.theorems.system``): an
    operator at a wrong ``rho``, the batch plan in place of the prefix-consistent one, scores
    beyond the bound's ``B``, a prior with a wrong exponent. With it the check must report
    ``holds = False``; nothing in the comparison itself is changed. ``torch_args``: whether
    ``run`` accepts ``dtype`` and ``device`` (pure-``priors`` checks do not depend on them).
    ``progress_arg``: whether ``run`` accepts ``progress`` (``True``: a check that streams the
    operator's rows prints ``row l/n`` lines on stderr, as ``stream_causal_ot`` does).
    """

    name: str
    theorem: str
    section: str
    run: Callable[..., CheckResult]
    ci: Mapping[str, Any] = field(default_factory=dict)
    default: Mapping[str, Any] = field(default_factory=dict)
    full: Mapping[str, Any] = field(default_factory=dict)
    negative: Mapping[str, Any] = field(default_factory=dict)
    torch_args: bool = True
    progress_arg: bool = False

    def __post_init__(self) -> None:
        made_as = getattr(self.run, "check_name", None)
        if made_as != self.name:
            raise ValueError(f"CheckSpec {self.name!r}: run must be a theorem_check named "
                             f"{self.name!r}, got {made_as or self.run!r}")

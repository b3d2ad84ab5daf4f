"""Every registered theorem check holds at CI size, and its negative control fails.

The negative control is what makes a check meaningful: the same, unchanged check fed a wrong
system (``CheckSpec.negative = {"system": System(...)}``: a wrong operator, wrong inputs, a
perturbed prior) must report ``holds = False``. Nothing in the comparison may be changed.
"""

import inspect
import math

import pytest
import torch

from proofs_check.operators.causal_ot import stream_causal_ot
from proofs_check.result import CheckResult
from proofs_check.theorems import all_checks
from proofs_check.theorems.system import System

SPECS = all_checks()
IDS = [s.name for s in SPECS]


def _run(spec, extra=None):
    kwargs = dict(spec.ci)
    kwargs.update(extra or {})
    result = spec.run(**kwargs)
    assert isinstance(result, CheckResult)
    return result


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_check_holds_at_ci_size(spec):
    result = _run(spec)
    assert math.isfinite(result.measured) and math.isfinite(result.reference), result
    assert result.holds, (
        f"{spec.name}: measured {result.measured!r} {result.relation} reference "
        f"{result.reference!r} (allowance {result.allowance!r}) failed; "
        f"details {dict(result.details)}"
    )
    assert result.slack >= 0


NEGATIVE = [s for s in SPECS if s.negative]


@pytest.mark.parametrize("spec", NEGATIVE, ids=[s.name for s in NEGATIVE])
def test_negative_control_fails(spec):
    result = _run(spec, spec.negative)
    assert not result.holds, f"{spec.name}: negative control {dict(spec.negative)} still holds"


def test_registry_is_populated():
    # docs/theory.md has statements in §1-§8; an empty registry would make the tests above vacuous.
    sections = {s.section.split(".")[0] for s in SPECS}
    assert {"§1", "§2", "§3", "§4", "§5", "§6", "§7", "§8"} <= sections, sorted(sections)


def test_every_check_has_a_negative_control():
    missing = [s.name for s in SPECS if not s.negative]
    assert not missing, f"checks without a negative control: {missing}"


def test_every_negative_control_substitutes_the_system_only():
    # No knob per control: a control may only substitute parts of the system under test,
    # and only parts the check declares it uses (``resolve`` enforces the latter too).
    for spec in SPECS:
        assert set(spec.negative) == {"system"}, (spec.name, dict(spec.negative))
        system = spec.negative["system"]
        assert isinstance(system, System) and system.substituted(), spec.name
        parts = set(spec.run.uses) | ({"operator"} if "stream" in spec.run.uses else set())
        assert set(system.substituted()) <= parts, (spec.name, system.substituted())


@pytest.mark.parametrize("spec", [next(s for s in SPECS if s.torch_args),
                                  next(s for s in SPECS if not s.torch_args)],
                         ids=lambda s: s.name)
def test_results_record_the_real_tf32_state_on_direct_calls(spec):
    # Called directly (not through the report) with TF32 switched on, a check still runs
    # with TF32 off, records the state it ran under (False) and restores the caller's.
    b = torch.backends
    before = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    try:
        b.cuda.matmul.allow_tf32 = True
        b.cudnn.allow_tf32 = True
        result = spec.run(**spec.ci)
        assert result.tf32 is False
        assert b.cuda.matmul.allow_tf32 is True and b.cudnn.allow_tf32 is True
    finally:
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = before[:2]
        torch.set_float32_matmul_precision(before[2])
    assert (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32,
            torch.get_float32_matmul_precision()) == before


def test_progress_arg_says_which_checks_take_progress():
    for spec in SPECS:
        takes = "progress" in inspect.signature(spec.run).parameters
        assert takes == spec.progress_arg, spec.name


STREAMING = [s for s in SPECS if s.progress_arg]


@pytest.mark.parametrize("spec", STREAMING, ids=[s.name for s in STREAMING])
@pytest.mark.parametrize("progress", [False, True])
def test_streaming_checks_hand_progress_to_the_stream(spec, progress, capsys):
    # progress is an argument all the way down: the check passes its own to every stream it
    # runs, and leaves it out of the parameters it records (it changes no number).
    handed = []

    def stream(n, rho, **kwargs):
        handed.append(kwargs["progress"])
        return stream_causal_ot(n, rho, **kwargs)

    result = spec.run(**spec.ci, system=System(stream=stream), progress=progress)
    assert handed and set(handed) == {progress}
    assert "progress" not in result.params
    assert ("row " in capsys.readouterr().err) == progress  # the stream's own lines

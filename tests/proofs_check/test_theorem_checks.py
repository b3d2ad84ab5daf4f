"""Every registered theorem check holds at CI size, and its negative control fails.

The negative control is what makes a check meaningful: the same check, fed something
deliberately wrong (see ``CheckSpec.negative``), must report ``holds = False``.
"""

import math

import pytest

from proofs_check.result import CheckResult
from proofs_check.theorems import all_checks

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
        f"{result.reference!r} (tol {result.tol!r}) failed; details {dict(result.details)}"
    )
    assert result.slack >= 0


NEGATIVE = [s for s in SPECS if s.negative]


@pytest.mark.parametrize("spec", NEGATIVE, ids=[s.name for s in NEGATIVE])
def test_negative_control_fails(spec):
    result = _run(spec, spec.negative)
    assert not result.holds, f"{spec.name}: negative control {dict(spec.negative)} still holds"


def test_registry_is_populated():
    # THEORY.md has statements in §1-§8; an empty registry would make the tests above vacuous.
    sections = {s.section.split(".")[0] for s in SPECS}
    assert {"§1", "§2", "§3", "§4", "§5", "§6", "§7", "§8"} <= sections, sorted(sections)


def test_every_check_has_a_negative_control():
    missing = [s.name for s in SPECS if not s.negative]
    assert not missing, f"checks without a negative control: {missing}"

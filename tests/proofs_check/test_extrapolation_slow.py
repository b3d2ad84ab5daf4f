"""The quick preset reproduces the theory's mass predictions (slow: tens of minutes).

Registers the quick preset's predictions from the priors, runs
``python -m proofs_check.extrapolation run --preset quick`` in-process with a fresh cache
(nothing reused from earlier runs) against that registration, and asserts that

* every registered mass claim holds: diluting priors (NoPE, log-distance 0.8 and 1.0)
  lose at least half the window mass their exact prior loses from 64 to 2048 bytes, and
  more than 3 standard errors; summable priors grow their distant mass by at most the
  prior's growth + 0.05 + 3 se, the margin exponent by at most its tolerance + 3 se
  (se: the two-way bootstrap over seeds and held-out files);
* Theorem 3's bracket with the full per-row spread (a theorem) holds in every row.

The loss claims are measured, not asserted: whether they hold is what the experiment
reports (docs/extrapolation.md).
"""

from __future__ import annotations

import json

import pytest

from proofs_check.extrapolation.cli import main


@pytest.mark.slow
def test_quick_run_reproduces_the_mass_predictions(tmp_path):
    reg, out = tmp_path / "reg.json", tmp_path / "quick.json"
    assert main(["register", "--preset", "quick", "--out", str(reg)]) == 0
    assert main(["run", "--preset", "quick", "--jobs", "2", "--cache-dir",
                 str(tmp_path / "cache"), "--registered", str(reg), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    mass = [v for v in res["registered"]["verdicts"] if v["kind"].startswith("mass")]
    assert len(mass) == len(res["variants"])
    failed = [v["id"] for v in mass if not v["holds"]]
    assert not failed, failed
    for name, v in res["variants"].items():
        for entry in v["per_length"]:
            assert entry["bracket_full"]["holds_fraction"] == 1.0, (name, entry["length"])

"""The ``--quick`` experiment reproduces the qualitative predictions (slow: ~10 min idle).

Runs ``python -m proofs_check.extrapolation --quick`` in-process with a fresh cache (so
nothing is reused from earlier runs) and asserts, through ``check_predictions``, that

* diluting priors (NoPE, RoPE, log-distance 0.8) lose at least half the window mass
  their exact prior loses from 64 to 2048 bytes, by more than 3 standard errors, and
  degrade by more than 0.05 bits/byte + 3 se;
* summable priors (ALiBi, log-distance 2) and ``1 + delta*`` (tol 0.1) grow their
  distant mass by at most the tolerance 0.1 + 3 se and change by at most 0.02 + 3 se.

The margin of 3 se uses the larger of the paired-over-windows and over-seeds standard
errors (``proofs_check.extrapolation.results``). Theorem 3's bracket with the full
per-row spread is a theorem: it must hold in every measured row.
"""

from __future__ import annotations

import json

import pytest

from proofs_check.extrapolation.cli import main
from proofs_check.extrapolation.predictions import check_predictions


@pytest.mark.slow
def test_quick_run_reproduces_the_qualitative_predictions(tmp_path):
    out = tmp_path / "quick.json"
    assert main(["--quick", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    preds = check_predictions(res)
    assert len(preds) == 2 * len(res["variants"])  # every quick variant is checked
    failed = [p.line() for p in preds if not p.holds]
    assert not failed, "\n".join(failed)
    for name, v in res["variants"].items():
        for entry in v["per_length"]:
            assert entry["bracket_full"]["holds_fraction"] == 1.0, (name, entry["length"])

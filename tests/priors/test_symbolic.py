"""sympy verification of the scale-invariant prior (docs/theory.md §4): residuals simplify to 0.

Each residual is an identity the continuum fixed point needs (see ``priors.symbolic``);
the mutation tests show the same machinery returns a NONZERO residual for a wrong closed
form, so the checks can fail.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import sympy as sp

from priors.symbolic import prior_expressions, residuals, verify_scale_invariant_prior

EXPECTED = {
    "normalisation",
    "F_integral",
    "F_derivative",
    "F_at_one",
    "fixed_point_constant",
    "fixed_point_value",
    "window_mass_derivative",
    "window_mass_at_zero",
    "asymptotic_at_zero",
    "window_asymptotic",
    "window_asymptotic_rho_half",
}


@pytest.fixture(scope="module")
def verified() -> dict:
    return verify_scale_invariant_prior()


def test_every_identity_is_checked(verified: dict) -> None:
    assert set(verified) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_residual_simplifies_to_zero(verified: dict, name: str) -> None:
    # exact symbolic zero, no tolerance
    assert sp.simplify(verified[name]) == 0, f"{name}: {verified[name]}"


def _mutated(**changes) -> dict:
    expr = prior_expressions()
    for key, build in changes.items():
        expr[key] = build(expr)
    return residuals(expr)


def test_wrong_F_normalisation_is_detected() -> None:
    # Gamma(1 - rho) instead of Gamma(2 - rho) in F: F is no longer int f(x)/x dx.
    res = _mutated(F=lambda e: sp.log(1 / e["y"]) ** (1 - e["rho"]) / sp.gamma(1 - e["rho"]))
    assert res["F_integral"] != 0
    assert res["F_derivative"] != 0
    assert res["fixed_point_value"] != 0


def test_wrong_density_exponent_is_detected() -> None:
    # (ln 1/y)^(-rho/2): not normalised, f F^kappa no longer constant.
    res = _mutated(f=lambda e: sp.log(1 / e["y"]) ** (-e["rho"] / 2) / sp.gamma(1 - e["rho"]))
    assert res["normalisation"] != 0
    assert res["fixed_point_constant"] != 0


def test_wrong_asymptotic_is_detected() -> None:
    # q^(1-rho)/Gamma(1-rho): off by the factor 1/(1-rho).
    res = _mutated(A=lambda e: e["q"] ** (1 - e["rho"]) / sp.gamma(1 - e["rho"]))
    assert res["window_asymptotic"] != 0
    assert res["window_asymptotic_rho_half"] != 0


def test_wrong_kappa_is_detected() -> None:
    # kappa = rho instead of rho/(1-rho): the fixed-point product is not constant.
    res = _mutated(kappa=lambda e: e["rho"])
    assert res["fixed_point_constant"] != 0


def test_import_is_lazy() -> None:
    # importing priors.symbolic must not import sympy (docs/theory.md: sympy only lazily)
    code = "import sys, priors.symbolic; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

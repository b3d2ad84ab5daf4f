"""Shared test fixtures."""

import mpmath
import pytest


@pytest.fixture(autouse=True)
def _no_leaked_mpmath_precision():
    """Precision is an argument, never a global: fail any test that leaves mpmath changed."""
    before = mpmath.mp.prec
    yield
    assert before == mpmath.mp.prec, "the code under test leaked an mpmath precision change"

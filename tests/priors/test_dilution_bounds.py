"""``priors.dilution_bounds``: the closed forms of Theorem 1 (docs/theory.md §3).

References: the same formulas evaluated by mpmath at 40 digits, and the special cases
docs/theory.md states (the softmax bound ``e^{2B}/l`` at ``rho = 0``; ``l^-(1-rho)`` at ``B = 0``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from priors.dilution_bounds import column_bound, weight_bound, window_bound

CASES = [(1, 0.0, 0.0), (7, 0.3, 1.0), (1000, 0.9, 0.5), (10**9, 0.99, 2.0), (3, 0.5, 0.2)]


@pytest.mark.parametrize(("length", "rho", "b"), CASES)
def test_weight_bound_against_mpmath(length, rho, b):
    with mpmath.workdps(40):
        r, bb = mpmath.mpf(rho), mpmath.mpf(b)
        ref = mpmath.exp(2 * bb * (1 - r)) * mpmath.mpf(length) ** -(1 - r)
    # float64: one exp, one pow and one product, each within an ulp or so; the argument
    # 2B(1-rho) and the exponent -(1-rho) are rounded once each (relative error of the
    # result <= ~|2B(1-rho)| eps + |(1-rho) ln l| eps, below 1e-14 here)
    assert weight_bound(length, rho, b) == pytest.approx(float(ref), rel=1e-14)


def test_special_cases():
    # rho = 0: the softmax bound e^{2B}/l; B = 0: l^-(1-rho)
    assert weight_bound(8, 0.0, 1.0) == pytest.approx(math.exp(2.0) / 8, rel=1e-15)
    assert weight_bound(16, 0.5, 0.0) == 0.25
    assert window_bound(4, 16, 0.5, 0.0) == 1.0
    # rho = 0, B = 0: C'[l,l] = 1/l = H_l - H_{l-1}, so the column bound is the tail itself
    assert column_bound(0.125, 0.0, 0.0) == 0.125
    # (1 + kappa) = 1/(1 - rho): 2 at rho = 1/2
    assert column_bound(1.0, 0.5, 0.0) == 2.0


def test_arrays_give_the_scalar_values():
    ls = np.arange(1, 50, dtype=float)
    got = weight_bound(ls, 0.3, 1.0)
    assert got.shape == ls.shape
    # numpy's elementwise pow and Python's float pow may differ by an ulp
    np.testing.assert_allclose(got, [weight_bound(float(v), 0.3, 1.0) for v in ls],
                               rtol=4e-16, atol=0)
    np.testing.assert_array_equal(window_bound(8, ls, 0.3, 1.0), 8 * got)


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    ls = torch.arange(1, 9, dtype=torch.float64)
    got = weight_bound(ls, 0.6, 1.0)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert float(got[0]) == pytest.approx(math.exp(0.8), rel=1e-15)  # l = 1: e^{2B(1-rho)}


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"rho": 1.0}, "rho"), ({"rho": -0.1}, "rho"), ({"rho": math.nan}, "rho"),
    ({"rho": "0.5"}, "rho"), ({"rho": True}, "rho"),
    ({"score_bound": -1.0}, "score_bound"), ({"score_bound": math.inf}, "score_bound"),
    ({"score_bound": None}, "score_bound"),
])
def test_bad_arguments_name_the_argument(kwargs, name):
    args = {"rho": 0.5, "score_bound": 1.0, **kwargs}
    with pytest.raises(ValueError, match=name):
        weight_bound(4, args["rho"], args["score_bound"])
    with pytest.raises(ValueError, match=name):
        column_bound(1.0, args["rho"], args["score_bound"])


@pytest.mark.parametrize("window", [0, 2.5, True])
def test_bad_window(window):
    with pytest.raises(ValueError, match="window"):
        window_bound(window, 4, 0.5, 1.0)


def test_harmonic_tails_have_no_cancellation():
    """``H_l - H_{j-1}`` to a few ulps against 50-digit sums, where the difference of two
    rounded harmonic numbers loses ~log10(row H_l) digits (the reason the function exists)."""
    import mpmath
    import numpy as np

    from priors.dilution_bounds import harmonic_tails

    n = 2048
    tails = harmonic_tails(n)
    with mpmath.workdps(50):
        h = [mpmath.mpf(0)]
        for k in range(1, n + 1):
            h.append(h[-1] + mpmath.mpf(1) / k)
        rows = (1, 2, 3, 100, 1000, 2047, 2048)
        pairs = [(row, j) for row in rows for j in (1, 2, row // 2 + 1, row)]
        exact = {(row, j): h[row] - h[j - 1] for row, j in pairs}
        naive_rel = max(abs(float(h[row]) - float(h[row - 1]) - exact[(row, row)])
                        / exact[(row, row)] for row in (2047, 2048))
    eps = np.finfo(np.float64).eps
    for (row, j), ref in exact.items():
        # hi/lo split: Sterbenz-exact subtraction plus the lo correction, a few ulps
        assert abs(tails[row - 1, j - 1] - ref) <= 4 * eps * ref, (row, j)
    assert float(naive_rel) > 100 * eps  # the naive difference is visibly worse here
    assert np.all(np.triu(tails, 1) == 0)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        harmonic_tails(0)


@pytest.mark.parametrize(("call", "b"), [
    (lambda b: weight_bound(4, 0.5, b), 710.0),  # e^{2B(1-rho)} = e^710
    (lambda b: window_bound(8, 4, 0.0, b), 355.0),  # e^{2B} = e^710
    (lambda b: column_bound(1.0, 0.5, b), 355.0),
    (lambda b: weight_bound(4, 0.0, b), 1e300),
])
def test_score_factor_overflow_names_score_bound(call, b):
    """A finite ``B`` whose factor ``e^{2B(1-rho)}`` or ``e^{2B}`` exceeds the float64 range
    (``e^709.78``) is refused with a ``ValueError`` naming ``score_bound``."""
    with pytest.raises(ValueError, match="score_bound"):
        call(b)


def test_score_factor_just_inside_float64_against_mpmath():
    """``B = 354.5`` (``e^{2B} = e^709``, inside the range) against mpmath at 30 digits;
    tolerance 1e-13 relative: ``math.exp`` at an argument of 709 is within a few ulps, the
    product two more roundings."""
    b = 354.5
    with mpmath.workdps(30):
        ref_weight = mpmath.exp(2 * mpmath.mpf(b)) / 7
        ref_column = 2 * mpmath.exp(2 * mpmath.mpf(b)) * mpmath.mpf(0.25)
    assert weight_bound(7, 0.0, b) == pytest.approx(float(ref_weight), rel=1e-13)
    assert column_bound(0.25, 0.5, b) == pytest.approx(float(ref_column), rel=1e-13)

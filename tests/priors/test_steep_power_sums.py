"""Power sums with a steep exponent and a far start (docs/theory.md §5–§6).

``sum_{d=lo}^{hi-1} (d + q)^-alpha`` with ``alpha`` from 5 to a few hundred and
``lo + q`` from 10 up is far below 1 (about ``(lo + q)^(1-alpha)``). mpmath's Hurwitz
zeta meets an absolute tolerance there, not a relative one, so a zeta difference
evaluated at ``dps`` digits carries only ``dps - alpha log10(lo + q)`` correct ones.

References, independent of the closed forms under test:

* direct summation of every term in mpmath at ``dps + 40`` digits (``fsum``);
* for a sum to infinity, Arb's Hurwitz zeta (python-flint), a certified ball, whose
  midpoint is compared.

Tolerance: ``10^-(dps-1)`` relative, one digit of slack for the final rounding of a
result that promises ``dps`` significant digits.
"""

from __future__ import annotations

import flint
import mpmath
import pytest
from mpmath import mpf

from priors.encodings import KerpleLog, LogDistance, UserBias
from priors.harmonic import power_sum

CASES = [
    # (lo, hi, alpha, shift)
    (64, 200, 50.0, 1),
    (65, 130, 50.0, 1),
    (64, 300, 20.0, 1),
    (100, 1000, 10.0, 1),
    (1000, 5000, 300.0, 1),
    (10, 500, 5.0, 1),
    (100, 400, 20.0, 0.5),
    (200, 900, 12.0, 50.0),
]


def _direct(lo: int, hi: int, alpha: float, shift: float, dps: int) -> mpf:
    with mpmath.workdps(dps + 40):
        q = mpf(shift)
        a = mpf(alpha)
        return mpmath.fsum((d + q) ** (-a) for d in range(lo, hi))


def _rel(value: mpf, ref: mpf) -> mpf:
    with mpmath.workdps(80):
        return abs(value - ref) / abs(ref)


@pytest.mark.parametrize("dps", [15, 30, 50])
@pytest.mark.parametrize(("lo", "hi", "alpha", "shift"), CASES)
def test_power_sum_keeps_relative_digits_when_tiny(lo, hi, alpha, shift, dps) -> None:
    got = power_sum(lo, hi, alpha, shift=shift, dps=dps)
    ref = _direct(lo, hi, alpha, shift, dps)
    assert _rel(got, ref) < mpf(10) ** (-(dps - 1))


@pytest.mark.parametrize(("alpha", "window", "length"), [(20.0, 100, 1000), (50.0, 65, 400)])
def test_log_distance_distant_mass_has_its_digits(alpha, window, length) -> None:
    """``D_l(W) = T / (S_W + T)``, every term summed directly at 70 digits."""
    dps = 30
    enc = LogDistance(alpha=alpha)
    with mpmath.workdps(dps + 40):
        s_w = _direct(0, window, alpha, 1, dps)
        tail = _direct(window, length, alpha, 1, dps)
        ref = tail / (s_w + tail)
    assert _rel(enc.distant_mass(window, length, dps=dps), ref) < mpf(10) ** (-(dps - 1))


def _arb_hurwitz(alpha: float, x: object, prec: int = 400) -> mpf:
    """Midpoint of Arb's ball for ``zeta(alpha, x)`` (``x`` a float or an int)."""
    with flint.ctx.workprec(prec):
        ball = flint.arb(alpha).zeta(flint.arb(x))
        assert ball.rel_accuracy_bits() > 250
        with mpmath.workdps(90):
            return mpf(ball.mid().str(85, radius=False))


@pytest.mark.parametrize(("alpha", "window"), [(20.0, 100), (50.0, 64), (10.0, 1000)])
def test_log_distance_limit_distant_mass_against_arb(alpha, window) -> None:
    """``D_inf(W) = zeta(alpha, W+1) / zeta(alpha)`` against Arb's Hurwitz zeta."""
    dps = 30
    with mpmath.workdps(90):
        ref = _arb_hurwitz(alpha, window + 1) / _arb_hurwitz(alpha, 1)
    got = LogDistance(alpha=alpha).limit_distant_mass(window, dps=dps)
    assert _rel(got, ref) < mpf(10) ** (-(dps - 1))


def test_kerple_log_limit_distant_mass_against_arb() -> None:
    """KERPLE-log ``(1 + r2 d)^-r1``: ``D_inf(W) = zeta(r1, W + 1/r2) / zeta(r1, 1/r2)``
    (``r2 = 0.5``, so ``1/r2 = 2`` is exact)."""
    dps = 30
    enc = KerpleLog(r1=20.0, r2=0.5)
    with mpmath.workdps(90):
        ref = _arb_hurwitz(20.0, 100 + 2) / _arb_hurwitz(20.0, 2)
    assert _rel(enc.limit_distant_mass(100, dps=dps), ref) < mpf(10) ** (-(dps - 1))


def test_user_power_tail_limit_distant_mass_against_arb() -> None:
    """A user bias of 80 zeros with a stated power tail ``(1+d)^-p`` beyond: the weights
    are ``80^p (1+d)^-p`` for ``d >= 80``, so ``S_inf = 80 + 80^p zeta(p, 81)`` and
    ``D_inf(W) = (80 - W + 80^p zeta(p, 81)) / S_inf``."""
    dps = 30
    p = 30.0
    enc = UserBias(values=[0.0] * 80, tail="power", tail_exponent=p)
    with mpmath.workdps(90):
        tail = mpf(80) ** p * _arb_hurwitz(p, 81)
        ref = (80 - 60 + tail) / (80 + tail)
    assert _rel(enc.limit_distant_mass(60, dps=dps), ref) < mpf(10) ** (-(dps - 1))


def test_mass_cli_prints_the_digits_it_states(capsys) -> None:
    """``python -m priors.mass --json`` at ``alpha = 20``, ``W = 100``, ``l = 1000``: the
    printed distant mass agrees with direct summation at 70 digits to the ``digits``
    significant digits the record states (tolerance ``10^-(digits-1)`` relative: the
    rounding of the printed decimal plus one digit of slack)."""
    import json

    from priors.mass.__main__ import main

    assert main(["--encoding", "log-distance", "--alpha", "20", "--window", "100",
                 "--length", "1000", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    digits = record["digits"]
    with mpmath.workdps(80):
        s_w = _direct(0, 100, 20.0, 1, 30)
        tail = _direct(100, 1000, 20.0, 1, 30)
        ref = tail / (s_w + tail)
        printed = mpf(record["distant_mass"])
        assert _rel(printed, ref) < mpf(10) ** (-(digits - 1))


@pytest.mark.parametrize("lo", [0, 5])
def test_power_sum_at_an_exponent_beyond_float64(lo) -> None:
    """``alpha = 10^309`` (an ``mpf``, beyond the float64 range): every term after the
    first is below ``((lo+1)/(lo+2))^alpha`` of it, far under ``10^-40``, so the sum is its
    first term ``(lo+1)^-alpha`` to every digit asked; reference ``exp(-alpha ln(lo+1))``
    at 60 digits. Tolerance ``10^-(dps-1)``."""
    dps = 30
    alpha = mpf(10) ** 309
    with mpmath.workdps(60 + 320):  # ln(lo+1) to 320 more digits than alpha's magnitude
        ref = mpmath.exp(-alpha * mpmath.log(lo + 1))
    got = power_sum(lo, 10**18, alpha, dps=dps)
    assert _rel(got, ref) < mpf(10) ** (-(dps - 1))

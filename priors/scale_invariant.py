"""The exact scale-invariant prior of causal OT attention with constant scores (docs/theory.md §4).

In the continuum limit (rows ``t > 0``, keys ``s in (0, t]``) the prefix-consistent
operator with balancing strength ``rho in [0, 1)`` and constant scores has the exact
self-similar solution::

    a(t, s) = f_rho(s/t) / t,   f_rho(y) = (ln 1/y)^(-rho) / Gamma(1 - rho),   0 < y < 1,
    C(t, s) = F(s/t),           F(y)     = (ln 1/y)^(1-rho) / Gamma(2 - rho),
    Z(t)    = t Gamma(1 - rho) Gamma(2 - rho)^kappa,   kappa = rho / (1 - rho),

i.e. ``ln(l/j) ~ Gamma(shape 1 - rho, rate 1)`` for the key ``j`` drawn by row ``l``.
Consequences computed here: the recent-window mass ``M(q) = P(1 - rho, -ln(1 - q))``
(regularised lower incomplete gamma, ``q = W/l``), its ``q -> 0`` asymptotic
``q^(1-rho) / Gamma(2 - rho)``, and the continuum key distribution
``P(key <= j) = Q(1 - rho, ln(l/j))`` used in the distance ``K_l`` of §4.

mpmath only (no scipy): ``dps`` significant digits, results as ``mpmath.mpf``.
``priors.symbolic.verify_scale_invariant_prior`` proves the fixed-point identities in sympy.

>>> from mpmath import mpf, workdps, gamma
>>> rho, y = mpf(1) / 3, mpf("0.25")
>>> with workdps(30):  # the fixed point a C^kappa = 1/Z holds exactly: f F^kappa = t/Z(t)
...     kappa = rho / (1 - rho)
...     lhs = density(rho, y) * cumulative_mass(rho, y) ** kappa
...     abs(lhs - 1 / normaliser(rho, 1)) < mpf(10) ** -28
True
"""

from __future__ import annotations

import math

import mpmath

from priors.harmonic import DEFAULT_DPS
from priors.precision import guarded
from priors.validation import as_real, check_dps

__all__ = [
    "cumulative_mass",
    "density",
    "key_cdf",
    "normaliser",
    "window_mass_asymptotic",
    "window_mass_continuum",
]

_GUARD_DPS = 10


def _rho(rho: object) -> mpmath.mpf:
    r = as_real(rho, "rho")
    if not 0 <= r < 1:
        raise ValueError(f"rho must be in [0, 1), got {rho!r}")
    return r


def _unit_open(y: object, name: str, *, closed_right: bool) -> mpmath.mpf:
    v = as_real(y, name)
    ok = 0 < v <= 1 if closed_right else 0 < v < 1
    if not ok:
        interval = "(0, 1]" if closed_right else "(0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {y!r}")
    return v


def density(rho: object, y: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Scale-invariant prior density ``f_rho(y) = (ln 1/y)^(-rho) / Gamma(1-rho)`` (§4).

    The density of ``y = s/t`` (key over query position) under row ``t``:
    ``a(t, s) = f_rho(s/t)/t``. ``rho = 0`` is the uniform softmax prior ``f = 1``.

    Parameters
    ----------
    rho : real in [0, 1)
    y : real in (0, 1)
    dps : int
        Significant digits of the result.

    >>> from mpmath import quad, mpf, workdps
    >>> with workdps(20):  # integrates to 1 (y = exp(-u); quad of u^-rho at 0 gives ~1e-12)
    ...     total = quad(lambda u: density(0.5, mpmath.exp(-u), dps=20) * mpmath.exp(-u),
    ...                  [0, 1, mpmath.inf])
    ...     abs(total - 1) < mpf(10) ** -10
    True
    """
    r = _rho(rho)
    v = _unit_open(y, "y", closed_right=False)
    return _density(r, v, dps=check_dps(dps))


@guarded(_GUARD_DPS)
def _density(r: mpmath.mpf, v: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    return (-mpmath.log(v)) ** (-r) / mpmath.gamma(1 - r)


def cumulative_mass(rho: object, y: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Received column mass ``F(y) = (ln 1/y)^(1-rho) / Gamma(2-rho)`` (§4).

    ``C(t, s) = F(s/t)`` is the mass key ``s`` has received from the rows up to ``t``;
    ``F(y) = int_y^1 f_rho(x)/x dx``, ``F(1) = 0``; unbounded as ``y -> 0``.

    Parameters
    ----------
    rho : real in [0, 1)
    y : real in (0, 1]

    >>> from mpmath import quad, mpf, workdps
    >>> with workdps(25):
    ...     direct = quad(lambda x: density(0.25, x, dps=25) / x, [0.1, 1])
    ...     abs(direct - cumulative_mass(0.25, 0.1, dps=25)) < mpf(10) ** -18
    True
    """
    r = _rho(rho)
    v = _unit_open(y, "y", closed_right=True)
    return _cumulative_mass(r, v, dps=check_dps(dps))


@guarded(_GUARD_DPS)
def _cumulative_mass(r: mpmath.mpf, v: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    return (-mpmath.log(v)) ** (1 - r) / mpmath.gamma(2 - r)


def normaliser(rho: object, t: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Row normaliser ``Z(t) = t Gamma(1-rho) Gamma(2-rho)^kappa``, ``kappa = rho/(1-rho)`` (§4).

    Parameters
    ----------
    rho : real in [0, 1)
    t : real > 0
        The row (query position).

    >>> bool(normaliser(0, 7) == 7)  # rho = 0: softmax, Z(t) = t
    True
    """
    r = _rho(rho)
    tt = as_real(t, "t", minimum=0)
    return _normaliser(r, tt, dps=check_dps(dps))


def _normaliser_guard(r: mpmath.mpf, tt: mpmath.mpf, *, dps: int) -> int:
    """Guard digits of ``_normaliser``: ``_GUARD_DPS`` plus ``log10(1 + kappa)``, the digits
    that ``Gamma(2-rho)^kappa`` loses (it multiplies the relative error of ``Gamma(2-rho)``
    by ``kappa = rho/(1-rho)``, up to 9e15 for a float ``rho``)."""
    with mpmath.workdps(20):
        return _GUARD_DPS + math.ceil(float(mpmath.log10(1 + r / (1 - r))))


@guarded(_normaliser_guard)
def _normaliser(r: mpmath.mpf, tt: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    """``t Gamma(1-rho) Gamma(2-rho)^kappa`` (docs/theory.md §4), ``dps`` digits."""
    kappa = r / (1 - r)
    return tt * mpmath.gamma(1 - r) * mpmath.gamma(2 - r) ** kappa


def _window_q(q: object) -> mpmath.mpf:
    return _unit_open(q, "q", closed_right=True)


def window_mass_continuum(rho: object, q: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Continuum recent-window mass ``M(q) = P(1-rho, -ln(1-q))``, ``q = W/l`` (§4).

    ``int_{1-q}^1 f_rho(y) dy``; with ``u = ln 1/y`` this is the regularised lower
    incomplete gamma ``P(a, x) = gamma(a, x)/Gamma(a)`` at ``a = 1-rho``,
    ``x = -ln(1-q)`` (computed as ``-log1p(-q)``). ``q = 1`` gives 1.

    Parameters
    ----------
    rho : real in [0, 1)
    q : real in (0, 1]
        Window fraction ``W/l``.

    >>> from mpmath import quad, mpf, workdps
    >>> with workdps(25):  # against quadrature of the density over (1-q, 1)
    ...     direct = quad(lambda y: density(0.5, y, dps=25), [0.9, 0.99, 1])
    ...     abs(direct - window_mass_continuum(0.5, 0.1, dps=25)) < mpf(10) ** -15
    True
    """
    r = _rho(rho)
    v = _window_q(q)
    return _window_mass_continuum(r, v, dps=check_dps(dps))


@guarded(_GUARD_DPS)
def _window_mass_continuum(r: mpmath.mpf, v: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    if v == 1:
        return mpmath.mpf(1)
    return mpmath.gammainc(1 - r, 0, -mpmath.log1p(-v), regularized=True)


def window_mass_asymptotic(rho: object, q: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
    """Small-window asymptotic ``M(q) ~ q^(1-rho) / Gamma(2-rho)`` as ``q -> 0`` (§4).

    >>> from mpmath import mpf
    >>> q = mpf(10) ** -8
    >>> ratio = window_mass_continuum(0.3, q) / window_mass_asymptotic(0.3, q)
    >>> bool(abs(ratio - 1) < 1e-7)
    True
    """
    r = _rho(rho)
    v = _window_q(q)
    return _window_mass_asymptotic(r, v, dps=check_dps(dps))


@guarded(_GUARD_DPS)
def _window_mass_asymptotic(r: mpmath.mpf, v: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    return v ** (1 - r) / mpmath.gamma(2 - r)


def key_cdf(rho: object, l: object, j: object, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:  # noqa: E741
    """Continuum ``P(key <= j)`` for row ``l``: ``Q(1-rho, ln(l/j))`` (§4, definition of K_l).

    ``Q`` is the regularised upper incomplete gamma; ``ln(l/j) ~ Gamma(1-rho, 1)``.
    ``j = l`` gives 1. Real positions are allowed (``0 < j <= l``).

    Parameters
    ----------
    rho : real in [0, 1)
    l : real > 0
        Query position (row).
    j : real in (0, l]
        Key position.

    >>> from mpmath import mpf, workdps
    >>> with workdps(30):  # rho = 0: uniform over (0, l]
    ...     bool(abs(key_cdf(0, 10, 3) - mpf(3) / 10) < 1e-28)
    True
    """
    r = _rho(rho)
    ll = as_real(l, "l")
    jj = as_real(j, "j")
    if ll <= 0:
        raise ValueError(f"l must be > 0, got {l!r}")
    if not 0 < jj <= ll:
        raise ValueError(f"j must be in (0, l], got j={j!r}, l={l!r}")
    return _key_cdf(r, ll, jj, dps=check_dps(dps))


@guarded(_GUARD_DPS)
def _key_cdf(r: mpmath.mpf, ll: mpmath.mpf, jj: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    if jj == ll:
        return mpmath.mpf(1)
    return mpmath.gammainc(1 - r, mpmath.log(ll / jj), mpmath.inf, regularized=True)


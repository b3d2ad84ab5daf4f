"""Positional priors: one module per encoding, one shared interface (docs/theory.md §5).

Every encoding is a frozen dataclass with ``name``, ``params``, ``bias(d, *, length)``,
``weight_sum(lo, hi)``, ``partial_sum(m)`` (``S_m = sum_{d<m} e^{b(d)}``),
``window_mass(W, l)``, ``distant_mass(W, l)`` (from the tail, no subtraction),
``limit_window_mass(W)`` and ``classify()``; see ``priors.encodings.base``.

=================  ==============================  ===========  ======================
class              bias ``b(d)``                   class        sums
=================  ==============================  ===========  ======================
``NoPE``           ``0``                           dilutes      ``S_m = m``
``ALiBi``          ``-m d``                        summable     geometric, closed form
``LogDistance``    ``-alpha ln(1+d)``              iff a > 1    Hurwitz zeta
``KerpleLog``      ``-r1 ln(1 + r2 d)``            iff r1 > 1   Hurwitz zeta, shift 1/r2
``KerplePower``    ``-r1 d^r2``                    summable     sum + rigorous tail
``T5Buckets``      ``table[bucket(d)]``            dilutes      finite + constant tail
``Sandwich``       ``sum_i cos(w_i d) - dim/2``    dilutes      exact float64 sum
``CausalOTPrior``  ``ln P(cell), ~ -rho ln d``     dilutes      incomplete gamma
``UserBias``       given values + stated tail      from tail    exact + closed tail
=================  ==============================  ===========  ======================

Encodings outside the list are classified through docs/theory.md §5 directly. Worked
examples (``docs/encodings.md`` has the numbers):

* FIRE (Li et al. 2023): ``b(l, j) = f_theta(psi(l-j) / psi(max(L, l)))`` with
  ``psi(x) = ln(c x + 1)`` and an MLP ``f_theta``. Its argument lies in ``[0, 1]`` and a
  continuous ``f_theta`` is bounded there, ``|b| <= beta``: a bounded positional change.
  Folding it into the scores, ``|s + b| <= B + beta``, NoPE's bound gives
  ``M_l(W) <= e^{2(B+beta)} W / l``: FIRE dilutes, e.g.
  ``NoPE().window_mass(512, 65536)`` with ``score_bound = B + beta`` in
  ``priors.mass.mass_report`` is the certified bracket.
* GOAT-style priors whose positional term depends on the query position (a function of
  ``j/l``, or normalised by ``l``) are, like the causal-OT prior, scale-invariant or
  bounded in their positional part: with ``|pos(l, j)| <= beta`` the same folding gives
  dilution at rate ``W/l``; with a ``j/l``-profile, ``CausalOTPrior`` is the worked case
  (rate ``l^-(1-rho)``).

>>> LogDistance(alpha=1.3).classify().label
'summable'
>>> CausalOTPrior(rho=0.5).classify().rate
'l^-(1-rho)'
"""

from priors.encodings.alibi import ALIBI_VARIANTS, ALiBi, alibi_slopes
from priors.encodings.base import Encoding
from priors.encodings.causal_ot import CausalOTPrior
from priors.encodings.kerple import KerpleLog, KerplePower
from priors.encodings.log_distance import LogDistance
from priors.encodings.nope import NoPE
from priors.encodings.sandwich import Sandwich, sandwich_heads
from priors.encodings.t5 import T5Buckets, t5_bucket
from priors.encodings.user import UserBias

__all__ = [
    "ALIBI_VARIANTS",
    "ENCODINGS",
    "ALiBi",
    "CausalOTPrior",
    "Encoding",
    "KerpleLog",
    "KerplePower",
    "LogDistance",
    "NoPE",
    "Sandwich",
    "T5Buckets",
    "UserBias",
    "alibi_slopes",
    "sandwich_heads",
    "t5_bucket",
]

#: Encoding classes by their ``name``.
ENCODINGS: dict[str, type[Encoding]] = {
    cls.name: cls
    for cls in (
        NoPE,
        ALiBi,
        LogDistance,
        KerpleLog,
        KerplePower,
        T5Buckets,
        Sandwich,
        CausalOTPrior,
        UserBias,
    )
}

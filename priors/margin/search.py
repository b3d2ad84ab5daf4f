"""Certified search for the exponent margin of docs/theory.md §7 (Arb ball arithmetic).

Log-distance prior ``b(d) = -alpha ln(1+d)`` with ``alpha = 1 + delta``, window ``W``,
lengths ``W <= L0 < L1``, content-score bound ``B >= 0`` and ``E = e^{2B}``. With
``S_W = H_W^(alpha)`` and the prior tails ``T_l = H_l^(alpha) - H_W^(alpha)`` (computed as
tails, never as a difference of partial sums), docs/theory.md §5 gives

    D^+_l = E T_l / (S_W + E T_l),        D^-_l = T_l / (E S_W + T_l),

and the growth of §7 is ``G(alpha) = D^+_{L1} - D^-_{L0}`` (at ``B = 0`` both bounds are the
exact distant mass ``D_l = T_l / S_l``). The margin is the smallest ``delta* >= 0`` with
``sup_{alpha >= 1 + delta*} G(alpha) <= tol``.

**The monotonicity lemma used everywhere.** ``R_l(alpha) = T_l / S_W`` is nonincreasing in
``alpha``: ``d/dalpha ln R_l = -(E_tail[ln k] - E_win[ln k])`` where the first mean is over
``W < k <= l`` with weights ``k^-alpha`` and the second over ``k <= W``; every tail ``k``
exceeds every window ``k``, so the derivative is ``<= 0`` (a likelihood-ratio argument).
``D^+_l = E R_l / (1 + E R_l)`` and ``D^-_l = R_l / (E + R_l)`` are increasing functions of
``R_l``, hence both are nonincreasing in ``alpha``. Consequences (each used below):

* on an interval ``a <= alpha <= b``:  ``G(alpha) <= D^+_{L1}(a) - D^-_{L0}(b)``  (box bound);
* for ``alpha >= alpha_max``: ``G(alpha) <= D^+_{L1}(alpha) <= D^+_{L1}(alpha_max)``, so one
  ball evaluation certifies the whole half-line ``[alpha_max, inf)`` (the analytic tail bound
  ``D^+_{L1} <= E W^{1-alpha} / (alpha - 1)`` shows such an ``alpha_max`` exists);
* at ``B = 0`` also ``G = P Q`` with ``P = (T_{L1} - T_{L0}) / S_{L1}`` (the row-``L1`` mass
  beyond ``L0``: nonincreasing, by the same argument with ``(L0, L1]`` against ``[1, L0]``)
  and ``Q = S_W / S_{L0} = M_{L0}`` (nondecreasing), so ``G <= P(a) Q(b)`` on ``[a, b]`` too;
  the smaller of the two bounds is used (the product form is much tighter when ``D_{L0}``
  is large and ``G`` small);
* if ``L0 = W`` then ``D^-_{L0} = 0`` and ``G = D^+_{L1}`` is itself nonincreasing: the
  supremum over ``alpha >= 1 + delta`` is ``G(1 + delta)`` (proved, not assumed).

**The sweep.** Starting from ``c = alpha_max - 1`` (certified: nothing at or beyond it
violates), boxes ``[a, c]`` are certified right to left with the box bound; the step grows
after a success and shrinks after a failure. A failed box whose left end has a ball
``G(1 + a)`` strictly above ``tol`` is a proven violation ``delta_lo = a``.

That alone can stall. The box bound overestimates ``sup G`` on ``[a, c]`` by about
``|D^-_{L0}'| (c - a)``, so a box next to the crossing fails as soon as
``|D^+_{L1}'| (c - a) > tol - G(c)``, while its left end violates only once
``|G'| (c - a) > tol - G(c)``. Where ``q = |G'| / |D^+_{L1}'|`` is small (``L0 > W``,
``B > 0``, near an interior maximum of ``G``) every failed box keeps its left end short of
the crossing: the certified end ``c`` creeps towards ``delta*`` by a factor ``1 - q`` of the
gap per box and no violation is ever exposed. So a failed box whose left end does not
violate is followed by a *secant probe*: the secant through ``(a, G(a))`` and ``(c, G(c))``
estimates the crossing at ``c - d``, and ``G(1 + c - 2d)`` is evaluated; a ball strictly
above ``tol`` there is a proven violation. As ``c`` creeps in, ``d`` shrinks like the gap
and the curvature error of the secant like ``d^2``, so at a transversal crossing a probe
succeeds once ``c`` is close enough. If a sweep still reaches the float resolution of ``delta``
without one, points ``c (1 - rtol 2^-j)`` just left of ``c`` are tried.

Then bisection: a midpoint of ``(delta_lo, c)`` that violates becomes ``delta_lo``; one that
does not is made the new ``c`` by sweeping ``[mid, c]`` (a violation met on the way, at a
box end or a probe, becomes ``delta_lo``). A midpoint whose ball straddles ``tol`` is not
taken for a tangency: the crossing may lie exactly on it (``G = tol`` at a dyadic ``alpha``,
e.g. ``W = 1``, ``L1 = 2``, ``tol = 0.2``, ``G(2) = 1/5``), which no precision separates, so
the split points ``mid -+ (c - delta_lo) 2^-j`` (``j = 2..7``) are tried in its place and
the first one whose ball is separated from ``tol`` is used. At exit ``delta_hi = c``
satisfies ``sup_{alpha >= 1 + delta_hi} G <= tol`` (union of the certified boxes and the
half-line) and ``delta_lo`` violates, so ``delta* in (delta_lo, delta_hi]``; the largest
certified box bound is a proven upper end of that supremum. This works whether or not ``G``
is monotone: the growth with ``B > 0`` need not be (docs/theory.md §7). Only a tangency (``G``
touching ``tol``) or too little precision leaves no violation proven; the outcome then says
so (``delta_lo is None``, ``resolved = False``), and never reports ``delta_lo = 0`` as a
violation. The cost is set by ``q``: about ``ln(1/rtol) / q`` boxes, and far more when
``tol`` is within a tiny distance of a local maximum of ``G`` (the box bound is first
order in the box width): near a maximum where ``tol - G ~ eps + k (alpha - alpha_m)^2``
the boxes have width ``~ (tol - G) / |D^-_{L0}'|``, so about
``pi |D^-_{L0}'| / sqrt(k eps)`` of them are needed (hours at ``eps ~ 1e-12``). Hence the
evaluation budget ``GrowthProblem.max_evaluations``: when it runs out the search stops
with what it has proven (``exhausted``, not ``resolved``), never with a guess.

All trial points ``delta`` are Python floats; ``alpha = 1 + delta`` is formed exactly as an
Arb ball of radius 0, so the reported bracket endpoints are exactly the points that were
proven.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal

import flint

from priors.content_bounds import distant_mass_bounds
from priors.harmonic import harmonic_number_arb, harmonic_tail_arb

__all__ = [
    "GrowthProblem",
    "SearchOutcome",
    "SupOutcome",
    "certified_search",
    "exact_alpha",
    "float_down",
    "float_up",
    "locate_sup",
]


def float_down(ball: flint.arb) -> float:
    """The largest float ``<=`` every point of ``ball`` (lower end rounded outward)."""
    end = ball.lower()
    out = float(end)
    return out if flint.arb(out) <= end else math.nextafter(out, -math.inf)


def float_up(ball: flint.arb) -> float:
    """The smallest float ``>=`` every point of ``ball`` (upper end rounded outward)."""
    end = ball.upper()
    out = float(end)
    return out if flint.arb(out) >= end else math.nextafter(out, math.inf)


def largest_float_at_most(decimal_text: str) -> float:
    """The largest float ``<=`` the exact decimal ``decimal_text``."""
    out = float(decimal_text)  # correctly rounded: within one step
    return out if Decimal(out) <= Decimal(decimal_text) else math.nextafter(out, -math.inf)


def exact_alpha(delta: float) -> flint.arb:
    """The exact ball ``1 + delta`` (radius 0) for a float ``delta >= 0``."""
    if delta == 0.0:
        return flint.arb(1)
    _, exponent = math.frexp(delta)
    bits = 64 + max(0, -exponent)  # 53 mantissa bits below 2^exponent, plus the leading 1
    with flint.ctx.workprec(bits):
        out = flint.arb(1) + flint.arb(delta)
    assert out.rad() == 0, "1 + delta was not formed exactly"
    return out


@dataclass
class GrowthProblem:
    """The growth ``G(1 + delta) = D^+_{L1} - D^-_{L0}`` of docs/theory.md §7 as Arb balls.

    ``tol`` and ``score_bound`` are decimal strings (read as the exact decimals they
    spell, enclosed in balls); ``prec`` is the Arb working precision in bits. A violation
    is ``G > tol`` (the decimal); safety is certified against ``tol_safe``, the largest
    float ``<= tol`` (``certified_le_tol``), so that every certified bound, rounded up to a
    float, is itself ``<= tol`` and ``<=`` the float the result reports as ``tol``. Evaluations
    are cached per ``delta`` and counted in ``evaluations``; ``max_evaluations`` (``None``:
    no limit) is the budget that ``certified_search`` stops at (``exhausted``).
    """

    window: int
    lmin: int
    lmax: int
    tol: str
    score_bound: str
    prec: int
    evaluations: int = 0
    max_evaluations: int | None = None
    _cache: dict[float, tuple[flint.arb, flint.arb]] = field(default_factory=dict, repr=False)
    _factors: dict[float, tuple[flint.arb, flint.arb]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.tol_safe = largest_float_at_most(self.tol)
        with flint.ctx.workprec(self.prec + 16):
            self.tol_ball = flint.arb(self.tol)
            self.tol_safe_ball = flint.arb(self.tol_safe)  # a float: exact
            bound = flint.arb(self.score_bound)
            self.factor = flint.arb(1) if bound == 0 else (2 * bound).exp()
        self.product_form = bool(bound == 0) and self.lmin > self.window

    def pieces(self, delta: float) -> tuple[flint.arb, flint.arb]:
        """``(D^+_{L1}, D^-_{L0})`` at ``alpha = 1 + delta``, balls (docs/theory.md §5)."""
        hit = self._cache.get(delta)
        if hit is not None:
            return hit
        alpha = exact_alpha(delta)
        window_sum = harmonic_number_arb(self.window, alpha, prec=self.prec)
        tail_max = harmonic_tail_arb(self.window, self.lmax, alpha, prec=self.prec)
        tail_min = (
            harmonic_tail_arb(self.window, self.lmin, alpha, prec=self.prec)
            if self.lmin > self.window
            else flint.arb(0)
        )
        with flint.ctx.workprec(self.prec + 16):
            d_max_hi = distant_mass_bounds(window_sum, tail_max, self.factor)[1]
            d_min_lo = distant_mass_bounds(window_sum, tail_min, self.factor)[0]
            if self.product_form:
                # B = 0: G = P Q with P = (T_L1 - T_L0) / S_L1 and Q = S_W / S_L0
                self._factors[delta] = (
                    (tail_max - tail_min) / (window_sum + tail_max),
                    window_sum / (window_sum + tail_min),
                )
        self.evaluations += 1
        self._cache[delta] = (d_max_hi, d_min_lo)
        return d_max_hi, d_min_lo

    @property
    def exhausted(self) -> bool:
        """Whether the evaluation budget ``max_evaluations`` is spent."""
        return self.max_evaluations is not None and self.evaluations >= self.max_evaluations

    def affordable(self, delta: float) -> bool:
        """Whether ``G(1 + delta)`` is cached or the budget allows one more evaluation."""
        return delta in self._cache or not self.exhausted

    def growth(self, delta: float) -> flint.arb:
        """Ball of ``G(1 + delta)``."""
        d_max_hi, d_min_lo = self.pieces(delta)
        with flint.ctx.workprec(self.prec + 16):
            return d_max_hi - d_min_lo

    def box_bound(self, a: float, b: float) -> flint.arb:
        """Ball whose upper end bounds ``sup G`` on ``1 + a <= alpha <= 1 + b`` (module doc)."""
        with flint.ctx.workprec(self.prec + 16):
            difference = self.pieces(a)[0] - self.pieces(b)[1]
            if not self.product_form:
                return difference
            product = self._factors[a][0] * self._factors[b][1]
            return product if product.upper() < difference.upper() else difference

    def certified_le_tol(self, value: flint.arb) -> bool:
        """``value <= tol_safe`` for every point of the ball (hence ``<= tol``)."""
        with flint.ctx.workprec(self.prec + 16):
            return bool(value <= self.tol_safe_ball)

    def certified_gt_tol(self, value: flint.arb) -> bool:
        with flint.ctx.workprec(self.prec + 16):
            return bool(value > self.tol_ball)


@dataclass(frozen=True)
class SearchOutcome:
    """Result of ``certified_search``.

    ``delta_lo`` is a proven violation (``G(1 + delta_lo) > tol``), or ``None`` when none
    was proven: either ``delta* = 0`` (then ``delta_hi == 0`` and ``resolved``), or the
    search is unresolved. ``sup_upper`` is a proven upper bound (a float rounded up, at
    most ``GrowthProblem.tol_safe``, the largest float ``<= tol``) of
    ``sup_{alpha >= 1 + delta_hi} G``: the largest upper end of the certified box bounds
    and of the half-line bound ``D^+_{L1}(1 + delta_max)``.
    ``exhausted`` says the search stopped because the problem's evaluation budget ran out
    (then ``resolved`` is ``False``; what was proven before that stays proven); if it ran
    out before any violation was proven, ``closest`` is the ``delta`` in
    ``[0, delta_hi]`` with the largest point value of ``G`` found by ``_closest_approach``.
    """

    delta_lo: float | None
    delta_hi: float
    delta_max: float
    boxes: int
    resolved: bool
    sup_upper: float = math.inf
    exhausted: bool = False
    closest: float | None = None


#: Largest ``alpha_max - 1`` tried before giving up (the tail bound makes this unreachable
#: for any finite score bound below ~1e6).
_DELTA_CAP = 2.0**40


def _find_delta_max(problem: GrowthProblem) -> float:
    """Smallest power of two ``d >= 1/4`` with ``D^+_{L1}(1 + d) <= tol`` (certified)."""
    d = 0.25
    while d <= _DELTA_CAP:
        if problem.certified_le_tol(problem.pieces(d)[0]):
            return d
        d *= 2.0
    raise ValueError(
        "score_bound is too large: no alpha <= 2^40 brings the distant mass below tol"
    )


def _secant_probe(problem: GrowthProblem, a: float, x: float, c: float) -> float | None:
    """A point left of a failed box ``[x, c]`` where ``G`` is likely above ``tol``.

    The box bound is first order in the box width and overestimates ``sup G`` on the box by
    about ``|D^-_{L0}'| (c - x)`` (module docstring), so near a crossing where ``|G'|`` is
    small against ``|D^+_{L1}'|`` the left end ``x`` of every failed box still satisfies
    the tolerance. The crossing is then estimated from the point values by the secant
    through ``(x, G(x))`` and ``(c, G(c))``: ``c - d`` with
    ``d = (tol - G(c)) (c - x) / (G(x) - G(c))``; the probe is ``c - 2 d`` (the linear model
    puts ``G`` there ``tol - G(c)`` above ``tol``), clipped to ``[a, x)``. ``None`` when
    ``G`` does not rise to the left (no secant estimate) or the probe falls outside.
    The probe is only a candidate: the caller keeps it only if its ball is above ``tol``.
    """
    with flint.ctx.workprec(problem.prec + 16):
        gap = problem.tol_ball - problem.growth(c)
        rise = problem.growth(x) - problem.growth(c)
        if not (gap > 0 and rise > 0):
            return None
        ratio = float((gap / rise).mid())
    probe = max(c - 2.0 * ratio * (c - x), a)
    if not a <= probe < x or not math.isfinite(probe):
        return None
    return probe


def _sweep(
    problem: GrowthProblem, a: float, b: float
) -> tuple[str, float, float, int, float]:
    """Certify ``[1 + a, 1 + b]`` right to left with box bounds (module docstring).

    Returns ``(status, c, x, boxes, upper)``: ``c`` is the left end of the certified part
    ``[c, b]``, ``upper`` the largest box bound on it (rounded up); ``status`` is ``"ok"``
    (``c == a``), ``"violation"`` (``G(1 + x) > tol`` proven, ``a <= x < c``) or
    ``"stuck"`` (the box bound could not be brought below ``tol`` before the float
    resolution of ``delta`` ran out) or ``"budget"`` (the problem's evaluation budget ran
    out first; ``x == c``). A failed box whose left end does not violate is followed by one
    secant probe (``_secant_probe``) before the step is halved. No evaluation is made
    beyond the budget (``GrowthProblem.affordable``; cached points cost nothing).
    """
    c = b
    step = b - a
    boxes = 0
    upper = -math.inf
    while c > a:
        x = max(c - step, a)
        if not x < c or step <= c * 2.0**-50:
            return "stuck", c, x, boxes, upper
        if not problem.affordable(x):
            return "budget", c, c, boxes, upper
        bound = problem.box_bound(x, c)
        if problem.certified_le_tol(bound):
            c = x
            boxes += 1
            step *= 2.0
            upper = max(upper, float_up(bound))
            continue
        if problem.certified_gt_tol(problem.growth(x)):
            return "violation", c, x, boxes, upper
        probe = _secant_probe(problem, a, x, c)
        if (probe is not None and problem.affordable(probe)
                and problem.certified_gt_tol(problem.growth(probe))):
            return "violation", c, probe, boxes, upper
        step /= 2.0
    return "ok", c, c, boxes, upper


def _violation_next_to(problem: GrowthProblem, lo: float, c: float, rtol: float) -> float | None:
    """A proven violation in ``(lo, c)`` within ``rtol c`` of ``c``, by point values.

    Used when a sweep is stuck at the float resolution of ``delta``: the certified end ``c``
    then sits on the crossing to ~1e-15 (relative), and if ``G`` crosses ``tol``
    transversally, ``G(1 + c (1 - t)) - tol ~ |G'| c t`` is far above the ball radius for
    ``t = rtol / 2^j``, ``j = 1, 2, ...``. Tried from the widest such point inwards;
    ``None`` if none is proven (a tangency, or too little precision).
    """
    for j in range(1, 8):
        p = c - c * rtol * 2.0**-j
        if not lo < p < c:
            break
        if problem.certified_gt_tol(problem.growth(p)):
            return p
    return None


def _splits_next_to(lo: float, mid: float, c: float) -> Iterator[float]:
    """Split points of ``(lo, c)`` to try when the ball of ``G(1 + mid)`` straddles ``tol``.

    A straddling midpoint is not evidence of a tangency: a transversal crossing can fall
    exactly on it (``W = 1``, ``L1 = 2``, ``tol = 0.2``: ``G(2) = 1/5``, and the first
    midpoint of ``(0, delta_max = 2)`` is ``delta* = 1``), where ``G - tol = 0`` and no
    precision separates the ball from ``tol``. Points ``mid -+ (c - lo) 2^-j`` for
    ``j = 2..7`` are offered instead, the widest first; off an exact crossing
    ``|G - tol| ~ |G'| (c - lo) 2^-j`` is far above the ball radius. Only at a genuine
    tangency (or with too little precision) do all of them straddle too.
    """
    for j in range(2, 8):
        h = (c - lo) * 2.0**-j
        for p in (mid - h, mid + h):
            if lo < p < c:
                yield p


#: Golden-section steps of ``_closest_approach`` (the bracket shrinks by 0.618 per step).
_GOLDEN_STEPS = 60


def _closest_approach(problem: GrowthProblem, c: float) -> float:
    """The ``delta in [0, c]`` with the largest ``G`` found by golden-section search.

    Run only after the budget ran out with no violation proven: the sweep is then slow
    because ``tol`` is within a tiny distance of a local maximum of ``G`` (or tangent to
    it), and this locates that maximum (of the unimodal piece golden section follows, in
    ``_GOLDEN_STEPS + 2`` evaluations) so the caller can say how close ``G`` comes to
    ``tol``, or keep the point as a proven violation if its ball lies above ``tol``. A
    heuristic for where to look only: nothing is claimed from it but that point value.
    """
    ratio = (math.sqrt(5.0) - 1.0) / 2.0

    def value(d: float) -> float:
        return float(problem.growth(d).mid())

    lo, hi = 0.0, c
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    g1, g2 = value(x1), value(x2)
    for _ in range(_GOLDEN_STEPS):
        if g1 >= g2:
            hi, x2, g2 = x2, x1, g1
            x1 = hi - ratio * (hi - lo)
            g1 = value(x1)
        else:
            lo, x1, g1 = x1, x2, g2
            x2 = lo + ratio * (hi - lo)
            g2 = value(x2)
    candidates = [(value(0.0), 0.0), (g1, x1), (g2, x2)]
    return max(candidates)[1]


def certified_search(problem: GrowthProblem, rtol: float) -> SearchOutcome:
    """Bracket ``delta*`` with certified sweeps and bisection (module docstring).

    Phase 1 sweeps ``[0, delta_max]`` from the right until the first proven violation (or
    certifies everything: ``delta* = 0``). Phase 2 bisects ``(delta_lo, delta_hi)``: a
    midpoint with a ball ``G`` strictly above ``tol`` becomes ``delta_lo``; otherwise the
    piece ``[mid, delta_hi]`` is certified by a sweep (which may instead expose a violation
    inside it); a midpoint whose ball straddles ``tol`` is replaced by a split point next to
    it (``_splits_next_to``). Stops when ``delta_hi - delta_lo <= rtol * delta_hi``. A sweep
    stuck at the float resolution of ``delta`` is followed by point probes just left of its
    certified end (``_violation_next_to``). ``resolved`` is ``False`` when the balls could
    not separate ``G`` from ``tol`` (a tangency, or too little precision); the bracket
    returned is then still proven on its upper end, and ``delta_lo`` is a proven violation
    or ``None`` (no violation proven).

    With ``problem.max_evaluations`` set, the search stops when it needs an evaluation
    beyond that many (checked before every new point of the sweeps and the bisection; the
    half-line search ``_find_delta_max`` and the point probes are not interrupted, at most
    42 and 7 evaluations): the outcome is then ``exhausted`` and unresolved, ``delta_hi`` is
    the certified end reached so far and ``delta_lo`` the proven violation found so far, if
    any. If none was, ``_closest_approach`` (62 more evaluations) looks for the maximum of
    ``G`` left of ``delta_hi``: a proven violation there becomes ``delta_lo``, otherwise
    its location is ``closest``. A budget never changes a search that finishes within it.
    """
    delta_max = _find_delta_max(problem)
    status, c, x, boxes, upper = _sweep(problem, 0.0, delta_max)
    boxes += 1  # the half-line beyond alpha_max
    upper = max(upper, float_up(problem.pieces(delta_max)[0]))

    def outcome(lo: float | None, resolved: bool, exhausted: bool = False) -> SearchOutcome:
        return SearchOutcome(lo, c, delta_max, boxes, resolved, upper, exhausted)

    if status == "ok":
        return outcome(None, True)
    if status == "budget":
        near = _closest_approach(problem, c)
        if problem.certified_gt_tol(problem.growth(near)):
            return outcome(near, False, True)  # a proven violation after all (wide bracket)
        return replace(outcome(None, False, True), closest=near)
    lo: float | None = x if status == "violation" else None
    if status == "stuck":
        lo = _violation_next_to(problem, -1.0, c, rtol)
        if lo is None:
            return outcome(None, False)
    while c - lo > rtol * c:
        mid = lo + (c - lo) / 2.0
        if not lo < mid < c:
            break  # float resolution of delta reached
        if not problem.affordable(mid):
            return outcome(lo, False, True)
        g = problem.growth(mid)
        if not (problem.certified_gt_tol(g) or problem.certified_le_tol(g)):
            # the ball straddles tol: mid may be the crossing itself (G(1 + mid) = tol
            # exactly, no precision separates them), so split next to it instead
            for alt in _splits_next_to(lo, mid, c):
                if not problem.affordable(alt):
                    return outcome(lo, False, True)
                g = problem.growth(alt)
                if problem.certified_gt_tol(g) or problem.certified_le_tol(g):
                    mid = alt
                    break
            else:
                return outcome(lo, False)  # every split near mid straddles tol
        if problem.certified_gt_tol(g):
            lo = mid
            continue
        status, c, x, extra, box_upper = _sweep(problem, mid, c)
        boxes += extra
        upper = max(upper, box_upper)
        if status == "violation":
            lo = max(lo, x)
        elif status == "budget":
            return outcome(lo, False, True)
        elif status == "stuck":
            nearer = _violation_next_to(problem, lo, c, rtol)
            if nearer is None:
                return outcome(lo, False)
            lo = nearer
    return outcome(lo, True)


@dataclass(frozen=True)
class SupOutcome:
    """Location and enclosure ``[lower, upper]`` of ``sup G`` over ``alpha >= 1 + start``."""

    location: float  # the delta where the best lower bound was found
    lower: float
    upper: float
    boxes: int


def locate_sup(
    problem: GrowthProblem,
    start: float,
    *,
    rtol: float = 1e-3,
    max_evaluations: int = 150,
) -> SupOutcome:
    """Branch and bound for ``sup_{alpha >= 1 + start} G(alpha)`` (box bound of the module doc).

    The half-line beyond ``1 + d_far`` is bounded by ``D^+_{L1}(1 + d_far)``, with ``d_far``
    the first ``start + 2^k`` where that bound drops to the best point value found on a
    coarse grid; boxes of ``[start, d_far]`` are then split, largest upper bound first,
    until that upper bound is within ``rtol`` (relative) of the best point value. The
    returned ``lower`` is a proven lower bound (a point value, rounded down), ``upper`` a
    proven upper bound (rounded up); ``location`` is where ``lower`` was attained. The box
    bound is first order in the box width, so the enclosure is resolved to a few digits
    only (the margin itself never relies on it).
    """
    start_evals = problem.evaluations
    best, best_at = float_down(problem.growth(start)), start
    span = 0.25
    while True:
        far = start + span
        value = float_down(problem.growth(far))
        if value > best:
            best, best_at = value, far
        tail_upper = float_up(problem.pieces(far)[0])
        if tail_upper <= best * (1.0 + rtol) or span >= _DELTA_CAP:
            break
        span *= 2.0
    points = [start + (far - start) * i / 16.0 for i in range(17)]
    for p in points:
        value = float_down(problem.growth(p))
        if value > best:
            best, best_at = value, p
    heap = [(-float_up(problem.box_bound(a, b)), a, b) for a, b in itertools.pairwise(points)]
    heapq.heapify(heap)
    boxes = len(heap) + 1
    while heap and problem.evaluations - start_evals < max_evaluations:
        neg_u, a, b = heap[0]
        m = (a + b) / 2.0
        if -neg_u <= best + rtol * abs(best) or not a < m < b:
            break
        heapq.heappop(heap)
        value = float_down(problem.growth(m))
        if value > best:
            best, best_at = value, m
        for lo_, hi_ in ((a, m), (m, b)):
            heapq.heappush(heap, (-float_up(problem.box_bound(lo_, hi_)), lo_, hi_))
        boxes += 1
    upper = max(-heap[0][0] if heap else -math.inf, tail_upper, best)
    return SupOutcome(best_at, best, upper, boxes)

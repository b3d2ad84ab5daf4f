"""Theorem 4 (docs/theory.md §6): window-mass brackets near exponent one, and the ``H_W/H_n`` limit.

``thm4_brackets``: every bracket of ``priors.brackets`` contains the exact value it
brackets, for ``alpha = 1 + delta`` with ``delta`` down to ``1e-8`` and ``m`` up to ``1e12``:

    L_m <= H_m^(1+delta) <= U_m                      (integral test; Euler–Maclaurin inside it)
    L_W/U_n <= M_n(W) = H_W/H_n <= U_W/L_n          (and the Euler–Maclaurin quotient)
    (1-(W+1)^-delta)/(1+delta) <= M_inf(W) = H_W/zeta(alpha) <= delta + 1 - W^-delta
    1/delta <= zeta(1+delta) <= 1 + 1/delta

The exact values come from a different route: direct ``mpmath`` summation for ``m <= 4096``
and ``priors.harmonic.harmonic_number`` (Hurwitz zeta with the cancellation near one
recovered) beyond, ``mpmath.zeta`` for ``zeta``, all at ``dps + 10`` digits.

``thm4_near_one_limit``: as ``delta ln n -> 0``, ``M_n(W; 1+delta) -> H_W/H_n``. The rate is
a theorem of its own: ``d ln M/d alpha = E_n[ln k] - E_W[ln k]`` (averages of ``ln k`` under
the weights ``k^-alpha`` on ``1..n`` and ``1..W``), which lies in ``[0, ln n]``, so

    0 <= ln( M_n(W; 1+delta) / (H_W/H_n) ) <= delta ln n.

Measured: ``max |2 r - 1|`` with ``r = ln(M / (H_W/H_n)) / (delta ln n)``, which is ``<= 1``
exactly when ``r`` lies in ``[0, 1]``. ``M`` is the toolkit's exact window mass
(``LogDistance.window_mass``), the limit is ``priors.brackets.near_one_limit``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from proofs_check.result import CheckSpec, Measurement, theorem_check
from proofs_check.theorems import mutants
from proofs_check.theorems.system import System, uses

__all__ = ["CHECKS", "check_brackets", "check_near_one_limit"]

THEOREM = "Theorem 4 (§6)"
_DIRECT_MAX = 4096


def _exact_harmonic(m: int, alpha: float, dps: int) -> Any:
    """``H_m^(alpha)`` at ``dps`` digits: direct summation when short, Hurwitz zeta beyond."""
    import mpmath

    from priors.harmonic import harmonic_number

    if m <= _DIRECT_MAX:
        with mpmath.workdps(dps + 10):
            a = mpmath.mpf(alpha)
            return mpmath.fsum(mpmath.mpf(k) ** -a for k in range(1, m + 1))
    return harmonic_number(m, alpha, dps=dps + 10)


def _bracket_cases(delta: float, counts: tuple[int, ...], windows: tuple[int, ...], dps: int,
                   system: System) -> Iterator[tuple[str, tuple[Any, Any], Any, dict[str, Any]]]:
    """``(kind, (lo, hi), exact, case)`` for every §6 bracket at ``alpha = 1.0 + delta``.

    The brackets are computed for the exponent of ``system.prior(LogDistance(alpha))``, the
    exact values (``_exact_harmonic``, ``mpmath.zeta``) for ``alpha``. Run inside
    ``mpmath.workdps(dps + 10)``.
    """
    import mpmath

    from priors import brackets as br
    from priors.encodings import LogDistance

    alpha = 1.0 + delta
    h = {m: _exact_harmonic(m, alpha, dps) for m in sorted(set(counts) | set(windows))}
    alpha = system.prior(LogDistance(alpha=alpha)).alpha  # the prior under test
    for m in counts:
        ib = br.integral_bracket(m, alpha, dps=dps)
        eb = br.euler_maclaurin_bracket(m, alpha, dps=dps)
        yield "integral", ib, h[m], {"m": m, "delta": delta}
        yield "euler_maclaurin", eb, h[m], {"m": m, "delta": delta}
        # The Euler–Maclaurin bracket lies inside the integral one.
        yield "em_inside_integral_lo", (ib[0], eb[1]), eb[0], {"m": m, "delta": delta}
        yield "em_inside_integral_hi", (eb[0], ib[1]), eb[1], {"m": m, "delta": delta}
    for w in windows:
        for n in counts:
            if n < w:
                continue
            for kind, b in br.window_mass_brackets(w, n, alpha, dps=dps).items():
                yield (f"window_mass_{kind}", b, h[w] / h[n],
                       {"window": w, "length": n, "delta": delta})
        z = mpmath.zeta(mpmath.mpf(1.0 + delta))
        yield ("limit_window_mass", br.limit_window_mass_bracket(w, alpha, dps=dps), h[w] / z,
               {"window": w, "delta": delta})
    yield ("zeta", br.zeta_bracket(alpha, dps=dps), mpmath.zeta(mpmath.mpf(1.0 + delta)),
           {"delta": delta})


def _worst_bracket_violation(
        cases: Iterable[tuple[str, tuple[Any, Any], Any, dict[str, Any]]]) -> dict[str, Any]:
    """The largest relative violation ``max((lo - x)/x, (x - hi)/x)`` over ``cases``, where,
    the same over ``m > 1`` (``m = 1`` brackets are exact at one end), the number of cases
    and the largest relative width of the Euler–Maclaurin bracket (mpmath numbers)."""
    import mpmath

    worst, worst_nontrivial, em_width = -mpmath.inf, -mpmath.inf, mpmath.mpf(0)
    where: dict[str, Any] = {}
    count = 0
    for kind, (lo, hi), exact, case in cases:
        v = max((lo - exact) / exact, (exact - hi) / exact)
        if any(mpmath.isnan(x) for x in (lo, hi, exact)):
            v = mpmath.nan  # max() drops a NaN second argument; a NaN bracket is no bracket
        count += 1
        if case.get("m") != 1 and case.get("length") != 1:
            worst_nontrivial = v if mpmath.isnan(v) else max(worst_nontrivial, v)
        if mpmath.isnan(v) or v > worst:  # a NaN is never outvoted by later cases
            worst = v
            where = {"kind": kind, **case, "lo": float(lo), "hi": float(hi),
                     "exact": float(exact)}
        if kind == "euler_maclaurin":
            em_width = max(em_width, (hi - lo) / exact)
    return {"worst": worst, "where": where, "cases": count,
            "worst_nontrivial": worst_nontrivial, "em_width": em_width}


@theorem_check("thm4_brackets", THEOREM)
@uses("prior")
def check_brackets(
    deltas: tuple[float, ...] = (1e-8, 1e-4, 0.1, 1.0),
    counts: tuple[int, ...] = (1, 512, 10**12),
    windows: tuple[int, ...] = (1, 512),
    *,
    dps: int = 30,
    system: System | None = None,
) -> Measurement:
    """Every §6 bracket contains its exact value (``alpha = 1.0 + delta`` as an exact float).

    Measured: the largest relative violation ``max((lo - x)/x, (x - hi)/x)`` over every
    bracket and case (negative when all contain their value). ``m = 1`` brackets are exact
    at one end (``H_1 = 1``), so the maximum sits at 0 there; details give the worst
    violation over ``m > 1`` (``worst_violation_m_gt_1``, negative: the room left).
    Reference 0, tolerance ``10^-(dps+5)``: the brackets are certified (Arb, rounded
    outwards) and the exact values carry ``dps + 10`` digits, so only a real violation can
    exceed it.

    The brackets are computed for the exponent of ``system.prior(LogDistance(alpha))`` (the
    prior under test; the exact values always use ``alpha``). Negative control: that
    exponent times ``1 + 1e-12`` (``exponent_scaled``): the ``10^-dps``-tight
    Euler–Maclaurin brackets then miss the value at ``alpha``.
    """
    import mpmath

    with mpmath.workdps(dps + 10):
        found = _worst_bracket_violation(
            case for delta in deltas
            for case in _bracket_cases(delta, counts, windows, dps, system))
        measured = float(found["worst"])
    return Measurement(
        quantity="max relative violation of the integral/EM/limit/zeta brackets",
        measured=measured,
        reference=0.0,
        relation="<=",
        allowance=10.0 ** -(dps + 5),
        dtype=f"mpmath dps {dps}",
        details={"cases": found["cases"], "worst_case": found["where"],
                 "worst_violation_m_gt_1": float(found["worst_nontrivial"]),
                 "max_relative_em_width": float(found["em_width"])},
    )


@theorem_check("thm4_near_one_limit", THEOREM)
@uses("prior")
def check_near_one_limit(
    deltas: tuple[float, ...] = (1e-8, 1e-6, 1e-4),
    windows: tuple[int, ...] = (8, 512),
    lengths: tuple[int, ...] = (1000, 10**6, 10**12),
    *,
    dps: int = 30,
    system: System | None = None,
) -> Measurement:
    """``0 <= ln(M_n(W; 1+delta) / (H_W/H_n)) <= delta ln n`` on every case (docs/theory.md §6).

    ``M`` is the window mass of ``system.prior(LogDistance(1 + delta))``. Negative control:
    the exponent mirrored to ``1 - delta`` (``mirrored_exponent``, the wrong side of one):
    ``ln(M / limit)`` then has the wrong sign. (docs/theory.md §6 also notes that the leading-order
    ``ln W/ln n`` is not the limit: 0.22577 against 0.24165 at ``W = 512``, ``n = 1e12``;
    details print both.) Tolerance ``10^(8-dps)`` on the normalised ratio: ``M`` and the
    limit carry ``dps`` digits and are divided by ``delta ln n >= 1e-8 ln 1000``.
    """
    import mpmath

    from priors.brackets import near_one_limit
    from priors.encodings import LogDistance

    worst = mpmath.mpf(0)
    where: dict[str, Any] = {}
    with mpmath.workdps(dps + 10):
        for delta in deltas:
            enc = system.prior(LogDistance(alpha=1.0 + delta))
            d = mpmath.mpf(1.0 + delta) - 1  # the exact delta of the float alpha
            for w in windows:
                for n in lengths:
                    if n < w:
                        continue
                    m = enc.window_mass(w, n, dps=dps)
                    limit = near_one_limit(w, n, dps=dps)
                    r = mpmath.log(m / limit) / (d * mpmath.log(n))
                    v = abs(2 * r - 1)
                    if mpmath.isnan(v) or v >= worst:  # a NaN is never outvoted
                        worst = v
                        where = {"delta": delta, "window": w, "length": n, "r": float(r),
                                 "window_mass": float(m), "limit": float(limit)}
        theory_example = {
            "H_W/H_n (W=512, n=1e12)": float(near_one_limit(512, 10**12, dps=dps)),
            "ln W/ln n (W=512, n=1e12)": float(mpmath.log(512) / mpmath.log(10**12)),
        }
    measured = float(worst)
    return Measurement(
        quantity="max |2 ln(M/(H_W/H_n))/(delta ln n) - 1| (MVT bound)",
        measured=measured,
        reference=1.0,
        relation="<=",
        allowance=10.0 ** (8 - dps),
        dtype=f"mpmath dps {dps}",
        details={"worst_case": where, "theory_example": theory_example},
    )


CHECKS = (
    CheckSpec(
        name="thm4_brackets",
        theorem=THEOREM,
        section="§6",
        run=check_brackets,
        ci={"deltas": (1e-8, 1e-4, 0.1, 1.0), "counts": (1, 512, 10**12),
            "windows": (1, 512)},
        default={"deltas": (1e-8, 1e-6, 1e-4, 1e-2, 0.1, 0.5, 1.0),
                 "counts": (1, 10, 512, 4096, 10**6, 10**12), "windows": (1, 8, 512)},
        full={"deltas": (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.5, 1.0, 2.0),
              "counts": (1, 2, 10, 15, 16, 17, 512, 4096, 10**6, 10**9, 10**12, 10**15),
              "windows": (1, 8, 64, 512), "dps": 40},
        negative={"system": System(prior=mutants.exponent_scaled(1 + 1e-12))},
        torch_args=False,
    ),
    CheckSpec(
        name="thm4_near_one_limit",
        theorem=THEOREM,
        section="§6",
        run=check_near_one_limit,
        ci={"deltas": (1e-8, 1e-6, 1e-4), "windows": (8, 512), "lengths": (1000, 10**12)},
        default={"deltas": (1e-8, 1e-7, 1e-6, 1e-5, 1e-4), "windows": (1, 8, 64, 512),
                 "lengths": (1000, 10**6, 10**9, 10**12)},
        full={"deltas": (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3), "windows": (1, 2, 8, 64, 512),
              "lengths": (1000, 10**6, 10**9, 10**12, 10**15), "dps": 40},
        negative={"system": System(prior=mutants.mirrored_exponent)},
        torch_args=False,
    ),
)

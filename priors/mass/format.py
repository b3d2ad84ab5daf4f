"""What ``python -m priors.mass`` prints: one text block or one JSON record per length.

Numbers come from ``priors.mass.MassReport.to_dict`` (decimal strings with ``digits``
significant digits) and, under ``--certify``, ``priors.certified.CertifiedMasses``
(Arb balls printed with ``arb.str(digits, radius=True)``, which widens the radius to
cover the rounded midpoint; JSON enclosures rounded outwards). No computation here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from priors.certified import CertifiedMasses
    from priors.mass import MassReport

__all__ = ["format_text", "json_record"]


def json_record(report: MassReport, cert: CertifiedMasses | None = None) -> dict[str, Any]:
    """``report.to_dict()`` with the enclosures of ``cert`` (``window_mass_ball``, ...,
    ``prec``, ``certify_method``) and ``certified``: whether they are there."""
    record = report.to_dict()
    if cert is not None:
        record.update(cert.to_dict(report.digits))  # a dict: the outward-rounded enclosures
    record["certified"] = cert is not None
    return record


def _num_text(x: float) -> str:
    """Shortest round-trip form of a float (``%g`` would print 0.999999999999 as 1)."""
    return repr(float(x))


def format_text(report: MassReport, cert: CertifiedMasses | None = None) -> str:
    """The text block of one length: the numbers of ``report.to_dict()`` (``digits``
    significant digits), with the Arb balls of ``cert`` beside them when certified."""
    j = report.to_dict()
    n = j["digits"]

    def ball(x: Any) -> str:  # Arb widens the radius to cover the rounded midpoint
        return "" if cert is None else f"   ball {x.str(n, radius=True)}"

    c = cert
    lines = [
        f"{j['encoding']} {j['params']}  W = {j['window']}  l = {j['length']}  "
        f"B = {_num_text(j['score_bound'])}  ({j['digits']} significant digits)",
        f"  window mass   M = {j['window_mass']}{ball(c and c.window_mass)}",
        f"  distant mass  D = {j['distant_mass']}{ball(c and c.distant_mass)}",
        f"  M bracket (|s| <= B): [{j['window_mass_bracket'][0]}, {j['window_mass_bracket'][1]}]",
        f"  D bracket (|s| <= B): [{j['distant_mass_bracket'][0]}, "
        f"{j['distant_mass_bracket'][1]}]",
    ]
    if cert is not None and cert.score_bound > 0:
        cj = cert.to_dict(n)  # a dict: the outward-rounded enclosures
        for key, name in (("window_mass_bracket_ball", "M"), ("distant_mass_bracket_ball", "D")):
            lines.append(f"  {name} bracket certified (|s| <= B, outward): "
                         f"[{cj[key][0]}, {cj[key][1]}]")
    if j["series_bracket"]:
        for key, (lo, hi) in j["series_bracket"].items():
            lines.append(f"  M {key} bracket (B = 0): [{lo}, {hi}]")
    if j["limit_window_mass"] is None:
        lines.append("  limit M_inf(W) = unknown (no tail stated: nothing is known beyond "
                     "the given values)")
    else:
        lines.append(
            f"  limit M_inf(W) = {j['limit_window_mass']}{ball(c and c.limit_window_mass)}"
        )
    if cert is not None:
        lines.append(f"  certified: Arb balls, >= {cert.prec} bits relative ({cert.method})")
    lines.append(f"  class: {j['class']} (rate {j['rate']})")
    if j["summation"]:
        lines.append(f"  summation: {j['summation']}")
    return "\n".join(lines)

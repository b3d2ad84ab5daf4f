"""``python -m priors.margin``: the margin selection of docs/theory.md §7 on the command line.

Parses the options, validates every setting before computing any (so nothing is printed
half-way), calls ``select_margin`` once per setting of ``--window x --lmax x --tol`` and
prints ``format_result`` (one setting), ``format_table`` (several) or the JSON of
``MarginResult.to_dict``. Errors follow the ``priors.cli`` contract: bad input is one line
naming the option and exit status 2; a missing python-flint is one line and status 1.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence

from priors.cli import OutputError, Parser, UsageError, emit, run
from priors.margin.format import format_result, format_table
from priors.margin.select import select_margin
from priors.margin.validate import (
    MAX_EVALUATIONS,
    MarginInputError,
    as_budget,
    validate_inputs,
)

__all__ = ["main"]

#: The option that sets each parameter a ``MarginInputError`` can name.
_FLAGS = {
    "window": "--window",
    "lmin": "--lmin",
    "lmax": "--lmax",
    "growth_tol": "--tol",
    "score_bound": "--score-bound",
    "dps": "--dps",
    "max_evaluations": "--max-evaluations",
}


def _build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m priors.margin",
        description=(
            "Select the smallest exponent margin delta* such that every log-distance prior "
            "with alpha >= 1 + delta* grows its distant mass by at most tol over [L0, L1] "
            "(docs/theory.md §7). Several values of --window/--lmax/--tol give a table."
        ),
    )
    p.add_argument("--window", nargs="+", required=True, metavar="W", help="window size(s)")
    p.add_argument("--lmax", nargs="+", required=True, metavar="L1", help="longest length(s)")
    p.add_argument("--tol", nargs="+", required=True, metavar="TAU", help="tolerance(s) in (0,1)")
    p.add_argument("--lmin", default=None, metavar="L0", help="shortest length (default: W)")
    p.add_argument("--score-bound", default="0", metavar="B", help="content-score bound B >= 0")
    p.add_argument("--dps", default="30", metavar="N", help="working precision in digits")
    p.add_argument("--certify", action="store_true", help="print ball enclosures of everything")
    p.add_argument(
        "--max-evaluations", default=str(MAX_EVALUATIONS), metavar="N",
        help=f"budget of growth evaluations per setting (default {MAX_EVALUATIONS})",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; returns the exit status (0 ok, 2 bad input, 1 missing python-flint or
    unwritable output; the ``priors.cli`` contract)."""
    return run("margin", _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        dps_text = args.dps.strip()
        if not dps_text.lstrip("+-").isdigit():
            raise MarginInputError("dps", f"must be an integer, got {args.dps!r}")
        dps = int(dps_text)
        budget = as_budget(args.max_evaluations)
        settings = list(itertools.product(args.window, args.lmax, args.tol))
        for w, l1, tol in settings:  # validate everything before computing anything
            validate_inputs(w, l1, tol, args.lmin, args.score_bound, dps)
        results = [
            select_margin(
                w, l1, tol, lmin=args.lmin, score_bound=args.score_bound, dps=dps,
                certify=args.certify, max_evaluations=budget,
            )
            for w, l1, tol in settings
        ]
    except MarginInputError as exc:
        raise UsageError(f"{_FLAGS[exc.argument]}: {exc.detail}") from None
    except ImportError as exc:
        raise OutputError(str(exc)) from None  # one line, exit 1
    if args.json:
        payload = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
        emit(json.dumps(payload, indent=1))
    elif len(results) == 1:
        emit(format_result(results[0]))
    else:
        emit(format_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

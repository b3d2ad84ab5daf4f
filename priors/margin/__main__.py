"""``python -m priors.margin``: the margin selection of docs/theory.md §7 on the command line.

Parses the options with the readers every door shares (``priors.cli``: ASCII decimals,
integers parsed exactly, a ``--tol`` or ``--score-bound`` that float64 would round refused,
the caps of ``priors.validation``), validates every setting before computing any (so
nothing is printed half-way), calls ``select_margin`` once per setting of
``--window x --lmax x --tol`` and prints ``format_result`` (one setting), ``format_table``
(several) or the JSON of ``MarginResult.to_dict``. Errors follow the ``priors.cli``
contract: bad input is one line naming the option and exit status 2; a missing
python-flint is one line and status 1.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence

from priors.cli import (
    OutputError,
    Parser,
    UsageError,
    argtype,
    count,
    emit,
    real,
    run,
    score_bound,
)
from priors.margin.format import format_result, format_table
from priors.margin.select import select_margin
from priors.margin.validate import DPS_MAX, MAX_EVALUATIONS, MarginInputError, validate_inputs

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


_length = argtype(lambda text: count(text, minimum=1))
_tol = argtype(lambda text: real(text, exact=True))


def _build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m priors.margin",
        description=(
            "Select the smallest exponent margin delta* such that every log-distance prior "
            "with alpha >= 1 + delta* grows its distant mass by at most tol over [L0, L1] "
            "(docs/theory.md §7). Several values of --window/--lmax/--tol give a table."
        ),
    )
    p.add_argument("--window", nargs="+", required=True, type=_length, metavar="W",
                   help="window size(s)")
    p.add_argument("--lmax", nargs="+", required=True, type=_length, metavar="L1",
                   help="longest length(s)")
    p.add_argument("--tol", nargs="+", required=True, type=_tol, metavar="TAU",
                   help="tolerance(s) in (0,1)")
    p.add_argument("--lmin", default=None, type=_length, metavar="L0",
                   help="shortest length (default: W)")
    p.add_argument("--score-bound", default="0", type=argtype(score_bound), metavar="B",
                   help="content-score bound B >= 0")
    p.add_argument("--dps", default="30", type=argtype(lambda t: count(t, maximum=DPS_MAX)),
                   metavar="N", help="working precision in digits")
    p.add_argument("--certify", action="store_true", help="print ball enclosures of everything")
    p.add_argument(
        "--max-evaluations", default=str(MAX_EVALUATIONS), metavar="N",
        type=argtype(lambda t: count(t, minimum=1)),
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
        settings = list(itertools.product(args.window, args.lmax, args.tol))
        for w, l1, tol in settings:  # validate everything before computing anything
            validate_inputs(w, l1, tol, args.lmin, args.score_bound, args.dps)
        results = [
            select_margin(
                w, l1, tol, lmin=args.lmin, score_bound=args.score_bound, dps=args.dps,
                certify=args.certify, max_evaluations=args.max_evaluations,
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

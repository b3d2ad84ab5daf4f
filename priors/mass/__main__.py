"""Command line: window and distant masses, brackets and class of a positional prior.

    python -m priors.mass --encoding log-distance --alpha 1.1 --window 512 --length 65536

Several ``--length`` values at once (``--length 4096 65536 1e15``), ``--score-bound B``
(docs/theory.md §5 content-score brackets), ``--dps`` (digits of every number printed), and
``--json`` (one object per length with the keys ``encoding, params, window, length,
window_mass, distant_mass, window_mass_bracket, distant_mass_bracket, series_bracket,
limit_window_mass, class, rate, evidence, summation, score_bound, dps, digits``; a list
when several lengths are asked; numbers are decimal strings with ``digits`` significant
digits; ``limit_window_mass`` is null when the limit is unknown, a user bias with no
stated tail). Bad input: one line on stderr, exit status 2 (``priors.cli``); integers
are parsed exactly, real parameters must be float64 numbers as written (at most 17
significant digits), ``--dps`` lies in [5, 1000], files are read up to 16 MiB.

Per-encoding parameters: ``--slope`` (alibi), ``--alpha`` (log-distance), ``--r1 --r2``
(kerple-log, kerple-power), ``--rho`` (causal-ot), ``--num-buckets --max-distance
--table FILE`` (t5), ``--dim --base --scale --compress`` (sandwich), ``--values FILE
--tail --tail-exponent`` (user). FILE holds whitespace- or comma-separated numbers (or a
JSON list).

``--certify`` (rigorous mode, docs/theory.md §5; nope, alibi, log-distance, kerple-log, t5):
the masses are also computed in Arb ball arithmetic (``priors.certified``) at
``ceil(dps log2 10) + 24`` bits; the text output prints each enclosure beside the value,
``[mid +/- rad]`` from ``arb.str(digits, radius=True)`` (Arb widens the radius to cover
the rounding of the midpoint, so the printed ball still encloses), and the JSON adds
``window_mass_ball, distant_mass_ball, limit_window_mass_ball, window_mass_bracket_ball,
distant_mass_bracket_ball`` as ``[lower, upper]`` decimal strings with ``digits``
significant digits rounded outwards (``priors.certified.outward_decimal``: Arb's rigorous
decimal ball, then ``decimal`` rounding towards -inf / +inf), plus ``prec``,
``certify_method`` and ``certified: true`` (``certified: false`` without ``--certify``).
Another encoding with ``--certify`` is bad input (exit 2).

This module parses the arguments and builds the encoding; the numbers come from the
library ``priors.mass`` (``mass_report``) and ``priors.certified``, the printed text and
JSON records from ``priors.mass.format``. Imports neither torch, sympy, matplotlib nor
scipy (``--certify`` adds python-flint only).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from priors.cli import (
    Parser,
    UsageError,
    argtype,
    count,
    echo,
    emit,
    read_text,
    real,
    run,
    score_bound,
)
from priors.validation import DPS_MAX, DPS_MIN, SCORE_CAP_TEXT

__all__ = ["main"]

PROG = "priors.mass"
#: Largest file read by --table / --values (bytes).
FILE_LIMIT = 1 << 24

_PARAMS: dict[str, tuple[str, ...]] = {
    "nope": (),
    "alibi": ("slope",),
    "log-distance": ("alpha",),
    "kerple-log": ("r1", "r2"),
    "kerple-power": ("r1", "r2"),
    "t5": ("num_buckets", "max_distance", "table"),
    "sandwich": ("dim", "base", "scale", "compress"),
    "causal-ot": ("rho",),
    "user": ("values", "tail", "tail_exponent"),
}
_REQUIRED = {"t5": ("table",), "user": ("values",)}


_real = argtype(lambda t: real(t, exact=True))
_dps = argtype(lambda t: count(t, minimum=DPS_MIN, maximum=DPS_MAX))
_count = argtype(count)
_positive_count = argtype(lambda t: count(t, minimum=1))


def _parser() -> Parser:
    p = Parser(
        prog="python -m priors.mass",
        description="Window/distant masses, brackets and class of a positional prior "
        "(docs/theory.md §5-§6).",
    )
    p.add_argument("--encoding", required=True, choices=sorted(_PARAMS))
    p.add_argument("--window", required=True, type=_positive_count,
                   help="window size W (keys d < W)")
    p.add_argument(
        "--length", required=True, type=_positive_count, nargs="+",
        help="query length(s) l >= W, up to 1e18",
    )
    p.add_argument("--score-bound", type=argtype(score_bound), default=0.0,
                   help=f"content-score bound 0 <= B <= {SCORE_CAP_TEXT} (default 0)")
    p.add_argument("--dps", type=_dps, default=30,
                   help=f"decimal digits, {DPS_MIN} to {DPS_MAX} (default 30)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--certify",
        action="store_true",
        help="also print guaranteed Arb ball enclosures (nope, alibi, log-distance, "
        "kerple-log, t5)",
    )
    _add_encoding_options(p.add_argument_group(
        "encoding parameters (defaults used when not given)"
    ))
    return p


def _encoding_options() -> list[tuple[str, dict[str, Any], str]]:
    """``(flag, add_argument keywords, help)`` of every encoding parameter, with the
    defaults the encodings use when the option is not given."""
    from priors.encodings import ALiBi, CausalOTPrior, KerpleLog, KerplePower, LogDistance

    real: dict[str, Any] = {"type": _real}
    whole: dict[str, Any] = {"type": _count}
    file: dict[str, Any] = {"metavar": "FILE"}
    return [
        ("--slope", real, f"alibi: slope m > 0 (b(d) = -m d; default {ALiBi.slope!r})"),
        ("--alpha", real, "log-distance exponent alpha >= 0 (b(d) = -alpha ln(1+d); default "
         f"{LogDistance.alpha!r})"),
        ("--r1", real, "kerple-log / kerple-power: r1 > 0 (b(d) = -r1 ln(1 + r2 d), resp. "
         f"-r1 d^r2; default {KerpleLog.r1!r}, resp. {KerplePower.r1!r})"),
        ("--r2", real, "kerple-log: r2 > 0; kerple-power: exponent 0 < r2 <= 2 (default "
         f"{KerpleLog.r2!r}, resp. {KerplePower.r2!r})"),
        ("--rho", real, "causal-ot: rho in [0, 1) (b ~ -rho ln d for d << l; default "
         f"{CausalOTPrior.rho!r})"),
        ("--num-buckets", whole, "t5: number of buckets (default 32)"),
        ("--max-distance", whole, "t5: max_distance, where the log-spaced buckets end "
         "(default 128)"),
        ("--table", file, "t5: FILE with the num_buckets learned biases (one head)"),
        ("--dim", whole, "sandwich: embedding dimension (even, default 128)"),
        ("--base", real, "sandwich: frequency base > 1 (w_i = base^(-2i/dim); default 10000)"),
        ("--scale", real, "sandwich: bias scale > 0 (default 1)"),
        ("--compress", real, "sandwich: position compression ratio >= 1 (default 1)"),
        ("--values", file, "user: FILE with the bias values b(0), ..., b(m-1)"),
        ("--tail", {"choices": ("none", "constant", "power")},
         "user: stated bias beyond the given values (default none: no continuation)"),
        ("--tail-exponent", real,
         "user: exponent p of the power tail (weights ~ (1+d)^-p beyond the values)"),
    ]


def _add_encoding_options(group: Any) -> None:
    for flag, keywords, text in _encoding_options():
        group.add_argument(flag, help=text, **keywords)


def _read_numbers(path: str, name: str) -> list[float]:
    option = "--" + name
    text = read_text(path, option, limit=FILE_LIMIT).strip()
    try:
        if text.startswith("["):
            # numbers kept as their text: no silent rounding to inf or to float64
            raw = json.loads(text, parse_float=str, parse_int=str, parse_constant=str)
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                raise ValueError
            items = raw
        else:
            items = text.replace(",", " ").split()
        values = [real(v) for v in items]
    except (ValueError, TypeError, RecursionError) as exc:
        detail = f": {exc}" if str(exc) else ""
        raise ValueError(
            f"{option}: {echo(path)} does not hold a list of finite numbers{detail}"
        ) from None
    if not values:
        raise ValueError(f"{option}: {echo(path)} is empty")
    return values


def build_encoding(args: argparse.Namespace) -> Any:
    """The encoding named by ``args.encoding`` with its parameters (``ValueError`` on misuse)."""
    from priors.encodings import ENCODINGS

    allowed = _PARAMS[args.encoding]
    kwargs: dict[str, Any] = {}
    for names in _PARAMS.values():
        for name in names:
            value = getattr(args, name)
            if value is None:
                continue
            flag = "--" + name.replace("_", "-")
            if name not in allowed:
                raise ValueError(f"{flag} does not apply to --encoding {args.encoding}")
            kwargs[name] = value
    for name in _REQUIRED.get(args.encoding, ()):
        if name not in kwargs:
            raise ValueError(f"--{name} FILE is required for --encoding {args.encoding}")
    if "table" in kwargs:
        kwargs["table"] = _read_numbers(kwargs["table"], "table")
    if "values" in kwargs:
        kwargs["values"] = _read_numbers(kwargs["values"], "values")
    return ENCODINGS[args.encoding](**kwargs)


def _main(argv: Sequence[str] | None) -> int:
    from priors.encodings.base import FewerDigitsWarning
    from priors.mass import mass_report
    from priors.mass.format import format_text, json_record

    args = _parser().parse_args(argv)
    enc = build_encoding(args)
    if args.certify:
        from priors.certified import check_certifiable

        check_certifiable(enc)  # before any work
    with warnings.catch_warnings():
        # the digits a float64-backed or bound-limited sum carries are printed as
        # `digits`: say so in the output, do not warn about it
        warnings.simplefilter("ignore", FewerDigitsWarning)
        reports = [
            mass_report(enc, args.window, n, score_bound=args.score_bound, dps=args.dps)
            for n in args.length
        ]
    certs: list[Any] = [None] * len(reports)
    if args.certify:
        from priors.certified import certified_masses, prec_for_digits

        certs = [
            certified_masses(
                enc, r.window, r.length, score_bound=r.score_bound,
                prec=prec_for_digits(r.digits),
            )
            for r in reports
        ]
    pairs = list(zip(reports, certs, strict=True))
    if args.json:
        out = [json_record(r, c) for r, c in pairs]
        emit(json.dumps(out[0] if len(out) == 1 else out, indent=2))
    else:
        emit("\n".join(format_text(r, c) for r, c in pairs))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input, one line on stderr; see
    ``priors.cli`` for a closed pipe and a full disk)."""
    return run(PROG, _main, argv, bad_input=(UsageError, ValueError))


if __name__ == "__main__":
    sys.exit(main())

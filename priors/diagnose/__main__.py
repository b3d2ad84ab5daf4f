"""Command line: ``python -m priors.diagnose PATH`` (see ``priors.diagnose`` and
docs/diagnose.md).

Without ``--measure`` it imports neither torch nor transformers (a single-file PyTorch
``pytorch_model.bin`` holding T5 tables is the one exception: reading it needs torch).
Bad input, unsupported families and broken files: one line on stderr, exit status 2,
nothing written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence

__all__ = ["main"]


class _BadInput(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        raise _BadInput(message)


def _count(text: str) -> int:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if value != value or value in (float("inf"), float("-inf")) or value != int(value):
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    if value > 1e18:
        raise argparse.ArgumentTypeError(f"must be <= 1e18: {text!r}")
    return int(value)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc


def _parser() -> _Parser:
    from priors.diagnose.report import DEFAULT_LENGTHS, DEFAULT_WINDOW

    p = _Parser(
        prog="python -m priors.diagnose",
        description="Per-head positional priors of a local Hugging Face checkpoint: class, "
        "exact window/distant masses, Theorem 3 brackets, and (--measure) the theorem "
        "checked on the model's attention. Nothing is downloaded.",
    )
    p.add_argument("path", help="model directory (config.json [+ weights]) or a config.json")
    p.add_argument("--window", type=_count, default=DEFAULT_WINDOW,
                   help=f"window W: keys at distances d < W (default {DEFAULT_WINDOW})")
    p.add_argument("--length", type=_count, nargs="+", default=list(DEFAULT_LENGTHS),
                   help="query lengths l >= W, up to 1e18 (default 4096 65536 1e6 1e9 1e15)")
    p.add_argument("--score-bound", type=_number, default=0.0,
                   help="content-score bound B: print Theorem 3's brackets")
    p.add_argument("--tol", type=_number, help="growth tolerance of the distant mass")
    p.add_argument("--lmin", type=_count, help="L0 of the growth test (default W)")
    p.add_argument("--dps", type=int, default=30, help="significant digits computed (30)")
    p.add_argument("--digits", type=int, default=6, help="digits printed in the text (6)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE", help="draw distant mass against length per head")
    g = p.add_argument_group("measurement (needs torch and transformers)")
    g.add_argument("--measure", action="store_true",
                   help="run the model (eager attention) and check Theorem 3 per row")
    g.add_argument("--measure-length", type=_count, nargs="+", default=[1024],
                   help="sequence lengths to run (default 1024)")
    g.add_argument("--text", metavar="FILE", help="text to tokenize instead of random ids")
    g.add_argument("--seed", type=int, default=0, help="seed of the random ids (0)")
    return p


def _write_plot(diag: object, file: str) -> None:
    from priors.diagnose.plot import plot_distant_mass

    directory = os.path.dirname(os.path.abspath(file)) or "."
    if not os.path.isdir(directory):
        raise ValueError(f"--plot: directory {directory!r} does not exist")
    suffix = os.path.splitext(file)[1] or ".png"
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=suffix)
    os.close(fd)
    try:
        plot_distant_mass(diag, tmp)
        os.replace(tmp, file)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input, one line on stderr)."""
    try:
        args = _parser().parse_args(argv)
        if args.digits < 1:
            raise ValueError(f"--digits must be >= 1, got {args.digits}")
        if args.lmin is not None and args.tol is None:
            raise ValueError("--lmin only applies with --tol")
        if args.plot is not None:
            try:
                import matplotlib  # noqa: F401  (checked before any work)
            except ImportError as exc:
                raise ValueError("--plot needs matplotlib (pip install matplotlib)") from exc
        from priors.diagnose import diagnose

        diag = diagnose(
            args.path,
            window=args.window,
            lengths=args.length,
            score_bound=args.score_bound,
            dps=args.dps,
            tol=args.tol,
            lmin=args.lmin,
        )
        if args.measure:
            from priors.diagnose.measure import measure

            diag.measurement = measure(
                args.path, diag.model, args.measure_length, diag.window,
                text=args.text, seed=args.seed,
            )
        elif args.text is not None:
            raise ValueError("--text only applies with --measure")
        text = json.dumps(diag.to_json(), indent=2) if args.json else diag.to_text(args.digits)
        if args.plot is not None:
            _write_plot(diag, args.plot)
    except (_BadInput, ValueError) as exc:
        msg = " ".join(str(exc).split())
        print(f"priors.diagnose: error: {msg}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

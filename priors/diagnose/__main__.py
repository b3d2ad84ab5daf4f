"""Command line: ``python -m priors.diagnose PATH`` (see ``priors.diagnose`` and
docs/diagnose.md).

Without ``--measure`` it imports neither torch nor transformers (a single-file PyTorch
``pytorch_model.bin`` holding T5 tables is one exception: reading it needs torch; a T5
bucket boundary within one float32 unit of torch's log is the other, decided by torch's
own log when it is installed). Bad input, unsupported families and broken files: one line
on stderr, exit status 2, nothing written. ``--measure`` exits with status 1 when the
check fails (a row outside Theorem 3's bracket, or keys masked differently from the
prior); an inconclusive check (no row could be checked) is printed as such, status 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from priors.cli import (
    Parser,
    UsageError,
    argtype,
    atomic_output,
    check_output_file,
    count,
    emit,
    progress,
    read_text,
    real,
    run,
)
from priors.diagnose.config import INSTALL_HINT

__all__ = ["main"]


PROG = "priors.diagnose"


_count = argtype(lambda t: count(t, minimum=1))
_number = argtype(real)
_int = argtype(lambda t: count(t, maximum=2**31))


def _dps(text: str) -> int:
    from priors.diagnose.report import DPS_RANGE

    lo, hi = DPS_RANGE
    value = argtype(lambda t: count(t, maximum=10**9))(text)
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"must lie in [{lo}, {hi}], got {value}")
    return value


def _parser() -> Parser:
    from priors.diagnose.report import DEFAULT_LENGTHS, DEFAULT_WINDOW

    p = Parser(
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
    p.add_argument("--dps", type=_dps, default=30,
                   help="significant digits computed, in [15, 200] (30)")
    p.add_argument("--digits", type=_int, help="digits printed in the text (6, at most --dps)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE", help="draw distant mass against length per head")
    p.add_argument("--plot-log", action="store_true",
                   help="log scale for the distant mass in --plot (tiny ALiBi masses show)")
    g = p.add_argument_group("measurement (needs torch and transformers)")
    g.add_argument("--measure", action="store_true",
                   help="run the model (eager attention) and check Theorem 3 per row")
    g.add_argument("--measure-length", type=_count, nargs="+", default=[1024],
                   help="sequence lengths to run (default 1024)")
    g.add_argument("--text", metavar="FILE", help="text to tokenize instead of random ids")
    g.add_argument("--seed", type=_int, default=0, help="seed of the random ids (0)")
    return p


def _plot_suffixes() -> tuple[str, ...]:
    """The file endings matplotlib's Agg canvas can write (``.png``, ``.pdf``, ``.svg``...)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return tuple(f".{k}" for k in FigureCanvasAgg(Figure()).get_supported_filetypes())


def _write_plot(diag: object, file: str, *, log: bool, suffixes: tuple[str, ...]) -> None:
    """Draw into ``file`` through a temporary file renamed over it (``atomic_output``:
    only a regular file is ever replaced)."""
    from priors.diagnose.plot import draw

    with atomic_output(file, "--plot", suffixes=suffixes) as tmp:
        draw(diag, str(tmp), log_scale=log)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    digits = min(6, args.dps) if args.digits is None else args.digits
    if not 1 <= digits <= args.dps:
        raise ValueError(f"--digits must lie in [1, --dps = {args.dps}], got {digits}")
    if args.plot_log and args.plot is None:
        raise ValueError("--plot-log only applies with --plot")
    if args.lmin is not None and args.tol is None:
        raise ValueError("--lmin only applies with --tol")
    if args.text is not None and not args.measure:
        raise ValueError("--text only applies with --measure")
    if args.measure:
        try:
            import torch  # noqa: F401  (checked before any work)
            import transformers  # noqa: F401
        except ImportError as exc:
            raise ValueError(f"--measure needs torch and transformers ({INSTALL_HINT})") from exc
    suffixes: tuple[str, ...] = ()
    if args.plot is not None:  # checked before any work: the output and matplotlib
        try:
            suffixes = _plot_suffixes()
        except ImportError as exc:
            raise ValueError(f"--plot needs matplotlib ({INSTALL_HINT})") from exc
        check_output_file(args.plot, "--plot", suffixes=suffixes)
    text = None if args.text is None else read_text(args.text, "--text")
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
            text=text, text_name=args.text or "", seed=args.seed,
            progress=lambda line: progress(PROG, line),
        )
    report = diag.to_json(indent=2) if args.json else diag.to_text(digits)
    if args.plot is not None:
        _write_plot(diag, args.plot, log=args.plot_log, suffixes=suffixes)
    emit(report)
    return 1 if diag.measurement is not None and diag.measurement.verdict == "fail" else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input, one line on stderr; see
    ``priors.cli`` for a closed pipe and a full disk)."""
    return run(PROG, _main, argv, bad_input=(UsageError, ValueError))


if __name__ == "__main__":
    sys.exit(main())

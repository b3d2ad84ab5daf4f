"""``python -m proofs_check.extrapolation``: train, evaluate, write results (and fig7).

The command-line contract of ``priors.cli``: bad input is one line
``python -m proofs_check.extrapolation: error: MESSAGE`` on stderr and exit status 2; a
reader that goes away ends the command quietly; a full disk is one line and status 1.
Progress goes to stderr, the table (or ``--json``) to stdout; the results file is written
atomically to ``--out``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from priors.cli import (
    Parser,
    UsageError,
    argtype,
    check_output_dir,
    check_output_file,
    count,
    echo,
    emit,
    run,
)

__all__ = ["main"]

PROG = "python -m proofs_check.extrapolation"

_positive = argtype(lambda t: count(t, minimum=1, maximum=10**9))


def _variants(text: str) -> tuple:
    from proofs_check.extrapolation.variants import parse_variants

    return parse_variants(t.strip() for t in text.split(",") if t.strip())


def _seeds(text: str) -> tuple[int, ...]:
    out = tuple(count(t.strip(), maximum=2**31) for t in text.split(",") if t.strip())
    if not out:
        raise ValueError(f"empty list: {echo(text)}")
    if len(set(out)) != len(out):
        raise ValueError(f"seeds must be distinct: {echo(text)}")
    return out


def _parser() -> Parser:
    p = Parser(prog=PROG, description="Length-extrapolation experiment: does the prior "
               "(docs/theory.md §5, §7) predict how a trained model extrapolates?")
    p.add_argument("--quick", action="store_true", help="the quick preset")
    p.add_argument("--variants", type=argtype(_variants), help="comma-separated variant "
                   "names (default: the preset's)")
    p.add_argument("--seeds", type=argtype(_seeds), help="comma-separated seeds")
    p.add_argument("--steps", type=_positive, help="training steps per run")
    p.add_argument("--windows", type=_positive, help="held-out windows (paired design)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    p.add_argument("--threads", type=_positive, default=1, help="torch CPU threads")
    p.add_argument("--jobs", type=_positive, default=1,
                   help="runs in parallel processes (one thread each); e.g. 2 on 2 cores")
    p.add_argument("--cache-dir", help="corpus cache and checkpoints (default ~/.cache/...)")
    p.add_argument("--cached-only", action="store_true",
                   help="train nothing: summarise the finished runs in the cache (partial)")
    p.add_argument("--corpus-root", help="a directory of .py files instead of the stdlib")
    p.add_argument("--out", help="results JSON (written atomically)")
    p.add_argument("--figure", help="also draw fig7 to this path (png or pdf)")
    p.add_argument("--json", action="store_true", help="print the results JSON")
    p.add_argument("--details", action="store_true",
                   help="also print per-head masses and the Theorem 3 bracket statistics")
    return p


def _device(text: str) -> str:
    """``cpu`` or an available ``cuda[:i]``; anything else is bad input."""
    import torch

    try:
        dev = torch.device(text)
    except RuntimeError as exc:
        raise UsageError(f"--device: {exc}") from None
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"--device: must be cpu or cuda[:N], got {echo(text)}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is available")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device: no CUDA device {dev.index} "
                             f"({torch.cuda.device_count()} available)")
    return str(dev)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    import torch

    from proofs_check.extrapolation.experiment import (
        FULL,
        QUICK,
        run_experiment,
        with_overrides,
    )
    from proofs_check.extrapolation.predictions import check_predictions
    from proofs_check.extrapolation.results import (
        format_details,
        format_table,
        write_json_atomic,
    )

    try:
        cfg = with_overrides(QUICK if args.quick else FULL, variants=args.variants,
                             seeds=args.seeds, steps=args.steps, n_windows=args.windows)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    device = _device(args.device)
    if args.out is not None:
        check_output_file(args.out, "--out")
    if args.figure is not None:
        from proofs_check.extrapolation.figure import FIGURE_SUFFIXES

        check_output_file(args.figure, "--figure", suffixes=FIGURE_SUFFIXES)
    if args.cache_dir is not None:
        check_output_dir(args.cache_dir, "--cache-dir")
    torch.set_num_threads(args.threads)
    results = run_experiment(cfg, device=device, cache_dir=args.cache_dir,
                             corpus_root=args.corpus_root, jobs=args.jobs,
                             cached_only=args.cached_only)
    predictions = check_predictions(results)
    results["predictions"] = [asdict(p) for p in predictions]
    if args.out is not None:
        write_json_atomic(results, args.out, "--out")
    if args.figure is not None:
        from proofs_check.extrapolation.figure import fig7

        fig7(results, args.figure, "--figure")
    if args.json:
        emit(json.dumps(results, indent=1))
        return 0
    emit(format_table(results))
    if args.details:
        emit(format_details(results))
    emit("predictions (docs/theory.md §5, §7; margins 3 se, see predictions.py):")
    for p in predictions:
        emit("  " + p.line())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input, one line on stderr)."""
    from proofs_check.extrapolation.experiment import ExperimentInputError

    return run(PROG, _main, argv, bad_input=(UsageError, ExperimentInputError))

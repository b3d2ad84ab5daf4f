"""``python -m proofs_check.extrapolation``: train, evaluate, write results (and fig7).

Bad input: one line on stderr, exit status 2 (the pattern of ``priors.mass``). Progress
goes to stderr, the table (or ``--json``) to stdout; the results file is written
atomically to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

__all__ = ["main"]

PROG = "python -m proofs_check.extrapolation"


class _BadInput(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        raise _BadInput(message)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def _names(text: str) -> tuple[str, ...]:
    out = tuple(t.strip() for t in text.split(",") if t.strip())
    if not out:
        raise argparse.ArgumentTypeError(f"empty list: {text!r}")
    return out


def _seeds(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(t) for t in _names(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"seeds must be integers: {text!r}") from exc
    if any(s < 0 for s in out) or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"seeds must be distinct and >= 0: {text!r}")
    return out


def _parser() -> _Parser:
    p = _Parser(prog=PROG, description="Length-extrapolation experiment: does the prior's "
                "class (docs/theory.md §5, §7) predict how a trained model extrapolates?")
    p.add_argument("--quick", action="store_true", help="the ~10-minute preset")
    p.add_argument("--variants", type=_names, help="comma-separated variant names "
                   "(default: the preset's)")
    p.add_argument("--seeds", type=_seeds, help="comma-separated seeds (default 0,1,2)")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input, one line on stderr)."""
    import torch

    from proofs_check.extrapolation.experiment import (
        FULL,
        QUICK,
        ExperimentInputError,
        run_experiment,
        with_overrides,
    )
    from proofs_check.extrapolation.results import (
        format_details,
        format_table,
        write_json_atomic,
    )

    try:
        args = _parser().parse_args(argv)
        cfg = with_overrides(QUICK if args.quick else FULL, variants=args.variants,
                             seeds=args.seeds, steps=args.steps, n_windows=args.windows)
        try:
            dev = torch.device(args.device)
        except RuntimeError as exc:
            raise ValueError(f"--device: {exc}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available")
    except (_BadInput, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    try:
        results = run_experiment(cfg, device=str(dev), cache_dir=args.cache_dir,
                                 corpus_root=args.corpus_root, jobs=args.jobs,
                                 cached_only=args.cached_only)
    except ExperimentInputError as exc:  # e.g. a corpus root without enough held-out bytes
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    from proofs_check.extrapolation.predictions import check_predictions

    results["predictions"] = [asdict(p) for p in check_predictions(results)]
    if args.out:
        write_json_atomic(results, args.out)
    if args.figure:
        from proofs_check.extrapolation.figure import fig7

        fig7(results, args.figure)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(format_table(results))
        if args.details:
            print(format_details(results))
        print("predictions (docs/theory.md §5, §7; margins 3 se, see predictions.py):")
        for p in check_predictions(results):
            print("  " + p.line())
    return 0

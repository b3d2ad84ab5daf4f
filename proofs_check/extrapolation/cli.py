"""``python -m proofs_check.extrapolation``: register, run, fit, check (docs/extrapolation.md).

* ``register``: the predictions of a variant set from the priors alone (and a fitted loss
  model, if given), written to ``--out`` before any run starts.
* ``run``: train, evaluate, write the results (and fig7); with ``--registered`` the
  results are checked against a registration made with the same settings.
* ``fit``: fit the loss model on the in-domain variants of a results file.
* ``check``: check a results file against a registration.

The command-line contract of ``priors.cli``: bad input is one line
``python -m proofs_check.extrapolation: error: MESSAGE`` on stderr and exit status 2,
before any work; a reader that goes away ends the command quietly; a full disk is one line
and status 1. Progress goes to stderr, tables (or ``--json``) to stdout; files are written
atomically, only over regular files, and never over a file the command reads or another
output it writes (``--out`` naming the registration is refused). A registered prediction
that fails is a result, not an error: the status stays 0.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from priors.cli import (
    ListOf,
    MapOf,
    Parser,
    Record,
    UsageError,
    argtype,
    check_output_dir,
    check_output_file,
    check_shape,
    count,
    echo,
    emit,
    read_json_file,
    run,
)

__all__ = ["main"]

PROG = "python -m proofs_check.extrapolation"

_positive = argtype(lambda t: count(t, minimum=1, maximum=10**9))
#: torch threads and worker processes: torch hangs at a million threads
_workers = argtype(lambda t: count(t, minimum=1, maximum=1024))
_RESULTS_SHAPE = Record({"config": dict, "variants": MapOf(dict)})
_REGISTRATION_SHAPE = Record({"version": str, "config": dict, "claims": list})
#: What ``fit`` reads of a results file: the design length and, of each variant it fits
#: on, the per-length dilution, change and its standard error.
_FIT_CONFIG_SHAPE = Record({"design_length": int})
_FIT_VARIANT_SHAPE = Record({"per_length": ListOf(Record(
    {"length": int, "dilution": float, "change": float, "se": float}))})
_LOSS_MODEL_SHAPE = Record(
    {"version": str, "coef": ListOf(float), "cov": ListOf(ListOf(float)), "tau": float},
    optional={"fitted_on": Record(optional={
        "variants": ListOf(str), "lengths": ListOf(int), "source_variants": ListOf(str)})})
_FILE_LIMIT = 1 << 27  # 128 MiB: a full results file is a few MB


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


def _experiment_options(p: Parser) -> None:
    p.add_argument("--preset", choices=("quick", "full", "gpu"), default="full",
                   help="quick (minutes on CPU), full (hours on CPU), gpu (for a GPU)")
    p.add_argument("--variants", type=argtype(_variants), help="comma-separated variant "
                   "names (default: the preset's)")
    p.add_argument("--seeds", type=argtype(_seeds), help="comma-separated seeds")
    p.add_argument("--steps", type=_positive, help="training steps per run")
    p.add_argument("--windows", type=_positive, help="held-out windows (paired design)")
    p.add_argument("--longest", type=_positive,
                   help="longest evaluated length (the training length times a power of 2, "
                   "up to the preset's max_context)")


def _parser() -> Parser:
    p = Parser(prog=PROG, description="Length-extrapolation experiment: does the prior "
               "(docs/theory.md §5, §7) predict how a trained model extrapolates?")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    reg = sub.add_parser("register", help="write the predictions of a variant set "
                         "before training")
    _experiment_options(reg)
    reg.add_argument("--loss-model", help="a fitted loss model (from 'fit') to predict with")
    reg.add_argument("--out", required=True, help="the registration file (JSON)")
    reg.add_argument("--json", action="store_true", help="print the registration")
    r = sub.add_parser("run", help="train, evaluate, write results")
    _experiment_options(r)
    r.add_argument("--device", default="cpu", help="torch device: cpu or cuda[:N]")
    r.add_argument("--threads", type=_workers, default=1, help="torch CPU threads (<= 1024)")
    r.add_argument("--jobs", type=_workers, default=1,
                   help="runs in parallel processes (one thread each); e.g. 2 on 2 cores")
    r.add_argument("--cache-dir", help="corpus cache and checkpoints (default ~/.cache/...)")
    r.add_argument("--cached-only", action="store_true",
                   help="train nothing: summarise the finished runs in the cache (partial)")
    r.add_argument("--corpus-root", help="a directory of .py files instead of the stdlib")
    r.add_argument("--registered", help="check the results against this registration")
    r.add_argument("--out", help="results JSON (written atomically)")
    r.add_argument("--figure", help="also draw fig7 to this path (png, pdf or svg)")
    r.add_argument("--json", action="store_true", help="print the results JSON")
    r.add_argument("--details", action="store_true",
                   help="also print per-seed changes, per-head masses and the Theorem 3 "
                   "bracket statistics")
    f = sub.add_parser("fit", help="fit the loss model on a results file")
    f.add_argument("--results", required=True, help="a results file of 'run'")
    f.add_argument("--variants", type=argtype(_variants),
                   help="the variants to fit on (default: every one in the model's domain)")
    f.add_argument("--longest", type=_positive,
                   help="the longest length fitted (default: the design length)")
    f.add_argument("--out", required=True, help="the loss model file (JSON)")
    c = sub.add_parser("check", help="check a results file against a registration")
    c.add_argument("--results", required=True, help="a results file of 'run'")
    c.add_argument("--registered", required=True, help="a registration of 'register'")
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


def _config(args: Any) -> Any:
    from proofs_check.extrapolation.experiment import PRESETS, with_overrides

    try:
        return with_overrides(PRESETS[args.preset], variants=args.variants, seeds=args.seeds,
                              steps=args.steps, n_windows=args.windows, longest=args.longest)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _file_identity(path: str) -> tuple[Any, ...]:
    """What names one file: its device and inode where it exists (hard and symbolic links
    alike), else its resolved path."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("inode", st.st_dev, st.st_ino)


def _distinct_files(named: Sequence[tuple[str, str | None]], outputs: Sequence[str]) -> None:
    """Bad input when one of the ``outputs`` options names the same file as another of the
    ``named`` options (an input it would replace, or another output it would overwrite)."""
    seen: dict[tuple[Any, ...], str] = {}
    for option, path in named:
        if not path:
            continue
        key = _file_identity(path)
        other = seen.get(key)
        if other is not None and (option in outputs or other in outputs):
            raise UsageError(f"{option} and {other} name the same file {echo(path)}; the "
                             "command would replace what it reads or writes first")
        seen.setdefault(key, option)


def _read(path: str, option: str, shape: Any) -> tuple[dict[str, Any], str]:
    """The JSON document at ``path`` and the sha256 of its bytes; bad input if missing."""
    doc = read_json_file(path, option, limit=_FILE_LIMIT, shape=shape)
    if doc is None:
        raise UsageError(f"{option}: {echo(path)} does not exist")
    with open(path, "rb") as fh:
        return doc, hashlib.sha256(fh.read()).hexdigest()


def _read_registration(path: str, option: str) -> tuple[dict[str, Any], str]:
    """The registration at ``path`` and its sha256; bad input unless every claim is one
    that ``check`` can read (``predictions.check_registration``)."""
    from proofs_check.extrapolation.predictions import check_registration

    reg, sha = _read(path, option, _REGISTRATION_SHAPE)
    try:
        check_registration(reg)
    except ValueError as exc:
        raise UsageError(f"{option}: {echo(path)} is not a registration of 'register': "
                         f"{exc}") from None
    return reg, sha


def _registration_matches(reg: dict[str, Any], cfg: Any, option: str) -> None:
    """Bad input unless ``cfg`` runs what ``reg`` registered (same settings, its variants,
    its lengths)."""
    from proofs_check.extrapolation.predictions import SAME_SETTINGS

    mine = cfg.to_dict()
    diff = [k for k in SAME_SETTINGS if reg["config"].get(k) != mine.get(k)]
    missing = set(reg["config"].get("variants", [])) - set(mine["variants"])
    lengths = set(reg["config"].get("lengths", [])) - set(mine["lengths"])
    if diff or missing or lengths:
        what = (diff and f"settings {', '.join(diff)}") or (
            missing and f"variants {', '.join(sorted(missing))}") or (
            f"lengths {', '.join(map(str, sorted(lengths)))}")
        raise UsageError(f"{option}: this run does not match the registration ({what} differ "
                         "or are missing)")


def _print_verdicts(verdicts: list[Any]) -> None:
    emit("registered predictions (docs/extrapolation.md; se = two-way bootstrap):")
    for v in verdicts:
        emit("  " + v.line())
    for kind in sorted({v.kind for v in verdicts}):
        got = [v for v in verdicts if v.kind == kind and v.holds is not None]
        emit(f"  {kind}: {sum(bool(v.holds) for v in got)} of {len(got)} hold")


def _cmd_register(args: Any) -> int:
    from proofs_check.extrapolation.lossmodel import LossModel
    from proofs_check.extrapolation.predictions import register
    from proofs_check.extrapolation.results import write_json_atomic

    cfg = _config(args)
    check_output_file(args.out, "--out")
    _distinct_files([("--loss-model", args.loss_model), ("--out", args.out)], ["--out"])
    model, sha = None, None
    if args.loss_model is not None:
        doc, sha = _read(args.loss_model, "--loss-model", _LOSS_MODEL_SHAPE)
        try:
            model = LossModel.from_dict(doc)
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--loss-model: {exc}") from None
    try:
        reg = register(cfg, loss_model=model, loss_model_sha256=sha)
        json.dumps(reg, allow_nan=False)  # every registered number finite (JSON has no inf)
    except (OverflowError, ValueError) as exc:
        if model is None:
            raise
        raise UsageError(f"--loss-model: its predictions for these variants are not finite "
                         f"numbers ({exc})") from None
    write_json_atomic(reg, args.out, "--out")
    if args.json:
        emit(json.dumps(reg, indent=1))
        return 0
    emit(f"registered {len(reg['claims'])} claims for {len(cfg.variants)} variants -> "
         f"{args.out}")
    for c in reg["claims"]:
        extra = ""
        if c["kind"] == "loss-interval":
            extra = (f" predicted {c['predicted']:+.4f}, 90% interval "
                     f"[{c['interval90'][0]:+.4f}, {c['interval90'][1]:+.4f}], Lambda "
                     f"{c['dilution']:.4f}")
        emit(f"  {c['id']:<24} {c['kind']:<15} {c['claim']}{extra}")
    return 0


def _cmd_run(args: Any) -> int:
    cfg = _config(args)
    device = _device(args.device)
    reg = reg_sha = None
    if args.registered is not None:
        reg, reg_sha = _read_registration(args.registered, "--registered")
        _registration_matches(reg, cfg, "--registered")
    if args.out is not None:
        check_output_file(args.out, "--out")
    if args.figure is not None:
        from proofs_check.extrapolation.figure import FIGURE_SUFFIXES

        check_output_file(args.figure, "--figure", suffixes=FIGURE_SUFFIXES)
    if args.cache_dir is not None:
        check_output_dir(args.cache_dir, "--cache-dir")
    _distinct_files([("--registered", args.registered), ("--out", args.out),
                     ("--figure", args.figure)], ["--out", "--figure"])
    import torch

    from proofs_check.extrapolation.experiment import run_experiment
    from proofs_check.extrapolation.results import (
        format_details,
        format_table,
        write_json_atomic,
    )

    torch.set_num_threads(args.threads)
    results = run_experiment(cfg, device=device, cache_dir=args.cache_dir,
                             corpus_root=args.corpus_root, jobs=args.jobs,
                             cached_only=args.cached_only)
    verdicts = []
    if reg is not None:
        from proofs_check.extrapolation.predictions import check

        verdicts = check(reg, results)
        results["registered"] = {"file": args.registered, "sha256": reg_sha,
                                 "verdicts": [asdict(v) for v in verdicts]}
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
    if verdicts:
        _print_verdicts(verdicts)
    return 0


def _cmd_fit(args: Any) -> int:
    from proofs_check.extrapolation.lossmodel import LossPoint, fit_loss_model, judge
    from proofs_check.extrapolation.results import write_json_atomic
    from proofs_check.extrapolation.variants import parse_variant

    check_output_file(args.out, "--out")
    _distinct_files([("--results", args.results), ("--out", args.out)], ["--out"])
    res, sha = _read(args.results, "--results", _RESULTS_SHAPE)

    def garbled(exc: ValueError) -> UsageError:
        return UsageError(f"--results: {echo(args.results)} is not a results file of 'run': "
                          f"{exc}")

    try:
        check_shape(res["config"], _FIT_CONFIG_SHAPE, "['config']")
        names = ([v.name for v in args.variants] if args.variants is not None else
                 [n for n in res["variants"] if parse_variant(n).fixed_bias])
    except ValueError as exc:
        raise garbled(exc) from None
    longest = args.longest or res["config"]["design_length"]
    points = []
    for name in names:
        v = res["variants"].get(name)
        if v is None or not parse_variant(name).fixed_bias:
            raise UsageError(f"--variants: {name!r} is not an in-domain variant of the results")
        try:
            check_shape(v, _FIT_VARIANT_SHAPE, f"['variants'][{name!r}]")
        except ValueError as exc:
            raise garbled(exc) from None
        for e in v["per_length"][1:]:
            if e["length"] <= longest:
                points.append(LossPoint(name, e["length"], e["dilution"], e["change"], e["se"]))
    lengths = sorted({p.length for p in points})
    try:
        model = fit_loss_model(points, {"source": args.results, "sha256": sha,
                                        "variants": names, "lengths": lengths,
                                        "source_variants": sorted(res["variants"])})
    except ValueError as exc:
        raise UsageError(f"--results: {exc}") from None
    write_json_atomic(model.to_dict(), args.out, "--out")
    fit = judge(model, points)
    emit(f"loss model fitted on {len(points)} points ({', '.join(names)} at "
         f"{', '.join(map(str, lengths))}) -> {args.out}")
    emit(f"  change = {model.coef[0]:+.4f} {model.coef[1]:+.4f} Lambda {model.coef[2]:+.4f} "
         f"Lambda^2 bits per byte; tau = {model.tau:.4f}")
    emit(f"  in sample: coverage of the 90% intervals {fit['coverage90']:.3f}, Spearman "
         f"{fit['spearman']:.3f}")
    return 0


def _cmd_check(args: Any) -> int:
    from proofs_check.extrapolation.predictions import check

    reg, _ = _read_registration(args.registered, "--registered")
    res, _ = _read(args.results, "--results", _RESULTS_SHAPE)
    try:
        verdicts = check(reg, res)
    except ValueError as exc:
        raise UsageError(f"--results: {exc}") from None
    except (KeyError, TypeError, IndexError, AttributeError) as exc:  # not written by run
        what = f"no key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UsageError(f"--results: {echo(args.results)} is not a results file of 'run' "
                         f"({what})") from None
    _print_verdicts(verdicts)
    return 0


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    return {"register": _cmd_register, "run": _cmd_run, "fit": _cmd_fit,
            "check": _cmd_check}[args.command](args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input, one line on stderr)."""
    from proofs_check.extrapolation.experiment import ExperimentInputError

    return run(PROG, _main, argv, bad_input=(UsageError, ExperimentInputError))

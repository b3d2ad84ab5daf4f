"""The report command: run the theorem checks and print what held (``python -m proofs_check``).

Every check registered in ``proofs_check.theorems`` (one module per statement of docs/theory.md)
is run at its ``default`` size (``--full``: the thorough sizes; the test suite uses ``ci``),
and one row per check is printed: theorem, what was measured, the measured value, the
relation and the bound or closed form it was compared with, the allowance the check grants
(``CheckResult.allowance``, JSON key ``"allowance"``), the slack, whether it held, the
precision it was computed in (``CheckResult.dtype``: the torch dtype, or the check's own,
such as ``mpmath dps 30``, which ``--dtype`` does not change), and the wall time.
Progress goes to stderr (with ``--full`` also the rows of the long streams), the table (or
``--json``) to stdout.

Each check runs with TF32 off (every float32 matmul and convolution in full IEEE precision)
and is timed by its own ``theorem_check`` (``proofs_check.result``), which restores the
caller's TF32 setting afterwards; the report prints what the check recorded (``tf32``,
``seconds``) and adds nothing of its own but the JSON header's summary.

Exit status: 0 when every selected check held, 1 when any failed (or raised: a check that
raises is reported as a failed row with the error in its details), 2 on bad arguments (one
line on stderr, nothing on stdout): an unknown check name or section, an unknown dtype, or
``--device cuda`` on a machine without CUDA.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from priors.cli import Parser, UsageError, echo, emit, run
from proofs_check.result import CheckResult, CheckSpec, make_result
from proofs_check.tf32 import tf32_enabled
from proofs_check.theorems import all_checks

__all__ = ["SIZES", "main", "run_checks", "select_checks"]

#: Which ``CheckSpec`` field gives the keyword arguments of each size.
SIZES = ("ci", "default", "full")
DTYPES = ("float64", "float32")
PROG = "proofs_check"


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description=(
            "Run the executable theorem checks of docs/theory.md and print a table: theorem, "
            "what was measured, bound, allowance, slack, holds, time. Exit 1 if any check "
            "fails."
        ),
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="run only these checks: names (see --list) or sections such as §3, §2.3 or 3",
    )
    p.add_argument("--device", default="cpu", help="torch device for the torch checks (cpu, cuda)")
    p.add_argument("--dtype", default="float64", help=f"torch dtype: {', '.join(DTYPES)}")
    p.add_argument("--full", action="store_true", help="larger sizes (a thorough, long run)")
    p.add_argument("--ci", action="store_true", help="the small sizes the test suite uses")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    return p


# --------------------------------------------------------------------------- selection


def _is_section(token: str) -> bool:
    body = token[1:] if token.startswith("§") else token
    return bool(body) and all(part.isdigit() for part in body.split("."))


def select_checks(specs: Sequence[CheckSpec], only: Sequence[str]) -> list[CheckSpec]:
    """The checks named by ``only`` (names or sections, comma-separated), in registry order.

    A section token (``§3``, ``3``, ``§2.3``) selects every check whose section is that
    section or a subsection of it. ``ValueError`` naming the token if it selects nothing.

    >>> from proofs_check.result import Measurement, theorem_check
    >>> def spec(name, section):
    ...     run = theorem_check(name, "T")(lambda: Measurement("q", 0.0, 1.0, "<="))
    ...     return CheckSpec(name=name, theorem="T", section=section, run=run)
    >>> s = [spec("a", "§2.3"), spec("b", "§3")]
    >>> [c.name for c in select_checks(s, ["§2"])], [c.name for c in select_checks(s, ["b,a"])]
    (['a'], ['a', 'b'])
    """
    if not only:
        return list(specs)
    tokens = [t.strip() for item in only for t in item.split(",") if t.strip()]
    if not tokens or any(not t.strip() for item in only for t in item.split(",")):
        raise ValueError(f"--only: empty name in {','.join(only)!r} (see --list)")
    chosen: set[str] = set()
    for token in tokens:
        if _is_section(token):
            sec = token if token.startswith("§") else "§" + token
            hits = [s.name for s in specs if s.section == sec or s.section.startswith(sec + ".")]
        else:
            hits = [s.name for s in specs if s.name == token]
        if not hits:
            known = ", ".join(s.name for s in specs)
            raise ValueError(f"--only: no check or section {token!r} (known checks: {known})")
        chosen.update(hits)
    return [s for s in specs if s.name in chosen]


# --------------------------------------------------------------------------- running


def _error_result(spec: CheckSpec, exc: BaseException, dtype: str, device: str) -> CheckResult:
    """A failed row for a check that raised: no measurement and no timing (NaN seconds).

    ``tf32=False``: the check's ``theorem_check`` (``CheckSpec`` requires one) ran its body
    with TF32 off.
    """
    return make_result(
        check=spec.name,
        theorem=spec.theorem,
        quantity="(the check raised)",
        measured=math.nan,
        reference=math.nan,
        relation="==",
        dtype=dtype if spec.torch_args else "n/a",
        device=device if spec.torch_args else "n/a",
        seconds=math.nan,
        details={"error": f"{type(exc).__name__}: {exc}"},
        tf32=False,
    )


def _say(stream: TextIO, line: str) -> None:
    """One progress line, flushed; a closed or full stderr never stops the checks."""
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def run_checks(
    specs: Sequence[CheckSpec],
    *,
    size: str = "default",
    dtype: str = "float64",
    device: str = "cpu",
    progress: TextIO | None = None,
    stream_rows: bool = False,
) -> list[CheckResult]:
    """Run ``specs`` at ``size`` (one of ``SIZES``); one result per check, as the check made it.

    Torch checks (``spec.torch_args``) get ``dtype=getattr(torch, dtype)`` and ``device``;
    checks that stream the operator's rows (``spec.progress_arg``) get
    ``progress=stream_rows``. ``progress``: where a line goes when each check starts and ends
    (None: silent). A check that raises becomes a failed result whose ``details["error"]``
    says why. TF32 and timing are the checks' own (``theorem_check``).
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    import torch

    torch_dtype = getattr(torch, dtype)
    results: list[CheckResult] = []
    for i, spec in enumerate(specs, 1):
        kwargs = dict(getattr(spec, size))
        if spec.torch_args:
            kwargs.update(dtype=torch_dtype, device=device)
        if spec.progress_arg:
            kwargs.update(progress=stream_rows)
        if progress is not None:
            _say(progress, f"[{i}/{len(specs)}] {spec.name} ({spec.section}): running")
        try:
            result = spec.run(**kwargs)
        except Exception as exc:  # reported as a failed row, never swallowed
            result = _error_result(spec, exc, dtype, device)
        results.append(result)
        if progress is not None:
            verdict = "holds" if result.holds else "FAILS"
            took = f"{result.seconds:.1f} s" if math.isfinite(result.seconds) else "raised"
            _say(progress, f"[{i}/{len(specs)}] {spec.name}: {verdict} ({took})")
    return results


# --------------------------------------------------------------------------- output


def _num(x: float) -> str:
    """4 significant digits (the table's stated precision)."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.4g}"


def _seconds(x: float) -> str:
    """A check's time to 0.1 s; ``-`` when it was not timed (it raised)."""
    return f"{x:.1f}s" if math.isfinite(x) else "-"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_table(results: Sequence[CheckResult], *, size: str, dtype: str, device: str) -> str:
    """The human-readable report: one row per check, then a summary line."""
    rows = [["check", "theorem", "measured quantity", "measured", "rel", "bound/ref",
             "allowance", "slack", "holds", "precision", "time"]]
    for r in results:
        quantity = r.quantity if len(r.quantity) <= 60 else r.quantity[:57] + "..."
        rows.append([
            r.check, r.theorem, quantity, _num(r.measured), r.relation, _num(r.reference),
            _num(r.allowance), _num(r.slack), "yes" if r.holds else "NO", r.dtype,
            _seconds(r.seconds),
        ])
    failed = [r for r in results if not r.holds]
    out = [_table(rows), ""]
    for r in failed:
        err = r.details.get("error") if isinstance(r.details, dict) else None
        out.append(f"FAILED {r.check}: " + (err or f"measured {r.measured!r} {r.relation} "
                                             f"reference {r.reference!r} (allowance "
                                             f"{r.allowance!r})"))
    total = math.fsum(r.seconds for r in results if math.isfinite(r.seconds))
    out.append(
        f"{len(results) - len(failed)}/{len(results)} checks hold; size {size}, torch dtype "
        f"{dtype}, device {device}, TF32 off; {total:.1f} s. Each row was computed in the "
        "precision its 'precision' column states (--dtype sets it for torch checks only); "
        "numbers shown to 4 significant digits (--json gives full float64); slack > 0 means "
        "the statement holds with room."
    )
    return "\n".join(out)


def _list_text(specs: Sequence[CheckSpec]) -> str:
    rows = [["check", "section", "theorem", "torch"]]
    rows += [[s.name, s.section, s.theorem, "yes" if s.torch_args else "no"] for s in specs]
    return _table(rows)


# --------------------------------------------------------------------------- CLI


def _validate_device(device: str) -> str:
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"--device: not a torch device: {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device {device}: only {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise UsageError(f"--device: only cpu and cuda are supported, got {device!r}")
    return device


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report; return the exit status (0 all hold, 1 a check failed, 2 bad input;
    a closed pipe and a full disk as in ``priors.cli``)."""
    return run(PROG, _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.full and args.ci:
        raise UsageError("--full and --ci are mutually exclusive")
    if args.dtype not in DTYPES:
        raise UsageError(f"--dtype: expected one of {', '.join(DTYPES)}, got {echo(args.dtype)}")
    device = _validate_device(args.device)  # before --list: a bad value is refused either way
    specs = all_checks()
    try:
        specs = select_checks(specs, args.only)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.list:
        if args.json:
            emit(json.dumps([{"check": s.name, "section": s.section, "theorem": s.theorem,
                              "torch": s.torch_args} for s in specs], indent=2))
        else:
            emit(_list_text(specs))
        return 0

    size = "full" if args.full else "ci" if args.ci else "default"
    start = time.perf_counter()
    # --full: the minutes-long streams (K_l up to 2^16) report their rows on stderr too
    results = run_checks(specs, size=size, dtype=args.dtype, device=device, progress=sys.stderr,
                         stream_rows=args.full)
    ok = all(r.holds for r in results)
    if args.json:
        doc = {
            "size": size,
            "dtype": args.dtype,
            "device": device,
            "tf32": any(r.tf32 for r in results),
            "tf32_restored_to": tf32_enabled(),
            "all_hold": ok,
            "seconds": time.perf_counter() - start,
            "results": [r.to_dict() for r in results],
        }
        emit(json.dumps(doc, indent=2))
    else:
        emit(format_table(results, size=size, dtype=args.dtype, device=device))
    return 0 if ok else 1

"""Benchmarks of the toolkit (not installed, not run in CI): ``python -m benchmarks``.

Each module ``benchmarks.<area>`` exposes ``run(quick: bool = False) -> list[dict]``; the
command collects them, adds end-to-end timings of the report and figure commands, describes the
machine, prints a table and writes ``benchmarks/results.json``.
"""

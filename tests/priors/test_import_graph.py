"""The import graphs of ``priors`` and ``proofs_check`` have no cycle, lazy imports inside
functions included.

The graph is read from the source (``ast``), not from ``sys.modules``: an import inside a
function counts, since it ties the two modules as much as one at the top. A negative
control runs the same check on a small package written with a cycle through a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``module -> modules of package it imports`` (every ``import`` statement)."""
    paths = {}
    for path in (root / package).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        paths[name] = path

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in paths}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                # ``from pkg import mod`` imports the module ``pkg.mod`` where there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                           for a in node.names]
            for target in targets:
                found = known(target)
                if found and found != name:
                    graph[name].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_priors_has_no_import_cycle():
    graph = import_graph(ROOT, "priors")
    assert "priors.classify" in graph and "priors.margin.select" in graph  # it read them
    assert graph["priors.encodings.base"] >= {"priors.classify", "priors.validation"}
    assert cycles(graph) == []


def test_proofs_check_has_no_import_cycle():
    graph = import_graph(ROOT, "proofs_check")
    assert "proofs_check.operators.causal_ot" in graph["proofs_check.theorems.system"]  # read
    assert cycles(graph) == []


def test_the_check_finds_a_cycle_through_a_lazy_import(tmp_path):
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "leaf.py").write_text("def f():\n    from demo.sub import user\n")
    (pkg / "sub" / "user.py").write_text("from ..leaf import f\n")
    (pkg / "other.py").write_text("import demo.leaf\n")
    assert cycles(import_graph(tmp_path, "demo")) == [["demo.leaf", "demo.sub.user"]]

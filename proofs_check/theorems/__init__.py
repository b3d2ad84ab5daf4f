"""One module per statement of docs/theory.md; each exposes ``CHECKS: tuple[CheckSpec, ...]``.

``all_checks()`` discovers them (no central list to edit when a module is added) and orders
them by docs/theory.md section, then by name.
"""

from __future__ import annotations

import importlib
import pkgutil

from proofs_check.result import CheckSpec

__all__ = ["all_checks", "get_check"]


def _section_key(spec: CheckSpec) -> tuple[tuple[int, ...], str]:
    digits = spec.section.lstrip("§").split(".")
    try:
        return tuple(int(d) for d in digits), spec.name
    except ValueError:
        return (99,), spec.name


def all_checks() -> list[CheckSpec]:
    """Every registered check, in docs/theory.md order."""
    specs: list[CheckSpec] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        specs.extend(getattr(module, "CHECKS", ()))
    names = [s.name for s in specs]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise RuntimeError(f"duplicate check names: {sorted(duplicated)}")
    return sorted(specs, key=_section_key)


def get_check(name: str) -> CheckSpec:
    """The check called ``name``; ``ValueError`` listing the known names otherwise."""
    specs = {s.name: s for s in all_checks()}
    if name not in specs:
        raise ValueError(f"unknown check {name!r}; known: {', '.join(specs)}")
    return specs[name]

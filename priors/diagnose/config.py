"""Typed reads of a ``config.json``: every value checked, every refusal one line naming the key.

A Hugging Face config is untyped JSON; a value of the wrong type must give a clear
``ValueError`` ("config: attn_config must be a JSON object, got a list"), never an
``AttributeError`` from deep inside. The readers here take the parsed dict and a key path
and return the value with its type checked, or the default when the key is absent or
``null`` (as transformers treats ``null``).

>>> cfg = {"attn_config": {"alibi_bias_max": 8}, "n_head": 4, "rope_theta": 1e4}
>>> section(cfg, "attn_config")["alibi_bias_max"], integer(cfg, "n_head", minimum=1)
(8, 4)
>>> number(cfg, "rope_theta", positive=True)
10000.0
>>> section({"attn_config": [1, 2]}, "attn_config")
Traceback (most recent call last):
...
ValueError: config: attn_config must be a JSON object, got a list
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "INSTALL_HINT",
    "MAX_LAYERS",
    "boolean",
    "first_present",
    "integer",
    "integer_list",
    "nonfinite_paths",
    "number",
    "section",
    "shown",
    "string",
]

#: Largest layer/head count read from a config (real models have at most a few hundred).
MAX_LAYERS = 2**16
#: The install line that gives every option of the command its dependencies (safetensors,
#: torch, transformers, matplotlib).
INSTALL_HINT = "pip install 'causal-ot-priors[diagnose]'"
_JSON_NAMES = {dict: "a JSON object", list: "a list", str: "a string", bool: "a boolean",
               int: "a number", float: "a number", type(None): "null"}


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to about ``limit`` characters (a config value in a message)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 12] + "..."


def _kind(value: object) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def section(cfg: dict[str, Any], key: str, name: str | None = None) -> dict[str, Any]:
    """``cfg[key]`` as a dict (``{}`` when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"config: {name or key} must be a JSON object, got {_kind(value)}")
    return value


def boolean(cfg: dict[str, Any], key: str, default: bool, name: str | None = None) -> bool:
    """``cfg[key]`` as a bool (``default`` when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"config: {name or key} must be true or false, got {shown(value)}")
    return value


def integer(
    cfg: dict[str, Any],
    key: str,
    default: int | None = None,
    *,
    minimum: int = 0,
    maximum: int = 10**18,
    name: str | None = None,
) -> int | None:
    """``cfg[key]`` as an integer in ``[minimum, maximum]`` (``default`` when absent or
    null). A float holding an integer (``4096.0``) is accepted, as transformers does."""
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValueError(f"config: {name or key} must be an integer in [{minimum}, "
                         f"{maximum:.3g}], got {shown(value)}".replace("e+", "e"))
    return value


def number(
    cfg: dict[str, Any],
    key: str,
    default: float | None = None,
    *,
    positive: bool = False,
    maximum: float | None = None,
    name: str | None = None,
) -> float | None:
    """``cfg[key]`` as a finite float (``> 0`` with ``positive``, ``<= maximum``)."""
    value = cfg.get(key)
    if value is None:
        return default
    label = name or key
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"config: {label} must be a number, got {shown(value)}")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"config: {label} must be a finite number, got {shown(value)}")
    if positive and out <= 0:
        raise ValueError(f"config: {label} must be > 0, got {shown(value)}")
    if maximum is not None and out > maximum:
        raise ValueError(f"config: {label} must be at most {maximum:g}, got {shown(value)}")
    return out


def string(cfg: dict[str, Any], key: str, default: str | None = None,
           name: str | None = None) -> str | None:
    """``cfg[key]`` as a string (``default`` when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValueError(f"config: {name or key} must be a string, got {shown(value)}")
    return value


def integer_list(cfg: dict[str, Any], key: str, length: int,
                 name: str | None = None) -> list[int] | None:
    """``cfg[key]`` as a list of ``length`` integers (``None`` when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return None
    label = name or key
    if (not isinstance(value, list) or len(value) != length
            or any(isinstance(v, bool) or not isinstance(v, int) for v in value)):
        raise ValueError(f"config: {label} must be a list of {length} integers (one per "
                         f"layer), got {shown(value)}")
    return value


def first_present(cfg: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` whose value is present and not null."""
    for key in keys:
        if cfg.get(key) is not None:
            return key
    return None


def nonfinite_paths(value: Any, path: str = "") -> list[str]:
    """Key paths of every non-finite number (``NaN``, ``Infinity``: not JSON, though
    Python's parser reads them) inside ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        return [path or "(top level)"]
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += nonfinite_paths(v, f"{path}.{k}" if path else str(k))
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            out += nonfinite_paths(v, f"{path}[{i}]")
        return out
    return []

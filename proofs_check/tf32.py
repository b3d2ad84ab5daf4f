"""TF32 state of torch: read it, and force it off for a block (checks run in full IEEE float32).

TF32 lets CUDA float32 matmuls and convolutions round their inputs to 10 mantissa bits; a
check run under it would measure TF32 round-off, not the statement. ``tf32_disabled`` turns
it off and restores the caller's setting; ``tf32_enabled`` reads the current state (what
every ``CheckResult`` records in ``tf32``). ``proofs_check.result.theorem_check`` runs
every check inside ``tf32_disabled``; nothing else in proofs_check switches TF32.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["tf32_disabled", "tf32_enabled"]


def _tf32_targets() -> list[Any]:
    """The torch backend flag objects that carry an ``fp32_precision`` (new TF32 API)."""
    import torch

    b = torch.backends
    names = [("cuda", "matmul"), ("cudnn", "conv"), ("cudnn", "rnn")]
    out = []
    for mod, sub in names:
        obj = getattr(getattr(b, mod, None), sub, None)
        if obj is not None and hasattr(obj, "fp32_precision"):
            out.append(obj)
    return out


def _legacy_state() -> tuple[bool, bool, str]:
    """``(matmul.allow_tf32, cudnn.allow_tf32, float32_matmul_precision)``.

    ``RuntimeError`` when the flags were set through a mix of torch's legacy and new
    (``fp32_precision``) APIs, which torch refuses to read back.
    """
    import torch

    b = torch.backends
    return (bool(b.cuda.matmul.allow_tf32), bool(b.cudnn.allow_tf32),
            torch.get_float32_matmul_precision())


def tf32_enabled() -> bool:
    """Whether any float32 matmul/convolution may currently use TF32 (CUDA or cuDNN)."""
    try:
        matmul, cudnn, precision = _legacy_state()
        return matmul or cudnn or precision != "highest"
    except RuntimeError:  # flags set through both APIs: resolve the new ones
        import torch

        b = torch.backends
        root = getattr(b, "fp32_precision", "none")
        cudnn_root = getattr(b.cudnn, "fp32_precision", "none")
        cudnn_root = root if cudnn_root == "none" else cudnn_root
        values = [t.fp32_precision for t in _tf32_targets()]
        values = [cudnn_root if v == "none" else v for v in values]
        return "tf32" in values


@contextmanager
def tf32_disabled() -> Iterator[None]:
    """Force TF32 off (full-precision float32 matmuls and convolutions) and restore afterwards.

    Uses torch's legacy flags (``allow_tf32`` and ``set_float32_matmul_precision``), which
    keep both the legacy and the new ``fp32_precision`` getters readable for the code
    under test. If the caller left the flags in a mixed legacy/new state (which torch
    refuses to read back through the legacy getters), the new API is used instead.
    """
    import torch

    b = torch.backends
    try:
        saved = _legacy_state()
    except RuntimeError:
        targets = _tf32_targets()
        saved_new = [t.fp32_precision for t in targets]
        try:
            for t in targets:
                t.fp32_precision = "ieee"
            yield
        finally:
            for t, value in zip(targets, saved_new, strict=True):
                t.fp32_precision = value
        return
    try:
        b.cuda.matmul.allow_tf32 = False
        b.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        yield
    finally:
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = saved[0], saved[1]
        torch.set_float32_matmul_precision(saved[2])

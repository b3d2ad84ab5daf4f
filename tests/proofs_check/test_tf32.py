"""``proofs_check.tf32``: reading torch's TF32 state and forcing it off for a block."""

import pytest
import torch

from proofs_check.tf32 import tf32_disabled, tf32_enabled


def _flags():
    b = torch.backends
    return (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, torch.get_float32_matmul_precision())


def test_tf32_forced_off_inside_and_restored_after():
    before = _flags()
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        assert tf32_enabled()
        with tf32_disabled():
            assert _flags() == (False, False, "highest") and not tf32_enabled()
        assert _flags()[:2] == (True, True) and tf32_enabled()
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[:2]
        torch.set_float32_matmul_precision(before[2])


def test_tf32_restored_when_the_block_raises():
    before = _flags()
    with pytest.raises(KeyboardInterrupt), tf32_disabled():
        assert _flags() == (False, False, "highest")
        raise KeyboardInterrupt
    assert _flags() == before


def test_tf32_disabled_in_a_mixed_api_state():
    # conv and rnn set apart through the new API: torch refuses the legacy getters, and the
    # context manager must fall back to the new flags (and restore them exactly).
    conv, rnn = torch.backends.cudnn.conv, torch.backends.cudnn.rnn
    before = (conv.fp32_precision, rnn.fp32_precision)
    try:
        conv.fp32_precision, rnn.fp32_precision = "tf32", "ieee"
        with pytest.raises(RuntimeError):
            torch.backends.cudnn.allow_tf32  # noqa: B018
        assert tf32_enabled()
        with tf32_disabled():
            assert not tf32_enabled()
        assert (conv.fp32_precision, rnn.fp32_precision) == ("tf32", "ieee")
    finally:
        conv.fp32_precision, rnn.fp32_precision = before

"""A full disk reported by a runner's or a gang's wrapper (Beam, TensorFlow, a worker's log tail)
is named as one, on one line, with what to do; other failures pass through untouched."""
from __future__ import annotations

import errno

import pytest

from pipeline.fsutil import DiskFullError, disk_full_named


def test_enospc_in_a_wrapped_message_becomes_one_named_line(tmp_path):
    wrapped = RuntimeError("worker-1 (pid 7) exited with code 1\n--- tail of worker-1 log ---\n"
                           "ResourceExhaustedError: ckpt.tmp; No space left on device")
    with pytest.raises(DiskFullError) as err, disk_full_named(tmp_path, "training run r"):
        raise wrapped
    message = str(err.value)
    assert "\n" not in message and err.value.errno == errno.ENOSPC
    assert message.startswith(f"[Errno 28] {tmp_path}: disk full while training run r (")
    assert "worker-1 (pid 7) exited with code 1; nothing partial was left; free space there and retry" in message


def test_other_failures_are_not_disk_full(tmp_path):
    with pytest.raises(RuntimeError, match="exited with code 1") as err, disk_full_named(tmp_path, "x"):
        raise RuntimeError("worker-1 exited with code 1")
    assert not isinstance(err.value, DiskFullError)
    with pytest.raises(DiskFullError), disk_full_named(tmp_path, "x"):
        raise OSError(errno.ENOSPC, "No space left on device")

"""A real, small filesystem for full-disk tests: a tmpfs of a few MiB mounted by the test.

Mounting needs root (or CAP_SYS_ADMIN); where the machine does not allow it the test is skipped
with that reason rather than faked. `fill` then writes until the kernel says ENOSPC.
"""
from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(mount_point: Path, size_bytes: int) -> Iterator[Path]:
    mount_point.mkdir(parents=True, exist_ok=True)
    size_kib = max(64, -(-size_bytes // 1024))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(folder: Path) -> Path:
    """Write one file until the filesystem is full (a real ENOSPC); returns it."""
    filler, block = folder / "filler", b"\0" * 65536
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError as err:
            if err.errno != errno.ENOSPC:
                raise
    return filler

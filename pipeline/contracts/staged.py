"""Staged runs on a training host's SSD: who reads them, and which may be deleted to make room.

Training workers read a staged run under a shared `flock` on a file inside it; stage deletes
an older run (retention, or to make room for tonight's copy) only while holding the exclusive
lock, so freeing space never pulls shards from under a running gang. The kernel drops a lock
when its process dies, so a killed gang never pins a run forever.
"""
from __future__ import annotations

import contextlib
import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path

IN_USE = ".in-use.lock"


@contextlib.contextmanager
def reading(staged_dir: Path) -> Iterator[None]:
    """Hold the run's shared lock while a worker reads its shards."""
    if not staged_dir.is_dir():       # nothing staged (training reads elsewhere): nothing to pin
        yield
        return
    with open(staged_dir / IN_USE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_unless_in_use(run_dir: Path) -> bool:
    """Delete a staged run unless a reader holds it; True when it is gone."""
    try:
        handle = open(run_dir / IN_USE, "a")
    except FileNotFoundError:
        return not run_dir.exists()
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        shutil.rmtree(run_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        run_dir.parent.rmdir()          # the date folder, once its last run is gone
    return not run_dir.exists()


def staged_runs(staging_root: Path) -> list[Path]:
    """Every published staged run (<root>/<ds>/<run_id>), oldest first."""
    runs = [d for ds in staging_root.glob("*") if ds.is_dir() and not ds.name.startswith(".")
            for d in ds.iterdir() if d.is_dir() and not d.name.startswith(".")]
    return sorted(runs, key=lambda d: d.stat().st_mtime)

"""Staged runs on a training host's SSD: who reads them, which may be deleted, and whether a
copy is still what stage verified.

Two holds keep a run's shards: training workers read a staged run under a shared `flock` on a
file inside it (stage deletes an older run only while holding the exclusive lock, so freeing
space never pulls shards from under a running gang; the kernel drops a lock when its process
dies), and stage *pins* the run it publishes until that run's training has succeeded: a
backfill stages several dates before the one training slot reaches them, and without the pin
the fourth stage removed the second date's copy, failing its train and every retry. A pin
expires after `preprocess.staging_pin_h` (a run whose training never succeeds, e.g. a failed
DAG run, does not hold the SSD forever); a train retry re-stages a copy that is gone.

`problems` checks a staged copy against its own manifest (sizes and sha256): training reads
nothing unverified, and a bit flipped on the SSD is found before a model is trained on it.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from pipeline.contracts import manifest as M
from pipeline.fsutil import sha256_file

IN_USE = ".in-use.lock"
PIN = ".pinned-until-trained"


class StagedDataError(RuntimeError):
    """The staged copy is missing or is not what stage verified: the DAG's train re-stages it."""


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


def pin(run_dir: Path, hours: float) -> None:
    """Keep the run until its training succeeds (`unpin`) or `hours` pass."""
    (Path(run_dir) / PIN).write_text(json.dumps({"until": time.time() + hours * 3600}))


def unpin(run_dir: Path) -> None:
    (Path(run_dir) / PIN).unlink(missing_ok=True)


def is_pinned(run_dir: Path, now: float | None = None) -> bool:
    try:
        until = json.loads((Path(run_dir) / PIN).read_text())["until"]
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return False
    return (time.time() if now is None else now) < until


def problems(staged_dir: Path, names: tuple[str, ...] | None = None) -> list[str]:
    """Problems of a staged copy (or of its files `names`) vs its own manifest: missing files,
    sizes, sha256 ([] = ok). A file the manifest does not list is not checked."""
    staged_dir = Path(staged_dir)
    try:
        manifest = M.read(staged_dir)
    except FileNotFoundError:
        return [f"{staged_dir}: no manifest.json"]
    found = []
    for record in manifest.get("staged", []):
        if names is not None and record["name"] not in names:
            continue
        path = staged_dir / record["name"]
        if not path.exists():
            found.append(f"{path}: missing")
        elif path.stat().st_size != record["bytes"]:
            found.append(f"{path}: {path.stat().st_size} bytes, manifest says {record['bytes']}")
        elif sha256_file(path) != record["sha256"]:
            found.append(f"{path}: sha256 mismatch")
    return found


def remove_unless_held(run_dir: Path) -> bool:
    """Delete a staged run unless it is pinned or a reader holds it; True when it is gone."""
    if is_pinned(run_dir):
        return False
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

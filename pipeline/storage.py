"""An object store (gs://, s3://, any fsspec URL) behind each task's local working copy.

Why a mirror and not URL roots: every step reads and writes its artifacts with local file
operations (atomic rename, fsync, sha256 manifests), and the training hosts read their shards
from local SSD anyway. When the tasks of a run do not share a filesystem (Celery or Kubernetes
executors on different machines), `data.artifact_store` names a URL: after a step, each of the
run's output directories that changed is published there; before a step, the run's published
outputs missing locally are fetched. `data.artifact_root` stays the local working copy.

The publish rule: an object store cannot rename a directory atomically (a rename is a copy per
object), so a directory is published by writing every file first and `_COMPLETE` last; the
marker lists each file with its size, sha256 and mtime. A reader trusts only a marked
directory, and only the files its marker lists; a republish deletes the marker first. One
object (a validation-history file) is written whole by one put, which object stores apply
atomically, so those need no marker.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from pipeline.fsutil import publish_dir, remove_stale_temps, sha256_file, temp_sibling

log = logging.getLogger(__name__)

MARKER = "_COMPLETE"


class StoreError(RuntimeError):
    """The artifact store cannot be used or holds something a reader must not trust."""


class IncompleteOutput(StoreError):
    """A directory without its marker (a publish that did not finish) was asked for."""


def filesystem(url: str):
    """(fsspec filesystem, path inside it) for a store URL; names the package a scheme needs."""
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as err:
        raise StoreError(f"{url!r}: no filesystem for this URL here ({err}); gs:// needs gcsfs, s3:// needs "
                         "s3fs, installed beside this package") from err
    return fs, path.rstrip("/")


def _fingerprint(local_dir: Path) -> dict[str, dict[str, int]]:
    return {p.relative_to(local_dir).as_posix(): {"size": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns}
            for p in sorted(local_dir.rglob("*")) if p.is_file()}


def listing(url: str) -> dict[str, dict[str, Any]] | None:
    """The files a published directory's marker lists, or None when it has no marker."""
    fs, root = filesystem(url)
    try:
        return json.loads(fs.cat_file(f"{root}/{MARKER}"))["files"]
    except FileNotFoundError:
        return None


def publish(local_dir: Path, url: str) -> dict[str, dict[str, Any]]:
    """Upload every file of `local_dir` under `url`, then the marker, last."""
    fs, root = filesystem(url)
    if fs.exists(f"{root}/{MARKER}"):
        fs.rm_file(f"{root}/{MARKER}")         # readers stop trusting the old copy before it changes
    files = _fingerprint(local_dir)
    for rel, meta in files.items():
        fs.makedirs(f"{root}/{rel}".rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(local_dir / rel), f"{root}/{rel}")
        meta["sha256"] = sha256_file(local_dir / rel)
    fs.pipe_file(f"{root}/{MARKER}", json.dumps({"files": files}, sort_keys=True).encode())
    log.info("published %s -> %s (%d files)", local_dir, url, len(files))
    return files


def fetch(url: str, local_dir: Path, files: dict[str, dict[str, Any]] | None = None) -> None:
    """Download a published directory into `local_dir` (atomically), checking every file.
    `files`: its marker's listing when the caller has just read it."""
    files = files if files is not None else listing(url)
    if files is None:
        raise IncompleteOutput(f"{url}: no {MARKER} marker, so its publish did not finish; not read")
    fs, root = filesystem(url)
    remove_stale_temps(local_dir.parent, local_dir.name)
    tmp = temp_sibling(local_dir)
    for rel, meta in files.items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(f"{root}/{rel}", str(target))
        if target.stat().st_size != meta["size"] or sha256_file(target) != meta["sha256"]:
            raise StoreError(f"{url}/{rel}: size or sha256 differs from its {MARKER} marker; not read")
        os.utime(target, ns=(meta["mtime_ns"], meta["mtime_ns"]))   # so the fingerprint says "unchanged"
    publish_dir(tmp, local_dir)
    log.info("fetched %s -> %s (%d files)", url, local_dir, len(files))


def _url(config, local: Path) -> str:
    return f"{config.data.artifact_store.rstrip('/')}/{local.relative_to(config.data.artifact_root).as_posix()}"


def _run_outputs(paths) -> tuple[Path, ...]:
    """The run's directories a step may write (RunPaths names them), mirrored as published dirs."""
    return (paths.validation_dir, paths.transform_dir, paths.examples_dir, paths.train_dir, paths.eval_dir,
            paths.push_dir)


def _shared(config, paths):
    """(local folder, store filesystem, its path there) of each cross-run folder of one-object
    files: the validation history, whose earlier days the drift checks read.
    Its listing is read afresh on each call: fsspec keeps one filesystem instance per process, and
    the listing cache of s3fs that `find` fills is never refreshed (s3fs 2026.9), so the "is it in
    the store?" checks of a later push would answer from what a pull listed before the step
    (tests/pipeline/test_s3_store.py)."""
    for folder in (paths.validation_history_dir,):
        fs, root = filesystem(_url(config, folder))
        fs.invalidate_cache(root)
        yield folder, fs, root


@contextlib.contextmanager
def mirrored(config, paths):
    """Around one step, wherever it runs (a DAG task, a pod's CLI, a shell): the run's published
    outputs it lacks are fetched first, and what it wrote is published after it succeeded."""
    pull(config, paths)
    yield
    push(config, paths)


def pull(config, paths) -> list[str]:
    """Before a step: fetch the run's published outputs and shared files missing locally."""
    if not config.data.artifact_store:
        return []
    fetched = []
    for local in _run_outputs(paths):
        files = None if local.exists() else listing(_url(config, local))
        if files is not None:
            fetch(_url(config, local), local, files)
            fetched.append(local.name)
    for folder, fs, root in _shared(config, paths):
        for remote in fs.find(root) if fs.exists(root) else []:
            local = folder / remote[len(root) + 1:]
            if not local.exists():
                local.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(remote, str(local))
    return fetched


def push(config, paths) -> list[str]:
    """After a step: publish each run output whose files differ from the store's copy."""
    if not config.data.artifact_store:
        return []
    published = []
    for local in (d for d in _run_outputs(paths) if d.is_dir()):
        remote = listing(_url(config, local))
        mine = _fingerprint(local)
        if remote is None or {k: {"size": v["size"], "mtime_ns": v["mtime_ns"]} for k, v in remote.items()} != mine:
            publish(local, _url(config, local))
            published.append(local.name)
    for folder, fs, root in _shared(config, paths):
        for local in sorted(folder.glob("*")):
            if local.is_file() and not fs.exists(f"{root}/{local.name}"):
                fs.makedirs(root, exist_ok=True)
                fs.put_file(str(local), f"{root}/{local.name}")
    return published

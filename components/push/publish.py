"""Staging, atomic publish, retention and the push lock.

A version becomes visible to TF Serving by exactly one `rename(2)` of a complete, fsynced
directory: the staging temp lives beside the model dir (hidden, same filesystem) so the
rename is atomic, and a process killed at any instant leaves either no new version or a
complete one, plus a hidden temp that the next push deletes. A push that fails (a refused
rename, a full disk) removes its temp itself.

A serving dir push may not write to (a read-only mount, an immutable directory, another owner)
is found before anything is copied (`require_writable`), and any permission error met later
is one ServingDirError line (`writes_to`): permanent, no retry, no temp left.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from pipeline import fsutil
from pipeline.config import PushConfig
from pipeline.contracts import serving

log = logging.getLogger(__name__)


class PublishError(RuntimeError):
    """A staged copy is not the evaluated model, or the target version already exists."""


@contextlib.contextmanager
def writes_to(serving_base: Path, what: str) -> Iterator[None]:
    """A permission error inside (EACCES, EPERM, EROFS) becomes one ServingDirError line naming
    the path: a retry cannot make a read-only volume writable."""
    try:
        yield
    except OSError as err:
        if not serving.is_not_writable(err):
            raise
        where = err.filename2 or err.filename or serving_base       # a rename: its target
        raise serving.ServingDirError(
            f"{where}: {err.strerror or err} while {what}: push must be able to write in {serving_base} "
            "(data.serving_base; a read-only mount, an immutable directory or another owner prevents it); "
            "no staging copy was left; fix the permissions, then rerun the push") from err


def require_writable(serving_base: Path, model_name: str) -> None:
    """Create and remove a hidden probe in each directory a push writes (the serving base: lock,
    staging copy, models.config; the model dir: the version's rename; the history), before
    anything is copied. A permission error raised here goes through `writes_to`."""
    model_base = serving_base / model_name
    model_base.mkdir(parents=True, exist_ok=True)
    history = serving.history_dir(serving_base, model_name)
    # Hidden names that serving.stale_temps matches, should a kill leave one behind.
    probes = [fsutil.temp_sibling(model_base, "probe"), model_base / ".probe",
              *([history / ".probe"] if history.is_dir() else [])]
    for probe in probes:
        probe = probe.with_name(f"{probe.name}-{os.getpid()}")
        try:
            os.close(os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
            probe.unlink()
        except OSError as err:          # name the directory, not the probe
            raise OSError(err.errno, err.strerror, str(probe.parent)) from err


@contextlib.contextmanager
def push_lock(serving_base: Path, model_name: str) -> Iterator[None]:
    """One push or rollback at a time per model (the kernel drops the lock if we are killed)."""
    serving_base.mkdir(parents=True, exist_ok=True)
    with open(serving.lock_path(serving_base, model_name), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def clean_stale(serving_base: Path, model_name: str) -> list[Path]:
    removed = serving.stale_temps(serving_base, model_name)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    if removed:
        log.warning("removed %d staging leftovers of killed pushes: %s", len(removed), removed)
    return removed


def copy_tree(src: Path, dst: Path) -> int:
    """Copy file by file into `dst` (a hidden temp); returns bytes."""
    total = 0
    dst.mkdir(parents=True)
    for path in sorted(src.rglob("*")):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        total += path.stat().st_size
    return total


def stage(src: Path, serving_base: Path, model_name: str, version: int, digest: str,
          extras: dict[str, bytes]) -> Path:
    """Copy `src` into a hidden temp beside the model dir, check it, add assets.extra files.
    A full disk fails before copying when it can be seen, else names itself; the temp goes."""
    tmp = fsutil.temp_sibling(serving_base / model_name, f"push-v{version}")
    what = f"copying {src} as version {version}"
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file()) + sum(map(len, extras.values()))
    fsutil.require_free(serving_base, size, what)
    try:
        with fsutil.disk_full_named(serving_base, what):
            copy_tree(src, tmp)
            copied = serving.tree_digest(tmp)
            if copied != digest:
                raise PublishError(f"staged copy of {src} has digest {copied[:12]}, expected {digest[:12]} "
                                   "(the model changed after it was evaluated, or the copy is corrupt)")
            extra_dir = tmp / serving.ASSETS_EXTRA
            extra_dir.mkdir(exist_ok=True)
            for name, data in extras.items():
                (extra_dir / name).write_bytes(data)
    except (OSError, PublishError):
        shutil.rmtree(tmp, ignore_errors=True)     # hidden anyway; never leave the disk full
        raise
    return tmp


def publish(tmp: Path, model_base: Path, version: int) -> Path:
    """fsync the staged tree, then rename it to <model_base>/<version> in one step. If that fails
    (a refused rename, an existing version) the staged copy goes: no hidden full copy is left."""
    final = serving.version_dir(model_base, version)
    try:
        if final.exists():
            raise PublishError(f"{final} already exists; versions are never overwritten")
        model_base.mkdir(parents=True, exist_ok=True)
        fsutil.fsync_tree(tmp)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsutil.fsync_dir(model_base)
    fsutil.fsync_dir(model_base.parent)
    return final


def apply_retention(model_base: Path, keep: int, protect: tuple[int, ...] = ()) -> list[int]:
    """Keep the `keep` highest versions, and always the served one and the one before it, and
    the versions in `protect` (those a pin in models.config serves)."""
    versions = serving.list_versions(model_base)
    protected = set(versions[-max(keep, 2):]) | set(protect)
    removed = [v for v in versions if v not in protected]
    for v in removed:
        serving.unpublish(serving.version_dir(model_base, v))
    if removed:
        log.info("retention (keep %d): removed versions %s", keep, removed)
    return removed


def withdraw(vdir: Path, kind: str, record: dict) -> None:
    """A published version failed verification: unpublish it and record that it existed."""
    serving.unpublish(vdir)
    serving.write_history(vdir.parent.parent, vdir.parent.name, kind, int(vdir.name), {**record, "unpublished": True})


def finish(vdir: Path, kind: str, record: dict, push: PushConfig,
           previous: int | None = None) -> tuple[Path, list[int]]:
    """A verified version serves: models.config (labelled in two writes when push.serving_url is
    set, see labels.py), its history record, then retention. A pin set by hand in models.config
    is kept (and never removed by retention): the version is then published, not served."""
    from components.push import labels, serving_files

    base, name = vdir.parent.parent, vdir.parent.name
    policy = serving.version_policy(base, name)
    pinned = policy.pinned if policy else ()
    if pinned:
        log.warning("%s: models.config pins version(s) %s: pin kept; version %s is published but not "
                    "served (remove the pin to serve it)", name, list(pinned), vdir.name)
    elif push.serving_url:
        labels.publish_labels(base, name, previous, int(vdir.name), push.serving_url, push.label_wait_s)
    else:
        serving_files.write_models_config(base, name)
    serving.canary_path(vdir.parent, int(vdir.name)).unlink(missing_ok=True)   # it serves now
    history = serving.write_history(base, name, kind, int(vdir.name), record)
    return history, apply_retention(vdir.parent, push.keep_versions, pinned)


def now_iso() -> str:
    """Record timestamps: UTC, seconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

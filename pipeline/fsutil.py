"""Small filesystem helpers for atomic publishing: readers see all of a thing or none of it."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class DiskFullError(OSError):
    """A copy does not fit: names the folder, what was being written, the bytes needed and free.
    An OSError (ENOSPC) so callers that handle I/O failures treat it as one; the message is
    what on-call reads instead of a bare `[Errno 28]`."""


RETRY_HINT = "nothing partial was left; free space there and retry (Airflow retries the task)"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def require_free(folder: Path, need: int, what: str) -> None:
    """Fail before copying when `need` bytes cannot fit in `folder`'s filesystem."""
    free = shutil.disk_usage(folder).free
    if need > free:
        raise DiskFullError(errno.ENOSPC, f"{folder}: {what} needs {_mib(need)}, only {_mib(free)} free; "
                                          f"{RETRY_HINT}")


@contextlib.contextmanager
def disk_full_named(folder: Path, what: str) -> Iterator[None]:
    """Turn ENOSPC raised inside into a DiskFullError naming the folder and the copy."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as err:
        if not is_disk_full(err):
            raise
        free = shutil.disk_usage(folder).free
        cause = next((line for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise DiskFullError(errno.ENOSPC, f"{folder}: disk full while {what} ({_mib(free)} free): {cause}; "
                                          f"{RETRY_HINT}") from err


def is_disk_full(err: BaseException | None) -> bool:
    """ENOSPC anywhere in the exception chain, or in the text of a runner's wrapper around it
    (Beam and TensorFlow re-raise a worker's OSError as their own error types)."""
    seen = 0
    while err is not None and seen < 20:
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(err) or "[Errno 28]" in str(err):
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fsync_tree(root: Path) -> None:
    """Flush every file and directory under `root` so a rename publishes durable bytes."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_sibling(final: Path, tag: str = "tmp") -> Path:
    """A hidden temp path beside `final` (same filesystem, so rename is atomic)."""
    return final.parent / f".{final.name}.{tag}-{uuid.uuid4().hex[:8]}"


def publish_dir(tmp: Path, final: Path) -> None:
    """Atomically replace `final` with the complete directory `tmp`.

    The old directory is first renamed aside (rename is atomic), then the new one is renamed
    in, then the old one is deleted; a crash in between leaves either the old or the new
    complete directory plus a hidden leftover that `remove_stale_temps` cleans.
    """
    fsync_tree(tmp)
    old = None
    if final.exists():
        old = temp_sibling(final, "old")
        os.rename(final, old)
    os.rename(tmp, final)
    fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def remove_stale_temps(parent: Path, name: str) -> list[Path]:
    """Delete hidden temp/old siblings of `parent/name` left behind by killed runs."""
    removed = []
    if parent.exists():
        for p in parent.glob(f".{name}.*"):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def write_text_atomic(path: Path, text: str) -> None:
    """Temp sibling, fsync, rename, fsync the directory: readers see the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))

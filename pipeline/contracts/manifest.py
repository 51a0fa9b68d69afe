"""manifest.json: what a complete preprocess output holds, how it is published, who reads what.

A run's output is two sibling directories, `examples/` (shards + manifest.json, written last)
and `transform/` (the tf.Transform graph). It is complete iff the manifest exists and its
`transform_fingerprint` matches the transform dir. Publishing replaces both with renames; the
old pair is only moved aside (hidden) until the new pair is in place, so a process killed
between any two renames leaves the last good pair recoverable: `recover` puts it back, and
both the next run and every reader call it first.

The sharding rule lives here once: worker i of W reads shards i, i + W, ... of the full,
ordered shard list of a split (stage copies exactly that share onto worker i's host).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pipeline import fsutil
from pipeline.contracts import features as F
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
FORMAT = 1
SPLITS = ("train", "eval")
T = TypeVar("T")


class ManifestError(RuntimeError):
    """A manifest of another format version, or one that does not describe a complete output."""


def worker_share(items: Sequence[T], worker: int, workers: int) -> list[T]:
    """What worker `worker` of `workers` reads: items worker, worker + workers, ..."""
    return list(items[worker::workers])


def shard_name(split: str, shard: int, total: int) -> str:
    return f"{split}/part-{shard:05d}-of-{total:05d}.tfrecord"


def transform_fingerprint(transform_dir: Path) -> str:
    return fsutil.sha256_file(Path(transform_dir) / "transform_fn" / "saved_model.pb")


def split_summary(shards: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    """Counts, bytes, the max/min byte imbalance, and which shards each worker reads."""
    shards = sorted(shards, key=lambda s: s["shard"])
    sizes = [s["bytes"] for s in shards]
    nonzero = [b for b in sizes if b] or [0]
    return {
        "examples": sum(s["examples"] for s in shards),
        "bytes": sum(sizes),
        "num_shards": len(shards),
        "imbalance": (max(sizes) / min(nonzero)) if min(nonzero) else None,
        "shards": [{k: s[k] for k in ("name", "examples", "bytes", "sha256")} for s in shards],
        "by_worker": {str(w): [s["name"] for s in worker_share(shards, w, workers)] for w in range(workers)},
    }


def build(paths: RunPaths, shard_stats: list[dict], workers: int, compression: str,
          model, fingerprint: str, extra: dict | None = None) -> dict[str, Any]:
    """The manifest of a complete output; `model` (a ModelConfig) sizes the feature spec."""
    splits = {split: split_summary([s for s in shard_stats if s["split"] == split], workers) for split in SPLITS}
    return {
        "format": FORMAT,
        "run_date": paths.ds,
        "run_id": paths.run_id,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "compression": compression,
        "workers": workers,
        "feature_spec": {k: {"shape": list(f.shape), "dtype": f.dtype}
                         for k, f in F.transformed_feature_spec(model).items()},
        "transform_dir": str(paths.transform_dir),
        "transform_fingerprint": fingerprint,
        "splits": splits,
        **(extra or {}),
    }


def read(folder: Path) -> dict[str, Any]:
    """The manifest of a complete output folder (FileNotFoundError when there is none)."""
    info = json.loads((Path(folder) / MANIFEST).read_text())
    if info.get("format") != FORMAT:
        raise ManifestError(f"{Path(folder) / MANIFEST} has format {info.get('format')!r}, this code reads "
                            f"format {FORMAT}: re-run preprocess for that date")
    return info


def shard_records(info: dict[str, Any], split: str, worker: int | None = None,
                  workers: int | None = None) -> list[dict[str, Any]]:
    """Manifest shard entries of `split`: all, or worker `worker`'s share (W = the manifest's)."""
    shards = info["splits"][split]["shards"]
    return shards if worker is None else worker_share(shards, worker, workers or info["workers"])


def item_table_record(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The item table's entry ([] for an output without one): every worker reads all of it."""
    return [info["item_table"]] if "item_table" in info else []


def shard_files(folder: Path, split: str, worker: int | None = None, workers: int | None = None) -> list[Path]:
    return [Path(folder) / s["name"] for s in shard_records(read(folder), split, worker, workers)]


def _hidden(final: Path, tag: str) -> list[Path]:
    """Hidden siblings `.<name>.<tag>-*` of `final`, newest first."""
    found = list(final.parent.glob(f".{final.name}.{tag}-*")) if final.parent.is_dir() else []
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def publish(examples_tmp: Path, transform_tmp: Path, examples_dir: Path, transform_dir: Path) -> None:
    """Replace the (examples, transform) pair with complete temps: readers see old, none, or new."""
    fsutil.fsync_tree(transform_tmp)
    fsutil.fsync_tree(examples_tmp)
    aside = []
    for final in (examples_dir, transform_dir):        # examples first: "no output", never a mix
        if final.exists():
            aside.append(fsutil.temp_sibling(final, "old"))
            os.rename(final, aside[-1])
    os.rename(transform_tmp, transform_dir)
    os.rename(examples_tmp, examples_dir)
    fsutil.fsync_dir(examples_dir.parent)
    for old in aside:
        shutil.rmtree(old, ignore_errors=True)


def _matches(examples: Path, transform: Path) -> bool:
    try:
        return read(examples)["transform_fingerprint"] == transform_fingerprint(transform)
    except (OSError, ValueError, KeyError, ManifestError):
        return False


def recover(examples_dir: Path, transform_dir: Path) -> bool:
    """Put back the last complete pair when a publish was killed half-way; True if it did."""
    if examples_dir.exists():
        return False
    for old_examples in _hidden(examples_dir, "old"):
        candidates = [transform_dir, *_hidden(transform_dir, "old")]
        transform = next((t for t in candidates if t.exists() and _matches(old_examples, t)), None)
        if transform is None:
            continue
        if transform != transform_dir:
            if transform_dir.exists():              # the new, unmatched graph: discard it
                os.rename(transform_dir, fsutil.temp_sibling(transform_dir, "tmp"))
            os.rename(transform, transform_dir)
        os.rename(old_examples, examples_dir)
        fsutil.fsync_dir(examples_dir.parent)
        log.warning("recovered the previous complete output %s after an interrupted publish", examples_dir)
        return True
    return False

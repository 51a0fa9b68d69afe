"""manifest.json: what a complete preprocess output holds, written last, read by stage and train.

A directory is complete iff its manifest exists (it is written into the temp dir just before
the atomic rename) and the transform graph's fingerprint matches `transform_dir`.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from pipeline.fsutil import sha256_file
from pipeline.paths import RunPaths

MANIFEST = "manifest.json"
FORMAT = 1


def transform_fingerprint(transform_dir: Path) -> str:
    return sha256_file(Path(transform_dir) / "transform_fn" / "saved_model.pb")


def split_summary(shards: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    """Counts, bytes, the max/min byte imbalance, and which shards each worker reads.

    Worker i reads shards i, i + workers, ... (file-level sharding); shards are balanced in
    bytes by the event hash, so every worker gets the same share within a few percent.
    """
    shards = sorted(shards, key=lambda s: s["shard"])
    sizes = [s["bytes"] for s in shards]
    nonzero = [b for b in sizes if b] or [0]
    return {
        "examples": sum(s["examples"] for s in shards),
        "bytes": sum(sizes),
        "num_shards": len(shards),
        "imbalance": (max(sizes) / min(nonzero)) if min(nonzero) else None,
        "shards": [{k: s[k] for k in ("name", "examples", "bytes", "sha256")} for s in shards],
        "by_worker": {str(w): [s["name"] for s in shards[w::workers]] for w in range(workers)},
    }


def build(paths: RunPaths, shard_stats: list[dict], workers: int, compression: str,
          feature_spec: dict, fingerprint: str, extra: dict | None = None) -> dict[str, Any]:
    splits = {}
    for split in ("train", "eval"):
        splits[split] = split_summary([s for s in shard_stats if s["split"] == split], workers)
    return {
        "format": FORMAT,
        "run_date": paths.ds,
        "run_id": paths.run_id,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "compression": compression,
        "workers": workers,
        "feature_spec": feature_spec,
        "transform_dir": str(paths.transform_dir),
        "transform_fingerprint": fingerprint,
        "splits": splits,
        **(extra or {}),
    }


def read(folder: Path) -> dict[str, Any]:
    """The manifest of a complete output folder (FileNotFoundError when incomplete)."""
    return json.loads((Path(folder) / MANIFEST).read_text())


def shard_files(folder: Path, split: str, worker: int | None = None,
                workers: int | None = None) -> list[Path]:
    """Shard paths of `split` under `folder`: all of them, or those worker `worker` reads.

    Worker i of W reads shards i, i + W, ...; W defaults to the manifest's `workers`.
    """
    info = read(folder)
    names = [s["name"] for s in info["splits"][split]["shards"]]
    if worker is not None:
        names = names[worker::workers or info["workers"]]
    return [Path(folder) / name for name in names]

"""`run(config, paths, worker=None)`: verified copy, atomic publish and retention of staged shards (see __init__)."""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from pipeline.config import Config
from pipeline.contracts import item_table as IT
from pipeline.contracts import manifest as M
from pipeline.contracts import staged
from pipeline.fsutil import disk_full_named, publish_dir, remove_stale_temps, require_free, temp_sibling
from pipeline.paths import RunPaths
from pipeline.results import StageResult

log = logging.getLogger(__name__)
CHUNK = 8 << 20


class StageError(RuntimeError):
    """Source output incomplete, or a copied file's size/checksum does not match the manifest."""


def _wanted(manifest: dict, worker: int | None, workers: int | None) -> list[dict]:
    """Manifest records to stage: all splits' shards, or a worker's train and eval shares; and
    the item table, which every worker reads whole."""
    shards = [s for split in M.SPLITS for s in M.shard_records(manifest, split, worker, workers)]
    return shards + M.item_table_record(manifest)


def copy_verified(src: Path, dst: Path, size: int, sha256: str) -> None:
    """Copy src -> dst, hashing the bytes written; raise StageError on any mismatch."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    digest, written = hashlib.sha256(), 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while block := fin.read(CHUNK):
            fout.write(block)
            digest.update(block)
            written += len(block)
    if written != size or digest.hexdigest() != sha256:
        raise StageError(f"{src}: copied {written} bytes with sha256 {digest.hexdigest()[:12]}..., "
                         f"manifest says {size} bytes, {sha256[:12]}...")


def verify_staged(staged_dir: Path) -> list[str]:
    """Problems of a staged dir vs its own manifest: missing files, sizes, checksums ([] = ok)."""
    return staged.problems(staged_dir)


def _retention(paths: RunPaths, keep: int) -> list[str]:
    """Keep the newest `keep` staged runs (ds/run_id dirs) under staging_root, current included;
    a run pinned until trained, or that a gang still reads, stays too."""
    runs = staged.staged_runs(paths.staging_root)[::-1]
    current = paths.staged_dir.resolve()
    keepers = {current, *[d.resolve() for d in runs[:keep]]}
    return [str(d) for d in runs if d.resolve() not in keepers and staged.remove_unless_held(d)]


def _make_room(paths: RunPaths, need: int) -> list[str]:
    """Before copying: delete the oldest staged runs (never the current one, a pinned one or one
    in use) until `need` bytes fit, so the SSD needs room for `staging_keep_runs` runs, not one more."""
    removed = []
    for run_dir in staged.staged_runs(paths.staging_root):
        if shutil.disk_usage(paths.staging_root).free >= need:
            break
        if run_dir.resolve() != paths.staged_dir.resolve() and staged.remove_unless_held(run_dir):
            log.warning("stage: removed staged run %s to make room for %s", run_dir, paths.run_id)
            removed.append(str(run_dir))
    return removed


def _held_runs(paths: RunPaths) -> str:
    """The staged runs that stay whatever tonight needs (pinned until trained), for the one line
    that says the SSD cannot hold tonight's run beside them."""
    held = [d for d in staged.staged_runs(paths.staging_root)
            if d.resolve() != paths.staged_dir.resolve() and staged.is_pinned(d)]
    if not held:
        return ""
    names = ", ".join(f"{d.parent.name}/{d.name}" for d in held)
    return (f" beside {len(held)} run(s) pinned until trained ({names}; a pin ends when that run's train "
            f"succeeds or after preprocess.staging_pin_h)")


def run(config: Config, paths: RunPaths, worker: int | None = None,
        workers: int | None = None) -> StageResult:
    """Stage the run's shards (all workers', or `worker`'s of `workers`) on local SSD."""
    source = paths.examples_dir
    M.recover(source, paths.transform_dir)
    try:
        manifest = M.read(source)
    except FileNotFoundError as err:
        raise StageError(f"{source} has no manifest.json: preprocess output missing or incomplete") from err
    wanted = _wanted(manifest, worker, workers)
    final = paths.staged_dir
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(final.parent, final.name)
    staged_manifest = {**manifest, "staged": wanted, "staged_worker": worker, "source": str(source)}
    if final.exists():
        problems = verify_staged(final)
        if not problems and M.read(final).get("staged") == wanted:
            log.info("stage: %s already staged and verified", final)
            staged.pin(final, config.preprocess.staging_pin_h)
            return _result(final, wanted, _retention(paths, config.preprocess.staging_keep_runs))
        log.warning("stage: replacing invalid staged dir %s: %s", final, problems[:3])
    what = f"staging {len(wanted)} files of run {paths.run_id}"
    need = sum(s["bytes"] for s in wanted)
    made_room = _make_room(paths, need)
    final.parent.mkdir(parents=True, exist_ok=True)     # the date folder may have gone with its last run
    require_free(final.parent, need, what + _held_runs(paths))
    tmp = temp_sibling(final)
    try:
        with disk_full_named(final.parent, what):
            for shard in wanted:
                copy_verified(source / shard["name"], tmp / shard["name"], shard["bytes"], shard["sha256"])
            (tmp / M.MANIFEST).write_text(json.dumps(staged_manifest, indent=2, sort_keys=True))
            staged.pin(tmp, config.preprocess.staging_pin_h)
            publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    removed = made_room + _retention(paths, config.preprocess.staging_keep_runs)
    log.info("stage: %d files (%.1f MiB) -> %s; removed %s", len(wanted),
             sum(s["bytes"] for s in wanted) / 2**20, final, removed or "nothing")
    return _result(final, wanted, removed)


def _result(final: Path, wanted: list[dict], removed: list[str]) -> StageResult:
    return StageResult(staged_dir=str(final), num_shards=sum(s["name"] != IT.ITEM_TABLE for s in wanted),
                       bytes=sum(s["bytes"] for s in wanted), removed_runs=removed)

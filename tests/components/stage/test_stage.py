"""Stage step on a real preprocess output: verified copies, atomic publish, corruption, retention."""
from __future__ import annotations

import os
import shutil

import pytest

from components.stage import StageError, run, shard_files, verify_staged
from pipeline.contracts import item_table as IT
from pipeline.contracts import manifest as M
from pipeline.paths import RunPaths
from tests.components.preprocess.helpers import RUN_DATE

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def source(run_paths, preprocessed):
    """The session's real preprocess output (tests/conftest.py)."""
    return run_paths


@pytest.fixture(scope="module")
def config(tiny_config, tmp_path_factory):
    """Own staging root: retention here must never delete another test's staged run."""
    return tiny_config.with_overrides({"data.staging_root": str(tmp_path_factory.mktemp("ssd"))})


def _clone_run(config, source_paths, run_id: str) -> RunPaths:
    """A separate run id with a copy of the source output (so tests can damage it freely)."""
    paths = RunPaths.for_run(config, RUN_DATE, run_id)
    shutil.rmtree(paths.run_dir, ignore_errors=True)
    shutil.rmtree(paths.staged_dir, ignore_errors=True)
    shutil.copytree(source_paths.examples_dir, paths.examples_dir)
    return paths


def test_stage_all_workers_then_rerun_is_a_verified_noop(config, source):
    paths = _clone_run(config, source, "stage-all")
    result = run(config, paths)
    manifest = M.read(paths.examples_dir)
    total = sum(s["bytes"] for split in manifest["splits"].values() for s in split["shards"])
    total += manifest["item_table"]["bytes"]                    # the item table travels with the shards
    assert (paths.staged_dir / IT.ITEM_TABLE).exists()
    assert result.staged_dir == str(paths.staged_dir) and result.bytes == total and result.num_shards == 20
    assert verify_staged(paths.staged_dir) == []
    workers = config.train.workers
    per_worker = [shard_files(paths.staged_dir, "train", w) for w in range(workers)]
    assert sorted(p for files in per_worker for p in files) == sorted(shard_files(paths.staged_dir, "train"))
    assert all(p.exists() for files in per_worker for p in files)
    mtime = paths.staged_dir.stat().st_mtime_ns
    assert run(config, paths).num_shards == 20 and paths.staged_dir.stat().st_mtime_ns == mtime
    assert not [p for p in paths.staged_dir.parent.iterdir() if p.name.startswith(".")]


def test_one_worker_stages_only_its_shards(config, source):
    paths = _clone_run(config, source, "stage-w1")
    run(config, paths, worker=1)
    staged = {str(p.relative_to(paths.staged_dir)) for p in paths.staged_dir.rglob("*.tfrecord")}
    manifest = M.read(paths.examples_dir)
    want = {s["name"] for split in manifest["splits"].values() for s in split["shards"][1::2]}
    assert staged == want and verify_staged(paths.staged_dir) == []
    # Every worker reads the whole item table: each host gets all of it.
    assert (paths.staged_dir / IT.ITEM_TABLE).read_bytes() == (paths.examples_dir / IT.ITEM_TABLE).read_bytes()


@pytest.mark.parametrize("which", ["shard", "item_table"])
def test_corrupt_staged_file_is_detected_and_replaced(config, source, which):
    paths = _clone_run(config, source, f"stage-corrupt-{which}")
    run(config, paths)
    victim = shard_files(paths.staged_dir, "train", 0)[0] if which == "shard" else paths.staged_dir / IT.ITEM_TABLE
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF                                # same size, different bytes
    victim.write_bytes(bytes(data))
    assert verify_staged(paths.staged_dir) == [f"{victim}: sha256 mismatch"]
    run(config, paths)                                     # a rerun re-stages
    assert verify_staged(paths.staged_dir) == []


@pytest.mark.parametrize("which", ["shard", "item_table"])
def test_corrupt_source_shard_fails_and_publishes_nothing(config, source, which):
    paths = _clone_run(config, source, f"stage-bad-source-{which}")
    victim = M.shard_files(paths.examples_dir, "eval")[1] if which == "shard" else paths.examples_dir / IT.ITEM_TABLE
    data = bytearray(victim.read_bytes())
    data[100:104] = bytes(b ^ 0xFF for b in data[100:104])        # flipped, whatever was there
    victim.write_bytes(bytes(data))
    with pytest.raises(StageError, match=f"{victim.name}: copied .* manifest says"):
        run(config, paths)
    assert not paths.staged_dir.exists()
    assert not [p for p in paths.staged_dir.parent.iterdir() if p.name.startswith(f".{paths.run_id}")]


def test_missing_manifest_is_an_incomplete_output(config, source):
    paths = _clone_run(config, source, "stage-no-manifest")
    (paths.examples_dir / M.MANIFEST).unlink()
    with pytest.raises(StageError, match="no manifest.json"):
        run(config, paths)


def test_retention_keeps_the_newest_runs(config, source):
    from pipeline.contracts import staged

    keep = config.preprocess.staging_keep_runs
    for earlier in staged.staged_runs(config.data.staging_root):     # this module's: trained by now
        staged.unpin(earlier)
    old = []
    for i in range(keep + 2):
        stale = config.data.staging_root / f"2026-10-{10 + i:02d}" / "old-run"
        stale.mkdir(parents=True, exist_ok=True)
        (stale / "manifest.json").write_text("{}")
        os.utime(stale, (1_000_000 + i, 1_000_000 + i))
        old.append(stale)
    paths = _clone_run(config, source, "stage-retention")
    result = run(config, paths)
    survivors = [d for d in config.data.staging_root.glob("*/*") if d.is_dir()]
    assert paths.staged_dir in survivors and len(survivors) <= keep
    assert all(str(p) in result.removed_runs for p in old[:len(old) - keep + 1])   # alone, old[-1] is 2nd newest
    assert not old[0].parent.exists()                           # empty date folders go too


def _staged_bytes(source_paths) -> int:
    manifest = M.read(source_paths.examples_dir)
    shards = [s for split in M.SPLITS for s in M.shard_records(manifest, split, None, None)]
    return sum(s["bytes"] for s in shards + M.item_table_record(manifest))


def test_a_full_ssd_is_named_publishes_nothing_and_a_rerun_succeeds(config, source, tmp_path, monkeypatch):
    import importlib

    from pipeline.fsutil import DiskFullError
    from tests.small_disk import fill, small_disk

    stage_run = importlib.import_module("components.stage.run")     # the module (the package re-exports run())
    need = _staged_bytes(source)
    with small_disk(tmp_path / "ssd", need // 2) as disk:           # too small, and it can tell
        cfg = config.with_overrides({"data.staging_root": str(disk)})
        paths = _clone_run(cfg, source, "full-upfront")
        with pytest.raises(DiskFullError, match=rf"{disk}/{RUN_DATE}: staging \d+ files of run full-upfront needs"):
            run(cfg, paths)
        assert not paths.staged_dir.exists() and not list(paths.staged_dir.parent.glob(".*"))

    with small_disk(tmp_path / "ssd2", need + 2**20) as disk:       # fits, then fills mid-copy
        cfg = config.with_overrides({"data.staging_root": str(disk)})
        paths = _clone_run(cfg, source, "full-midway")
        real_copy, fillers = stage_run.copy_verified, []

        def copy_then_fill(*args):
            real_copy(*args)
            if not fillers:
                fillers.append(fill(disk))            # something else filled the disk meanwhile

        monkeypatch.setattr(stage_run, "copy_verified", copy_then_fill)
        with pytest.raises(DiskFullError, match="disk full while staging"):
            run(cfg, paths)
        assert not paths.staged_dir.exists() and not list(paths.staged_dir.parent.glob(".*"))
        fillers[0].unlink()                                          # space freed: the rerun works
        monkeypatch.setattr(stage_run, "copy_verified", real_copy)
        result = run(cfg, paths)
        assert verify_staged(paths.staged_dir) == [] and result.num_shards > 0


def test_an_ssd_that_holds_keep_runs_makes_room_before_copying_but_never_from_a_running_gang(
        config, source, tmp_path):
    """staging_keep_runs=1 on an SSD that holds one run and a half: tonight's copy deletes
    yesterday's run first instead of failing; while a gang reads yesterday's run, it is kept and
    the stage CLI refuses on one line (exit 2) with what to do."""
    import subprocess
    import sys

    import yaml

    from pipeline.config import PROJECT_ROOT
    from pipeline.contracts import staged
    from tests.small_disk import small_disk

    need = _staged_bytes(source)
    with small_disk(tmp_path / "ssd", need + need // 2) as disk:
        cfg = config.with_overrides({"data.staging_root": str(disk), "preprocess.staging_keep_runs": 1})
        yesterday = _clone_run(cfg, source, "yesterday")
        run(cfg, yesterday)
        staged.unpin(yesterday.staged_dir)                    # its train succeeded
        tonight = _clone_run(cfg, source, "tonight")
        result = run(cfg, tonight)
        assert result.removed_runs == [str(yesterday.staged_dir)] and not yesterday.staged_dir.exists()
        assert verify_staged(tonight.staged_dir) == []

        later = _clone_run(cfg, source, "later")
        params = tmp_path / "params.yaml"
        params.write_text(yaml.safe_dump(cfg.to_dict()))
        with staged.reading(tonight.staged_dir):              # a gang still reads it
            done = subprocess.run([sys.executable, "-m", "components.stage", "--config", str(params),
                                   "--date", RUN_DATE.isoformat(), "--run-id", "later"],
                                  cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        (line,) = [x for x in done.stderr.splitlines() if "needs" in x]
        assert f"{disk}/{RUN_DATE}: staging" in line and "free space there and retry" in line
        assert verify_staged(tonight.staged_dir) == [] and not later.staged_dir.exists()


def test_a_run_waiting_to_train_is_kept_until_its_train_ends_or_its_pin_expires(config, source):
    """A backfill stages four dates before the one training slot reaches them: with
    staging_keep_runs 1 the later stages removed the earlier runs' copies (their train, and
    every retry, then failed). A pinned run stays; once trained (unpinned) retention takes it."""
    from pipeline.contracts import staged

    cfg = config.with_overrides({"preprocess.staging_keep_runs": 1})
    for d in staged.staged_runs(cfg.data.staging_root):
        shutil.rmtree(d)
    waiting = [_clone_run(cfg, source, f"backfill-{i}") for i in range(3)]
    for paths in waiting:
        assert run(cfg, paths).removed_runs == []
    assert all(verify_staged(p.staged_dir) == [] and staged.is_pinned(p.staged_dir) for p in waiting)
    staged.unpin(waiting[1].staged_dir)                                   # trained
    (waiting[0].staged_dir / staged.PIN).write_text('{"until": 0}')       # pin expired (failed run)
    tonight = _clone_run(cfg, source, "backfill-3")
    assert sorted(run(cfg, tonight).removed_runs) == sorted([str(waiting[0].staged_dir), str(waiting[1].staged_dir)])
    assert waiting[2].staged_dir.exists() and tonight.staged_dir.exists()


def test_an_ssd_that_cannot_hold_tonight_beside_the_pinned_runs_says_so_in_one_line(config, source, tmp_path):
    import subprocess
    import sys

    import yaml

    from pipeline.config import PROJECT_ROOT
    from tests.small_disk import small_disk

    need = _staged_bytes(source)
    with small_disk(tmp_path / "ssd", need + need // 2) as disk:
        cfg = config.with_overrides({"data.staging_root": str(disk), "preprocess.staging_keep_runs": 1})
        waiting = _clone_run(cfg, source, "waiting")
        run(cfg, waiting)                                     # staged, not trained yet
        _clone_run(cfg, source, "tonight")
        params = tmp_path / "params.yaml"
        params.write_text(yaml.safe_dump(cfg.to_dict()))
        done = subprocess.run([sys.executable, "-m", "components.stage", "--config", str(params),
                               "--date", RUN_DATE.isoformat(), "--run-id", "tonight"],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        (line,) = [x for x in done.stderr.splitlines() if "needs" in x]
        assert f"beside 1 run(s) pinned until trained ({RUN_DATE}/waiting;" in line
        assert verify_staged(waiting.staged_dir) == []

"""The artifact-store mirror on a non-local fsspec filesystem (`memory://`, in this process):
URLs stay URLs, the marker is written last, readers refuse unmarked or altered directories."""
from __future__ import annotations

import json
import uuid

import pytest

from pipeline import storage
from pipeline.config import Config, ConfigError, load_config
from pipeline.paths import RunPaths


@pytest.fixture
def store():
    url = f"memory://reco-{uuid.uuid4().hex[:8]}"
    yield url
    fs, root = storage.filesystem(url)
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _tree(root, files: dict[str, bytes]):
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_publish_writes_the_marker_last_and_fetch_gets_exactly_what_it_lists(tmp_path, store, monkeypatch):
    src = _tree(tmp_path / "src", {"a.json": b"{}", "shards/part-0.tfrecord": b"x" * 100})
    fs, root = storage.filesystem(f"{store}/run/examples")
    written = []
    put, pipe = fs.put_file, fs.pipe_file
    monkeypatch.setattr(fs, "put_file", lambda lpath, rpath, **kw: (written.append(rpath), put(lpath, rpath, **kw)))
    monkeypatch.setattr(fs, "pipe_file", lambda path, value, **kw: (written.append(path), pipe(path, value, **kw)))
    storage.publish(src, f"{store}/run/examples")
    assert written[-1].endswith("/_COMPLETE") and len(written) == 3
    fs.pipe_file(f"{root}/stray.tmp", b"from a publish that died")         # not listed: never fetched
    storage.fetch(f"{store}/run/examples", tmp_path / "copy")
    assert sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*") if p.is_file()) \
        == ["a.json", "shards/part-0.tfrecord"]
    assert (tmp_path / "copy/shards/part-0.tfrecord").read_bytes() == b"x" * 100


def test_a_publish_that_died_before_its_marker_is_never_read(tmp_path, store, monkeypatch):
    src = _tree(tmp_path / "src", {"a": b"1", "b": b"2"})
    fs, _ = storage.filesystem(store)
    put = fs.put_file
    calls = []

    def dies_on_the_second(lpath, rpath, **kw):
        calls.append(rpath)
        if len(calls) == 2:
            raise OSError("connection reset")
        return put(lpath, rpath, **kw)

    monkeypatch.setattr(fs, "put_file", dies_on_the_second)
    with pytest.raises(OSError):
        storage.publish(src, f"{store}/out")
    assert storage.listing(f"{store}/out") is None
    with pytest.raises(storage.IncompleteOutput, match="no _COMPLETE marker"):
        storage.fetch(f"{store}/out", tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_a_file_changed_after_its_publish_is_refused(tmp_path, store):
    storage.publish(_tree(tmp_path / "src", {"model.pb": b"good"}), f"{store}/m")
    fs, root = storage.filesystem(f"{store}/m")
    fs.pipe_file(f"{root}/model.pb", b"evil")
    with pytest.raises(storage.StoreError, match="sha256 differs"):
        storage.fetch(f"{store}/m", tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def _config(tmp_path, store: str) -> tuple[Config, RunPaths]:
    config = load_config(env={}, overrides={"data.artifact_root": str(tmp_path / "artifacts"),
                                            "data.artifact_store": store})
    return config, RunPaths.for_run(config, "2026-11-08", "manual")


def test_a_task_on_another_machine_fetches_what_earlier_steps_published(tmp_path, store):
    """Machine A runs preprocess and publishes; machine B (an empty working copy) pulls it,
    runs its step and publishes only what changed."""
    config, paths = _config(tmp_path / "a", store)
    _tree(paths.transform_dir, {"transform_fn/saved_model.pb": b"graph"})
    _tree(paths.examples_dir, {"manifest.json": b"{}", "train/part-0": b"rows"})
    _tree(paths.validation_history_dir, {"ds=2026-11-08.json": b"{\"rows\": 3}"})
    assert storage.push(config, paths) == ["transform", "examples"]
    assert storage.push(config, paths) == []                                   # nothing changed since

    other, other_paths = _config(tmp_path / "b", store)
    assert storage.pull(other, other_paths) == ["transform", "examples"]
    assert (other_paths.examples_dir / "train/part-0").read_bytes() == b"rows"
    assert json.loads((other_paths.validation_history_dir / "ds=2026-11-08.json").read_text()) == {"rows": 3}
    _tree(other_paths.eval_dir, {"metrics.json": b"{\"auc\": 0.7}"})
    assert storage.push(other, other_paths) == ["eval"]                        # fetched dirs are unchanged
    assert storage.listing(f"{store}/runs/2026-11-08/manual/eval") is not None


def test_store_urls_are_kept_and_roots_that_are_urls_are_refused_with_the_way_out(tmp_path):
    config, _ = _config(tmp_path, "gs://bucket/reco")
    assert config.data.artifact_store == "gs://bucket/reco"
    with pytest.raises(ConfigError, match="data.artifact_root: .* set data.artifact_store to the URL"):
        load_config(env={}, overrides={"data.artifact_root": "s3://bucket/reco"})
    with pytest.raises(ConfigError, match="data.artifact_store: got 'var/store'"):
        load_config(env={}, overrides={"data.artifact_store": "var/store"})
    with pytest.raises(storage.StoreError, match="no filesystem for this URL"):
        storage.filesystem("nosuchscheme://bucket/reco")
    assert storage.pull(load_config(env={}), RunPaths.for_run(load_config(env={}), "2026-11-08")) == []   # off



def test_a_real_task_publishes_what_it_wrote(tmp_path, store):
    """The validate task through the orchestration wrapper the DAG calls: its run output and
    the day's validation history land in the store, marked."""
    from pipeline.orchestration import RunSpec, run_validate
    from tests.components.preprocess.helpers import RUN_DATE, generate_raw
    from tests.conftest import tiny_overrides

    spec = RunSpec(RUN_DATE.isoformat(), "manual", {**tiny_overrides(tmp_path), "data.artifact_store": store})
    config, paths = spec.load()
    generate_raw(config)
    run_validate(spec)
    assert "report.json" in (storage.listing(f"{store}/runs/{paths.ds}/manual/validation") or {})
    fs, root = storage.filesystem(store)
    assert fs.exists(f"{root}/validation_history/ds={paths.ds}.json")

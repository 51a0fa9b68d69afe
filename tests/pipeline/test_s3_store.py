"""The artifact-store mirror against a real S3 server (OpenStack Swift + s3api, tests/s3_server.py).

The store is `data.artifact_store: s3://reco/<prefix>`; its endpoint and identity reach s3fs the
documented way (docs/scaling.md): the environment, `FSSPEC_S3_ENDPOINT_URL` / `FSSPEC_S3_KEY` /
`FSSPEC_S3_SECRET` (or botocore's `AWS_ENDPOINT_URL_S3` / `AWS_ACCESS_KEY_ID` /
`AWS_SECRET_ACCESS_KEY`). Each reader that checks what was mirrored is another process with an
empty working copy and only those variables (`other_machine`): nothing of this process (its s3fs
instance, its listing cache) is shared. In this process the same variables go through fsspec's
own parser (`set_conf_env`) into its config, because fsspec reads the environment once, at import.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from pipeline import storage
from pipeline.config import PROJECT_ROOT, load_config
from pipeline.fsutil import sha256_file
from pipeline.paths import RunPaths
from tests.components.evaluate.fixtures import gate_raw, runs, standins  # noqa: F401 (fixtures)
from tests.s3_server import s3_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration      # a real S3 server (Swift), started by the tests
PART = 5 * 2**20            # S3's smallest part (and Swift s3api's `min_segment_size`)

_OTHER_MACHINE = r"""
import json, sys
from pathlib import Path
from pipeline import storage
from pipeline.config import load_config
from pipeline.fsutil import sha256_file
from pipeline.paths import RunPaths

action, root, store, day, run_id = sys.argv[1:6]
config = load_config(env={}, overrides={"data.artifact_root": root, "data.artifact_store": store})
done = getattr(storage, action)(config, RunPaths.for_run(config, day, run_id))
files = {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(Path(root).rglob("*")) if p.is_file()}
print(json.dumps({"done": done, "files": files}))
"""


def other_machine(action: str, root, store: str, day: str, run_id: str, env: dict[str, str]) -> dict:
    """`storage.pull` or `storage.push` in a fresh process that knows the store only from `env`;
    returns what it did and the sha256 of every file of its working copy."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FSSPEC_", "AWS_"))}
    done = subprocess.run([sys.executable, "-c", _OTHER_MACHINE, action, str(root), store, day, run_id],
                          env={**clean, **env, "PYTHONPATH": str(PROJECT_ROOT)}, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _digests(root) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def _use(monkeypatch, env: dict[str, str]) -> None:
    """This process's fsspec config, from `env` exactly as fsspec reads it at import."""
    import fsspec.config

    conf: dict = {}
    fsspec.config.set_conf_env(conf, env)
    monkeypatch.setitem(fsspec.config.conf, "s3", conf["s3"])


@pytest.fixture
def store(s3_server, monkeypatch):  # noqa: F811 (the fixture imported above)
    """A fresh prefix in the server's bucket, this process configured for it."""
    _use(monkeypatch, s3_server.fsspec_env())
    return f"s3://{s3_server.bucket}/reco-{uuid.uuid4().hex[:8]}"


def _machine(root, store: str, day: str = "2026-11-04", run_id: str = "manual"):
    config = load_config(env={}, overrides={"data.artifact_root": str(root), "data.artifact_store": store})
    return config, RunPaths.for_run(config, day, run_id)


def test_the_server_checks_signatures_so_a_wrong_secret_is_refused(s3_server, store, tmp_path,  # noqa: F811
                                                                 monkeypatch):
    from botocore.exceptions import ClientError

    s3_server.client().head_bucket(Bucket=s3_server.bucket)
    with pytest.raises(ClientError, match="SignatureDoesNotMatch"):
        s3_server.client(secret="not-the-secret").list_objects_v2(Bucket=s3_server.bucket)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.json").write_text("{}")
    storage.publish(tmp_path / "out", f"{store}/out")
    assert storage.listing(f"{store}/out") is not None
    _use(monkeypatch, s3_server.fsspec_env(secret="not-the-secret"))           # the store layer, refused
    with pytest.raises(PermissionError):
        storage.listing(f"{store}/out")


def test_a_shard_above_the_part_size_goes_up_in_parts_and_comes_back_whole(s3_server, store, tmp_path,  # noqa: F811
                                                                         monkeypatch):
    """s3fs uploads a file in parts from twice its chunk size (50 MiB parts, so from 100 MiB: a
    real shard); `default_block_size` does not change that, only reads. Here the chunk is S3's
    minimum, so an 11 MiB shard is a 3-part upload; the reader reads it in 5 MiB ranges."""
    import s3fs.core

    monkeypatch.setattr(s3fs.core, "calculate_chunksize", lambda size, chunksize=None, **kw: PART)
    config, paths = _machine(tmp_path / "a", store)
    shard = paths.examples_dir / "train" / "part-00000-of-00001.tfrecord.gz"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(os.urandom(2 * PART + 2**20))
    (paths.examples_dir / "manifest.json").write_text("{}")
    assert storage.push(config, paths) == ["examples"]

    key = f"{store.split('/', 3)[3]}/runs/{paths.ds}/manual/examples/train/{shard.name}"
    client = s3_server.client()
    head = client.head_object(Bucket=s3_server.bucket, Key=key)
    assert head["ETag"].strip('"').endswith("-3") and head["ContentLength"] == shard.stat().st_size
    assert not client.list_multipart_uploads(Bucket=s3_server.bucket).get("Uploads")    # completed, none left

    env = {**s3_server.fsspec_env(), "FSSPEC_S3_DEFAULT_BLOCK_SIZE": str(PART)}
    other = other_machine("pull", tmp_path / "b", store, paths.ds, "manual", env)
    assert other["done"] == ["examples"]
    assert other["files"][f"runs/{paths.ds}/manual/examples/train/{shard.name}"] == sha256_file(shard)


def test_pull_and_push_see_the_store_as_it_is_now_not_as_this_process_listed_it(s3_server, store,  # noqa: F811
                                                                               tmp_path):
    """One process (a worker running several steps, `airflow dags test`) keeps one s3fs instance,
    whose listing cache `find` fills and never refreshes. Another machine publishes between this
    process's pull and its push: the push sees that, and a later pull gets it."""
    config, paths = _machine(tmp_path / "a", store)
    history = paths.validation_history_dir
    history.mkdir(parents=True)
    (history / "ds=2026-11-02.json").write_text('{"from": "a"}')
    storage.push(config, paths)
    assert storage.pull(config, paths) == []                         # lists the history: now cached

    other_root = tmp_path / "b"
    (other_root / "validation_history").mkdir(parents=True)
    (other_root / "validation_history" / "ds=2026-11-03.json").write_text('{"from": "b"}')
    (other_root / "runs" / paths.ds / "manual" / "eval").mkdir(parents=True)
    (other_root / "runs" / paths.ds / "manual" / "eval" / "metrics.json").write_text('{"auc": 0.7}')
    other = other_machine("push", other_root, store, paths.ds, "manual", s3_server.fsspec_env())
    assert other["done"] == ["eval"]

    (history / "ds=2026-11-03.json").write_text('{"from": "a, later"}')      # the same day, written here too
    storage.push(config, paths)
    fs, root = storage.filesystem(store)
    assert json.loads(fs.cat_file(f"{root}/validation_history/ds=2026-11-03.json")) == {"from": "b"}  # kept
    shutil.rmtree(history)
    assert storage.pull(config, paths) == ["eval"]
    assert sorted(p.name for p in history.iterdir()) == ["ds=2026-11-02.json", "ds=2026-11-03.json"]


def test_botocore_variables_reach_the_store_too(s3_server, store, tmp_path):  # noqa: F811
    config, paths = _machine(tmp_path / "a", store)
    (paths.eval_dir).mkdir(parents=True)
    (paths.eval_dir / "metrics.json").write_text('{"auc": 0.7}')
    storage.push(config, paths)
    other = other_machine("pull", tmp_path / "b", store, paths.ds, "manual", s3_server.aws_env())
    assert other["done"] == ["eval"]


def test_evaluate_on_one_machine_push_on_another_and_a_third_reads_their_records(s3_server, store, runs,  # noqa: F811
                                                                                tmp_path):
    """The real evaluate and push steps through the wrapper every DAG task runs
    (pipeline/orchestration.py), on a stand-in model (tests/components/evaluate): each on its
    own working copy; only TF Serving's model base is shared, as in production."""
    from pipeline.contracts import serving
    from pipeline.contracts.evaluation import BLESSED, METRICS_FILE, REPORT_FILE
    from pipeline.orchestration import RunSpec, run_evaluate, run_push
    from tests.components.evaluate.fixtures import CLEAN_DAY
    from tests.conftest import tiny_overrides

    def spec(machine: str) -> RunSpec:
        overrides = {**tiny_overrides(tmp_path / machine), "data.raw_root": str(runs.raw),
                     "data.serving_base": str(tmp_path / "serving"), "data.artifact_store": store}
        return RunSpec(CLEAN_DAY.isoformat(), "manual", overrides)

    a_config, a_paths = spec("a").load()
    shutil.copytree(runs.standins["good"], a_paths.model_dir)       # what train left on machine a
    assert run_evaluate(spec("a"))["blessed"]
    b_config, b_paths = spec("b").load()
    pushed = run_push(spec("b"))                                     # machine b fetches train + eval
    assert pushed["pushed"] and pushed["version"] == 1
    assert _digests(b_paths.eval_dir) == _digests(a_paths.eval_dir)

    other = other_machine("pull", tmp_path / "c", store, CLEAN_DAY.isoformat(), "manual", s3_server.fsspec_env())
    assert other["done"] == ["train", "eval", "push"]
    run = f"runs/{CLEAN_DAY.isoformat()}/manual"
    for name in (METRICS_FILE, REPORT_FILE, BLESSED):
        assert other["files"][f"{run}/eval/{name}"] == sha256_file(a_paths.eval_dir / name)
    assert other["files"][f"{run}/push/{serving.PUSH_RECORD}"] == sha256_file(b_paths.push_dir / serving.PUSH_RECORD)
    assert json.loads((tmp_path / "c" / run / "push" / serving.PUSH_RECORD).read_text())["version"] == 1


def test_a_real_preprocess_output_with_its_manifest_and_item_table_mirrors_and_stages(
        s3_server, store, tmp_path, tiny_config, run_paths, preprocessed):  # noqa: F811
    """The session's real preprocess output (Beam + tf.Transform: transform graph, TFRecord
    shards, manifest, item table) and validation report, published from a copy of its working
    copy; another process fetches them into an empty one, where the real stage step checks every
    shard and the item table against the manifest."""
    from components import stage
    from pipeline.contracts import item_table
    from pipeline.contracts import manifest as M
    from tests.conftest import make_tiny_config

    source = tiny_config.data.artifact_root
    a_config = make_tiny_config(tmp_path / "a", **{"data.artifact_store": store})
    a_paths = RunPaths.for_run(a_config, run_paths.run_date, run_paths.run_id)
    for local in (run_paths.validation_dir, run_paths.transform_dir, run_paths.examples_dir,
                  run_paths.validation_history_dir):
        shutil.copytree(local, a_config.data.artifact_root / local.relative_to(source))
    assert storage.push(a_config, a_paths) == ["validation", "transform", "examples"]
    published = storage.listing(f"{store}/runs/{a_paths.ds}/{a_paths.run_id}/examples")
    assert M.MANIFEST in published and item_table.ITEM_TABLE in published

    b_config = make_tiny_config(tmp_path / "b", **{"data.artifact_store": store})
    b_paths = RunPaths.for_run(b_config, run_paths.run_date, run_paths.run_id)
    other = other_machine("pull", b_config.data.artifact_root, store, a_paths.ds, a_paths.run_id,
                          s3_server.fsspec_env())
    assert other["done"] == ["validation", "transform", "examples"]
    assert other["files"] == _digests(a_config.data.artifact_root)          # every file, byte for byte
    info = M.read(b_paths.examples_dir)
    assert info["transform_fingerprint"] == M.transform_fingerprint(b_paths.transform_dir)
    (table,) = M.item_table_record(info)
    assert item_table.read(b_paths.examples_dir / table["name"]).num_rows == table["rows"] > 0
    staged = stage.run(b_config, b_paths)                                     # verifies sizes + sha256
    assert staged.num_shards == sum(len(M.shard_records(info, split)) for split in M.SPLITS)

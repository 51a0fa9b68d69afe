"""Push end to end on real files: publish, verify in a fresh process, skip, force, backfill, mismatch."""
from __future__ import annotations

import json

import numpy as np
import pytest
from google.protobuf import text_format

from components.evaluate import run as evaluate
from components.push import PushError, run
from components.push.serving_files import models_config_text, read_warmup
from pipeline.contracts import serving
from tests.components.evaluate.fixtures import CLEAN_DAY, FIRST_DAY, MALFORMED_DAY, SHUFFLED_DAY


def _versions(config):
    return serving.list_versions(config.data.serving_base / config.push.model_name)


def _hidden(config):
    base = config.data.serving_base
    return [p for p in [*base.iterdir(), *(base / config.push.model_name).iterdir()]
            if p.name.startswith(".")]


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_blessed_push_publishes_a_verified_version_tf_serving_can_read(runs):
    config, paths = runs.make(MALFORMED_DAY)
    assert evaluate(config, paths).blessed
    result = run(config, paths)
    assert result.pushed and result.version == 1 and result.served_version == 1
    vdir = paths.model_base / "1"
    assert serving.tree_digest(vdir) == serving.tree_digest(paths.model_dir)
    record = serving.read_push_record(vdir)
    assert record["data_date"] == MALFORMED_DAY.isoformat() and record["run_id"] == paths.run_id
    assert record["evaluation"]["blessed"] and not record["forced"]
    assert record["tf_serving_flags"] == []     # the stand-in is a plain graph; the real export: tests/dags
    history = serving.read_history(config.data.serving_base, config.push.model_name, "push")[1]
    assert history["verification"]["ok"] and history["verification"]["max_abs_diff"] <= 1e-5
    assert not _hidden(config)

    from tensorflow_serving.config import model_server_config_pb2

    parsed = text_format.Parse((config.data.serving_base / "models.config").read_text(),
                               model_server_config_pb2.ModelServerConfig())
    (entry,) = parsed.model_config_list.config
    assert entry.name == "recommender" and entry.base_path == str(paths.model_base.resolve())
    assert entry.model_platform == "tensorflow" and entry.model_version_policy.HasField("latest")

    # Warmup: PredictionLog records whose requests, replayed, give the evaluated predictions.
    import tensorflow as tf

    logs = read_warmup(vdir / "assets.extra" / "tf_serving_warmup_requests")
    assert len(logs) == config.push.warmup_requests
    sample = json.loads((paths.eval_dir / "eval_sample.json").read_text())["examples"]
    fn = tf.saved_model.load(str(vdir)).signatures["serving_default"]
    for log, example in zip(logs, sample[: len(logs)], strict=True):
        request = log.predict_log.request
        assert request.model_spec.name == "recommender" and request.model_spec.signature_name == "serving_default"
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        assert inputs["image_embedding"].shape == (1, 2048)
        got = float(np.ravel(fn(**{k: tf.constant(v) for k, v in inputs.items()})["probability"])[0])
        assert got == pytest.approx(example["candidate_probability"], abs=1e-5)

    # Killed after the rename, before the record: a retry re-verifies the served copy, no new version.
    history_file = serving.history_dir(config.data.serving_base, "recommender") / "push-000001.json"
    history_file.unlink()
    again = run(config, paths)
    assert again.version == 1 and "already served" in again.reason and _versions(config) == [1]
    assert json.loads(history_file.read_text())["verification"]["ok"]


def test_shuffled_label_day_is_not_blessed_and_nothing_is_pushed(runs):
    config, paths = runs.make(SHUFFLED_DAY)
    runs.serve_by_hand(config, 1, "good", data_date=CLEAN_DAY)
    result = evaluate(config, paths)
    assert not result.blessed and result.candidate_auc < config.eval.min_auc
    push = run(config, paths)
    assert not push.pushed and push.reason.startswith("not blessed") and push.served_version == 1
    assert _versions(config) == [1] and not _hidden(config)
    assert json.loads((paths.push_dir / serving.PUSH_RECORD).read_text())["pushed"] is False
    with pytest.raises(PushError, match="needs a reason"):
        run(config.with_overrides({"push.force": True}), paths)


def test_the_cli_exits_3_on_a_skipped_push_and_0_with_exit_zero(runs, tmp_path):
    import yaml

    from components.push.__main__ import SKIPPED_EXIT, main

    config, paths = runs.make(SHUFFLED_DAY)
    runs.serve_by_hand(config, 1, "good", data_date=CLEAN_DAY)
    evaluate(config, paths)                                           # NOT_BLESSED
    config_file = tmp_path / "params.yaml"
    config_file.write_text(yaml.safe_dump(config.to_dict()))
    argv = ["push", "--date", SHUFFLED_DAY.isoformat(), "--run-id", paths.run_id, "--config", str(config_file)]
    assert main(argv) == SKIPPED_EXIT
    result_json = tmp_path / "return.json"                            # a pod's XCom sidecar file
    assert main([*argv, "--exit-zero", "--result-json", str(result_json)]) == 0
    assert json.loads(result_json.read_text())["pushed"] is False and _versions(config) == [1]


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_backfill_is_skipped_unless_allowed(runs):
    config, paths = runs.make(CLEAN_DAY)
    runs.serve_by_hand(config, 1, "bad", data_date=MALFORMED_DAY)       # served data is newer
    assert evaluate(config, paths).blessed
    result = run(config, paths)
    assert not result.pushed and "backfill" in result.reason and "2026-11-04" in result.reason
    assert _versions(config) == [1]
    forced = run(config.with_overrides({"push.allow_backfill": True}), paths)
    assert forced.pushed and forced.version == 2
    assert serving.read_push_record(paths.model_base / "2")["backfill"] is True


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_verification_mismatch_unpublishes_and_fails(runs):
    config, paths = runs.make(CLEAN_DAY, model="bad")
    runs.serve_by_hand(config, 1, "good", data_date=FIRST_DAY)
    evaluate(config, paths)
    sample_file = paths.eval_dir / "eval_sample.json"
    sample = json.loads(sample_file.read_text())
    for example in sample["examples"]:
        example["candidate_probability"] += 1e-3             # what "eval saw" differs from serving
    sample_file.write_text(json.dumps(sample))
    with pytest.raises(PushError, match="verification of version 2 failed, unpublished"):
        run(config.with_overrides({"push.force": True, "push.force_reason": "test: push the bad model"}), paths)
    assert _versions(config) == [1] and not _hidden(config)
    record = serving.read_history(config.data.serving_base, config.push.model_name, "push")[2]
    assert record["unpublished"] and not record["verification"]["ok"]
    assert serving.next_version(config.data.serving_base, config.push.model_name) == 3   # 2 stays burned
    assert serving.read_push_record(paths.model_base / "1")["data_date"] == FIRST_DAY.isoformat()


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_an_export_without_facts_is_pushed_with_conservative_flags(runs, caplog):
    """A model exported before the train step recorded its facts (a retry after an upgrade)."""
    config, paths = runs.make(MALFORMED_DAY)
    (paths.model_dir / serving.ASSETS_EXTRA / serving.EXPORT_FACTS).unlink()
    assert evaluate(config, paths).blessed
    with caplog.at_level("WARNING", logger="pipeline.contracts.serving"):
        result = run(config, paths)
    assert result.pushed and f"no {serving.EXPORT_FACTS}" in caplog.text
    graph_marks_xla = serving.XLA_MARK in (paths.model_dir / "saved_model.pb").read_bytes()
    assert serving.read_push_record(paths.model_base / "1")["tf_serving_flags"] == (
        [serving.XLA_SERVING_FLAG] if graph_marks_xla else [])


def test_the_verdict_covers_the_export_facts(runs):
    """The facts travel with the model into the version, so the gate's digest covers them."""
    config, paths = runs.make(MALFORMED_DAY)
    assert evaluate(config, paths).blessed
    serving.write_export_facts(paths.model_dir, [serving.XLA_SERVING_FLAG])      # changed after the gate
    with pytest.raises(PushError, match="not the model that was evaluated"):
        run(config, paths)
    assert _versions(config) == []


def test_models_config_keeps_other_models_and_rejects_garbage(tmp_path):
    from tensorflow_serving.config import model_server_config_pb2

    path = tmp_path / "models.config"
    path.write_text('model_config_list { config { name: "other" base_path: "/m/other" '
                    'model_platform: "tensorflow" } }')
    text = models_config_text(path, "recommender", tmp_path / "recommender")
    parsed = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
    assert [c.name for c in parsed.model_config_list.config] == ["other", "recommender"]
    path.write_text("model_config_list { config { nme: 1 }")
    with pytest.raises(ValueError, match="not a ModelServerConfig"):
        models_config_text(path, "recommender", tmp_path / "recommender")


def test_warmup_covers_each_configured_batch_shape(tmp_path):
    """One batch-1 request per example, then one request per larger size (rows cycled): each
    shape the XLA export will see compiles at load, not on a client's first request."""
    import tensorflow as tf

    from components.push.serving_files import warmup_records, write_warmup

    examples = [{"title": f"item {i}", "image_embedding": [float(i)] * 2048, "history_item_ids": [i + 1] * (i + 1),
                 "item_id": i + 1, "user_id": 7, "platform": "web", "hour_of_day": 12} for i in range(3)]
    path = tmp_path / "assets.extra" / "tf_serving_warmup_requests"
    write_warmup(path, warmup_records(examples, "recommender", (16, 1, 4)))
    shapes = [tuple(tf.make_ndarray(log.predict_log.request.inputs["history_item_ids"]).shape)
              for log in read_warmup(path)]
    assert shapes == [(1, 1), (1, 2), (1, 3), (4, 3), (16, 3)]
    titles = tf.make_ndarray(read_warmup(path)[-1].predict_log.request.inputs["title"])
    assert [t.decode() for t in titles[:4]] == ["item 0", "item 1", "item 2", "item 0"]
    assert len(warmup_records(examples, "recommender", (8,))) == 1      # no batch-1 requests asked for
    request = read_warmup(path)[0].predict_log.request
    assert set(request.inputs) == {"title", "image_embedding", "history_item_ids", "item_id", "user_id",
                                   "platform", "hour_of_day"}
    assert tf.make_ndarray(request.inputs["hour_of_day"]).dtype == np.int64

"""A push killed mid-copy, rollback (through the CLI) after a forced push, and retention."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from components.evaluate import run as evaluate
from components.push import RollbackError, rollback, run
from components.push.__main__ import main
from components.push.publish import PublishError, apply_retention
from pipeline.config import PROJECT_ROOT
from pipeline.contracts import serving
from tests.components.evaluate.fixtures import CLEAN_DAY, FIRST_DAY, MALFORMED_DAY

pytestmark = pytest.mark.integration


def _versions(config):
    return serving.list_versions(config.data.serving_base / config.push.model_name)


def _config_file(config, tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    return path


# The push CLI with every copied file followed by a pause, so the test can SIGKILL it mid-copy.
_SLOW_COPY = """
import shutil, sys, time
real = shutil.copy2
def copy2(*args, **kwargs):
    out = real(*args, **kwargs)
    time.sleep(PAUSE)
    return out
shutil.copy2 = copy2
from components.push.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def _slow_push(config_file, paths, pause_s: float = 3.0) -> subprocess.Popen:
    """A forced push CLI in its own process whose every copied file takes `pause_s` longer."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    cmd = [sys.executable, "-c", _SLOW_COPY.replace("PAUSE", str(pause_s)), "push", "--date",
           paths.run_date.isoformat(), "--run-id", paths.run_id, "--config", str(config_file), "--force",
           "--reason", "crash test"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _staged(config):
    """Staging temps that already hold at least one copied file."""
    return [p for p in config.data.serving_base.glob(".recommender.push-*")
            if any(f.is_file() for f in p.rglob("*"))]


def test_push_killed_mid_copy_leaves_only_complete_versions_and_a_rerun_succeeds(runs, tmp_path):
    config, paths = runs.make(CLEAN_DAY)
    served = runs.serve_by_hand(config, 1, "good", data_date=FIRST_DAY)
    served_digest = serving.tree_digest(served)
    config, paths = runs.make(CLEAN_DAY, model="bad")          # a different model than the served one
    evaluate(config, paths)
    proc = _slow_push(_config_file(config, tmp_path), paths)
    deadline = time.monotonic() + 120
    while not _staged(config):
        assert proc.poll() is None, f"push ended before the kill: {proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "the push never started copying"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # What TF Serving can see: only the complete version 1, untouched; the partial copy is hidden.
    assert _versions(config) == [1] and serving.tree_digest(served) == served_digest
    partial = _staged(config)
    assert partial and not (partial[0] / "variables" / "variables.index").exists()
    assert not (config.data.serving_base / "models.config").exists()

    result = run(config.with_overrides({"push.force": True, "push.force_reason": "rerun after crash"}), paths)
    assert result.pushed and result.version == 2 and _versions(config) == [1, 2]
    assert serving.tree_digest(paths.model_base / "2") == serving.tree_digest(paths.model_dir)
    assert not [p for p in config.data.serving_base.iterdir() if p.name.startswith(".")]


def test_forced_push_then_rollback_serves_the_previous_model_again(runs, tmp_path):
    config, good = runs.make(CLEAN_DAY, run_id="good")
    assert evaluate(config, good).blessed and run(config, good).version == 1
    config, bad = runs.make(MALFORMED_DAY, model="bad", run_id="bad")
    assert not evaluate(config, bad).blessed
    assert not run(config, bad).pushed
    forced = run(config.with_overrides({"push.force": True, "push.force_reason": "INC-42: ship despite the gate"}), bad)
    assert forced.version == 2
    record = serving.read_push_record(bad.model_base / "2")
    assert record["forced"] and record["force_reason"] == "INC-42: ship despite the gate"
    assert record["evaluation"]["blessed"] is False

    assert main(["rollback", "--reason", "CTR dropped after v2", "--config",
                 str(_config_file(config, tmp_path))]) == 0
    assert _versions(config) == [1, 2, 3]                    # v3 (served) = the bytes of v1
    model_base = good.model_base
    assert serving.tree_digest(model_base / "3") == serving.tree_digest(model_base / "1")
    restored = serving.read_push_record(model_base / "3")
    assert restored["source"] == "rollback" and restored["restored_from"] == 1
    assert restored["rolled_back_from"] == 2 and restored["data_date"] == CLEAN_DAY.isoformat()
    history = serving.read_history(config.data.serving_base, "recommender", "rollback")[3]
    assert history["reason"] == "CTR dropped after v2" and history["verification"]["ok"]
    assert (model_base / "3" / "assets.extra" / "tf_serving_warmup_requests").stat().st_size > 0
    # Nothing older is left: v2 was rolled back from, v1 is what serves now.
    with pytest.raises(RollbackError, match="no earlier version"):
        rollback(config, "again")


def test_retention_keeps_k_versions_never_the_served_or_previous(runs):
    config, paths = runs.make(CLEAN_DAY, **{"push.keep_versions": 3})
    for version in (1, 2, 4, 5):
        runs.serve_by_hand(config, version, "bad", data_date=FIRST_DAY)
    assert evaluate(config, paths).blessed
    assert run(config, paths).version == 6
    assert _versions(config) == [4, 5, 6]
    model_base = paths.model_base
    assert apply_retention(model_base, keep=1) == [4]       # below 2: served + previous still kept
    assert _versions(config) == [5, 6]
    assert not [p for p in model_base.iterdir() if p.name.startswith(".")]


def test_rollback_trusts_the_recorded_digest_and_refuses_tampered_files(runs):
    config, good = runs.make(CLEAN_DAY, run_id="good")
    assert evaluate(config, good).blessed and run(config, good).version == 1
    config, bad = runs.make(MALFORMED_DAY, model="bad", run_id="bad")
    evaluate(config, bad)
    assert run(config.with_overrides({"push.force": True, "push.force_reason": "test"}), bad).version == 2
    base = config.data.serving_base
    (base / ".models.config.tmp-deadbeef").write_text("left by a killed push")
    variables = next((good.model_base / "1" / "variables").glob("variables.data-*"))
    variables.write_bytes(variables.read_bytes()[:-8] + b"tampered")           # v1 no longer its bytes
    with pytest.raises(PublishError, match="digest"):
        rollback(config, "CTR dropped after v2")
    assert _versions(config) == [1, 2] and not [p for p in base.iterdir() if p.name.startswith(".")]


def test_two_pushes_at_once_are_serialised_by_the_lock(runs, tmp_path):
    """Two push processes for the same model at the same time (a manual push racing the nightly
    one): the lock lets one stage and publish at a time; both versions end complete."""
    config, first = runs.make(CLEAN_DAY, run_id="first")
    evaluate(config, first)
    config, second = runs.make(CLEAN_DAY, model="bad", run_id="second")
    evaluate(config, second)
    config_file = _config_file(config, tmp_path)
    procs = [_slow_push(config_file, paths, pause_s=0.3) for paths in (first, second)]
    most_staging, both_alive_while_staging = 0, False
    deadline = time.monotonic() + 300
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "the pushes never finished"
        staging = len(_staged(config))
        most_staging = max(most_staging, staging)
        both_alive_while_staging |= staging == 1 and all(p.poll() is None for p in procs)
        time.sleep(0.02)
    assert [p.returncode for p in procs] == [0, 0], [p.stderr.read().decode()[-2000:] for p in procs]
    assert both_alive_while_staging and most_staging == 1      # they overlapped; one copied at a time
    assert _versions(config) == [1, 2]
    served = {serving.tree_digest(first.model_base / str(v)) for v in (1, 2)}
    assert served == {serving.tree_digest(first.model_dir), serving.tree_digest(second.model_dir)}
    assert not [p for p in config.data.serving_base.iterdir() if p.name.startswith(".recommender.push-")]


def test_rollback_to_a_given_version_through_the_cli(runs, tmp_path):
    config, good = runs.make(CLEAN_DAY, run_id="good")
    assert evaluate(config, good).blessed and run(config, good).version == 1
    config, bad = runs.make(MALFORMED_DAY, model="bad", run_id="bad")
    evaluate(config, bad)
    forced = config.with_overrides({"push.force": True, "push.force_reason": "test"})
    assert run(forced, bad).version == 2
    runs.serve_by_hand(config, 3, "bad", data_date=CLEAN_DAY)
    assert main(["rollback", "--reason", "back to the first model", "--to-version", "1", "--config",
                 str(_config_file(config, tmp_path))]) == 0
    assert _versions(config) == [1, 2, 3, 4]
    assert serving.tree_digest(good.model_base / "4") == serving.tree_digest(good.model_base / "1")
    assert serving.read_push_record(good.model_base / "4")["restored_from"] == 1
    with pytest.raises(RollbackError, match="9"):
        rollback(config, "no such version", to_version=9)
    # Version 4 is version 1's model: restoring 1 again would record the served bytes as rolled
    # back (push would then refuse them); refused, nothing published.
    with pytest.raises(RollbackError, match=r"version 1: its model is the served one \(version 4\)"):
        rollback(config, "again", to_version=1)
    assert _versions(config) == [1, 2, 3, 4]


def _tree_bytes(folder) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_full_serving_disk_is_named_serves_nothing_partial_and_a_rerun_succeeds(runs, tmp_path, monkeypatch):
    from components.push import publish
    from pipeline.fsutil import DiskFullError
    from tests.small_disk import fill, small_disk

    need = _tree_bytes(runs.make(CLEAN_DAY)[1].model_dir)
    with small_disk(tmp_path / "serving-full", need + 2**20) as disk:    # already full: it can tell
        config, paths = runs.make(CLEAN_DAY, **{"data.serving_base": str(disk)})
        evaluate(config, paths)
        filler = fill(disk)
        with pytest.raises(DiskFullError, match=rf"{disk}: copying .* as version 1 needs"):
            run(config, paths)
        assert _versions(config) == [] and not _staged(config)

        filler.unlink()                                                   # fits, then fills mid-copy
        real_copy, fillers = publish.shutil.copy2, []

        def copy_then_fill(*args, **kwargs):
            out = real_copy(*args, **kwargs)
            if not fillers:
                fillers.append(fill(disk))
            return out

        monkeypatch.setattr(publish.shutil, "copy2", copy_then_fill)
        with pytest.raises(DiskFullError, match="disk full while copying"):
            run(config, paths)
        assert _versions(config) == [] and not list(disk.glob(".recommender.push-*"))
        assert not (disk / "models.config").exists()                   # TF Serving sees nothing new
        monkeypatch.setattr(publish.shutil, "copy2", real_copy)
        fillers[0].unlink()
        result = run(config, paths)
        assert result.pushed and result.version == 1 and _versions(config) == [1]


def test_tflite_through_push_writes_the_edge_model_beside_the_served_version(runs, trained, run_paths):
    """`push.tflite: true` through `push.run`, on the session's really trained export: the served
    version is published first, then the TF Lite core model and its report land in the run's
    push folder (not in TF Serving's dir)."""
    import shutil


    config, paths = runs.make(CLEAN_DAY, model=None, **{"push.tflite": True, "eval.min_auc": 0.0})
    shutil.copytree(run_paths.model_dir, paths.model_dir)
    assert evaluate(config, paths).blessed
    result = run(config, paths)
    assert result.pushed and _versions(config) == [1]
    report = json.loads((paths.push_dir / serving.PUSH_RECORD).read_text())["tflite"]
    assert report["converted"] and report["core"]["mode"] == "builtins", report
    assert (paths.push_dir / "model.tflite").stat().st_size > 0
    assert not list((paths.model_base / "1").rglob("*.tflite"))


def test_a_real_export_is_warmed_up_and_verified_through_both_client_signatures(runs, trained, run_paths):
    """The session's real export: evaluate scores its sample by id too, push replays both
    signatures as warmup and verifies both, and a by-id answer unlike evaluate's fails the push."""
    import shutil

    import tensorflow as tf

    from components.push import PushError
    from components.push.serving_files import read_warmup

    config, paths = runs.make(CLEAN_DAY, model=None, **{"eval.min_auc": 0.0})
    shutil.copytree(run_paths.model_dir, paths.model_dir)
    assert evaluate(config, paths).blessed
    sample_file = paths.eval_dir / "eval_sample.json"
    good = sample_file.read_text()
    sample = json.loads(good)
    assert all("candidate_by_id_probability" in e for e in sample["examples"])
    for example in sample["examples"]:
        example["candidate_by_id_probability"] += 1e-3         # by id, "eval saw" something else
    sample_file.write_text(json.dumps(sample))
    with pytest.raises(PushError, match=r"verification of version 1 failed.*serving_by_id 0\.001"):
        run(config, paths)
    assert _versions(config) == []

    sample_file.write_text(good)
    assert run(config, paths).pushed and _versions(config) == [2]
    history = serving.read_history(config.data.serving_base, config.push.model_name, "push")[2]
    assert history["verification"]["ok"] and "serving_by_id" in history["verification"]["detail"]
    assert set(history["expected_by_signature"]) == {"serving_default", "serving_by_id"}
    logs = read_warmup(paths.model_base / "2" / "assets.extra" / "tf_serving_warmup_requests")
    by_signature = {}
    for log in logs:
        by_signature.setdefault(log.predict_log.request.model_spec.signature_name, []).append(log)
    assert {k: len(v) for k, v in by_signature.items()} == {"serving_default": config.push.warmup_requests,
                                                           "serving_by_id": config.push.warmup_requests}
    request = by_signature["serving_by_id"][0].predict_log.request
    assert set(request.inputs) == {"item_id", "history_item_ids", "user_id", "platform", "hour_of_day"}
    fn = tf.saved_model.load(str(paths.model_base / "2")).signatures["serving_by_id"]
    got = fn(**{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})["probability"]
    assert float(got.numpy().ravel()[0]) == pytest.approx(json.loads(good)["examples"][0][
        "candidate_by_id_probability"], abs=1e-5)


def _same_predictions_other_digest(runs, model_dir):
    """The stand-in with one more export asset: other bytes (digest), same answers."""
    (model_dir / "assets.extra").mkdir(exist_ok=True)
    (model_dir / "assets.extra" / "note.txt").write_text("retrained")


def test_a_rolled_back_model_stays_rolled_back_when_its_run_is_retried(runs, tmp_path):
    config, one = runs.make(CLEAN_DAY, run_id="one")
    assert evaluate(config, one).blessed and run(config, one).version == 1
    config, two = runs.make(CLEAN_DAY, run_id="two")
    _same_predictions_other_digest(runs, two.model_dir)
    assert evaluate(config, two).blessed and run(config, two).version == 2
    assert main(["rollback", "--reason", "INC-7: CTR fell", "--config", str(_config_file(config, tmp_path))]) == 0
    assert _versions(config) == [1, 2, 3]

    with pytest.raises(serving.RolledBackError, match=r"rollback record version 3 .*rollback-000003.json\) took "
                                                      r"version 2 away at .*'INC-7: CTR fell'"):
        run(config, two)                                   # an Airflow retry / "clear task" of that night
    done = subprocess.run([sys.executable, "-m", "components.push", "push", "--date", CLEAN_DAY.isoformat(),
                           "--run-id", "two", "--config", str(_config_file(config, tmp_path))],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len([x for x in done.stderr.splitlines() if "push refused: RolledBackError" in x]) == 1
    assert _versions(config) == [1, 2, 3]

    forced = run(config.with_overrides({"push.force": True, "push.force_reason": "INC-7 fixed upstream"}), two)
    assert forced.version == 4
    assert serving.read_push_record(two.model_base / "4")["overrides_rollback"] == 3


def _children(pid: int, needle: str) -> list[int]:
    found = []
    for stat in os.listdir("/proc"):
        if not stat.isdigit():
            continue
        try:
            with open(f"/proc/{stat}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{stat}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        if ppid == pid and needle in cmdline:
            found.append(int(stat))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_push_killed_while_verifying_leaves_no_verifier_and_the_retry_finishes(runs, tmp_path):
    config, paths = runs.make(CLEAN_DAY)
    assert evaluate(config, paths).blessed
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "components.push", "push", "--date", CLEAN_DAY.isoformat(),
                             "--run-id", paths.run_id, "--config", str(_config_file(config, tmp_path))],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (verifiers := _children(proc.pid, "components.push.verify")):
        assert proc.poll() is None, f"push ended before verifying: {proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "push never started its verifier"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 15
    while any(_alive(v) for v in verifiers):
        assert time.monotonic() < deadline, f"verifier {verifiers} outlived the killed push"
        time.sleep(0.05)
    assert _versions(config) == [1]                        # published, never recorded as verified
    result = run(config, paths)
    assert result.pushed and result.version == 1
    assert serving.read_history(config.data.serving_base, "recommender", "push")[1]["verification"]["ok"]
    assert not [p for p in paths.model_base.iterdir() if p.name.startswith(".")]      # its temp went too


def test_a_disk_that_fills_while_the_warmup_is_written_leaves_nothing_and_says_so(runs, tmp_path, monkeypatch):
    from components.push import publish
    from pipeline.fsutil import DiskFullError
    from tests.small_disk import fill, small_disk

    need = _tree_bytes(runs.make(CLEAN_DAY)[1].model_dir)
    with small_disk(tmp_path / "serving", need + 2**20) as disk:
        config, paths = runs.make(CLEAN_DAY, **{"data.serving_base": str(disk)})
        evaluate(config, paths)
        real_digest, fillers = publish.serving.tree_digest, []

        def digest_then_fill(root):                         # the model is copied; the disk fills
            out = real_digest(root)
            if root.name.startswith(".") and not fillers:
                fillers.append(fill(disk))
            return out

        monkeypatch.setattr(publish.serving, "tree_digest", digest_then_fill)
        with pytest.raises(DiskFullError, match=r"disk full while copying .* free space there and retry"):
            run(config, paths)
        assert fillers and _versions(config) == [] and not list(disk.glob(".recommender.push-*"))
        monkeypatch.setattr(publish.serving, "tree_digest", real_digest)
        fillers[0].unlink()
        result = run(config, paths)
        warmup = paths.model_base / "1" / "assets.extra" / serving.WARMUP_FILE
        assert result.version == 1 and warmup.stat().st_size > 0

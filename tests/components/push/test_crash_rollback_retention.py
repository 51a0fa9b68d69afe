"""A push killed mid-copy, rollback (through the CLI) after a forced push, and retention."""
from __future__ import annotations

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
    time.sleep(3)
    return out
shutil.copy2 = copy2
from components.push.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


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
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    cmd = [sys.executable, "-c", _SLOW_COPY, "push", "--date", CLEAN_DAY.isoformat(), "--run-id",
           paths.run_id, "--config", str(_config_file(config, tmp_path)), "--force", "--reason", "crash test"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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

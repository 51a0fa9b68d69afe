"""The chief SIGKILLed while it exports: nothing half-exported is published, and the retry
exports from the backup of the last epoch instead of training again."""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

from components import train
from components.train.gang.launcher import GangError
from pipeline.paths import RunPaths
from tests.components.train.conftest import worker_processes

pytestmark = pytest.mark.integration


def _kill_chief_once_export_starts(paths: RunPaths, facts: dict) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if list(paths.train_dir.glob(".model.export-*")):
            os.kill(worker_processes(index=0)[0].pid, signal.SIGKILL)
            facts["killed"] = True
            return
        time.sleep(0.02)


def test_a_kill_during_export_publishes_nothing_and_the_retry_does_not_retrain(train_config, train_data):
    source, _ = train_data
    config = train_config.with_overrides({"train.epochs": 2})
    paths = RunPaths.for_run(config, source.run_date, "export-kill")
    shutil.rmtree(paths.run_dir, ignore_errors=True)
    shutil.rmtree(paths.staged_dir, ignore_errors=True)
    shutil.copytree(source.transform_dir, paths.transform_dir)
    shutil.copytree(source.staged_dir, paths.staged_dir)

    facts: dict = {}
    watcher = threading.Thread(target=_kill_chief_once_export_starts, args=(paths, facts))
    watcher.start()
    with pytest.raises(GangError, match=r"worker-0 .* exited with code -9 \(SIGKILL\)"):
        train.run(config, paths)
    watcher.join()
    assert facts.get("killed")
    assert not paths.model_dir.exists()                   # TF Serving / evaluate see no model
    assert paths.backup_dir.exists()                      # the trained epochs are kept

    started = time.monotonic()
    result = train.run(config, paths)                      # the orchestrator's retry
    assert result.initial_epoch == 2, result               # resumed after the last epoch: no retraining
    assert (paths.model_dir / "saved_model.pb").exists() and not list(paths.train_dir.glob(".model.export-*"))
    assert not paths.backup_dir.exists()
    assert time.monotonic() - started < 300

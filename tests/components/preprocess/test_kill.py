"""A preprocess CLI process SIGKILLed mid-run leaves nothing a reader would take for complete."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from pipeline.config import PROJECT_ROOT
from pipeline.contracts import manifest as M
from pipeline.fsutil import sha256_file
from tests.components.preprocess.helpers import RUN_DATE

pytestmark = pytest.mark.integration


def _start_cli(config, tmp_path, run_id: str, code: str | None = None) -> subprocess.Popen:
    """The preprocess CLI in its own session; `code` replaces `-m components.preprocess`."""
    cfg = tmp_path / f"{run_id}.yaml"
    cfg.write_text(yaml.safe_dump(config.to_dict()))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env = {k: v for k, v in env.items() if not k.startswith("RECO__")}
    entry = ["-c", code] if code else ["-m", "components.preprocess"]
    return subprocess.Popen(
        [sys.executable, *entry, "--config", str(cfg), "--date", str(RUN_DATE), "--run-id", run_id],
        env=env, cwd=PROJECT_ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_mid_run(proc: subprocess.Popen, run_dir, timeout: float = 180.0) -> None:
    """SIGKILL the CLI's process group once it is writing (temp output exists), while it runs."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        temps = list(run_dir.glob(".examples.tmp-*")) if run_dir.exists() else []
        shards = [p for t in temps for p in t.glob("train/*.tfrecord")]
        if temps and seen is None:
            seen = time.monotonic()
        if shards or (seen is not None and time.monotonic() - seen > 4.0):
            break
        assert proc.poll() is None, "preprocess finished before it could be killed"
        time.sleep(0.02)
    assert proc.poll() is None, "preprocess finished before it could be killed"
    assert seen is not None, "preprocess never started writing"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_killed_first_run_publishes_nothing(tiny_config, raw_data, tmp_path):
    from components.preprocess.run import _temp_dirs
    from components.stage import StageError
    from components.stage import run as stage
    from pipeline.paths import RunPaths

    paths = RunPaths.for_run(tiny_config, RUN_DATE, "killed")
    shutil.rmtree(paths.run_dir, ignore_errors=True)
    _kill_mid_run(_start_cli(tiny_config, tmp_path, "killed"), paths.run_dir)

    assert not paths.examples_dir.exists() and not paths.transform_dir.exists()
    with pytest.raises(FileNotFoundError):
        M.read(paths.examples_dir)
    with pytest.raises(StageError, match="no manifest"):
        stage(tiny_config, paths)
    leftovers = [p.name for p in paths.run_dir.iterdir() if p.name != "validation"]
    assert leftovers and all(name.startswith(".") for name in leftovers)   # hidden temps only
    _temp_dirs(paths)                                                      # what the next run does first
    assert not list(paths.run_dir.glob(".examples.*"))


def test_killed_rerun_keeps_the_previous_complete_output(tiny_config, pp_paths, pp_result, tmp_path):
    from pipeline.paths import RunPaths

    paths = RunPaths.for_run(tiny_config, RUN_DATE, "killed-rerun")
    shutil.rmtree(paths.run_dir, ignore_errors=True)
    shutil.copytree(pp_paths.examples_dir, paths.examples_dir)
    shutil.copytree(pp_paths.transform_dir, paths.transform_dir)
    before = M.read(paths.examples_dir)
    _kill_mid_run(_start_cli(tiny_config, tmp_path, "killed-rerun"), paths.run_dir)

    after = M.read(paths.examples_dir)           # old output still complete and self-consistent
    assert after == before
    assert after["transform_fingerprint"] == M.transform_fingerprint(paths.transform_dir)
    for split in after["splits"].values():
        for shard in split["shards"]:
            assert sha256_file(paths.examples_dir / shard["name"]) == shard["sha256"]


# Runs the preprocess CLI with os.rename wrapped: the process SIGKILLs itself right after the
# new transform graph is renamed in and before the new examples are, the window in which
# neither the old nor the new output is in place.
_KILL_BETWEEN_RENAMES = """
import os, signal, sys
real = os.rename
def rename(src, dst, *a, **k):
    real(src, dst, *a, **k)
    if ".transform.tmp-" in str(src) and os.path.basename(str(dst)) == "transform":
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename
from components.preprocess.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def test_kill_between_the_publish_renames_keeps_the_last_good_output(tiny_config, pp_paths, pp_result,
                                                                      tmp_path):
    from components.stage import run as stage
    from pipeline.paths import RunPaths

    paths = RunPaths.for_run(tiny_config, RUN_DATE, "killed-publish")
    shutil.rmtree(paths.run_dir, ignore_errors=True)
    shutil.copytree(pp_paths.examples_dir, paths.examples_dir)
    shutil.copytree(pp_paths.transform_dir, paths.transform_dir)
    before = M.read(paths.examples_dir)
    proc = _start_cli(tiny_config, tmp_path, "killed-publish", code=_KILL_BETWEEN_RENAMES)
    assert proc.wait(timeout=300) == -signal.SIGKILL
    assert not paths.examples_dir.exists()                         # killed inside the window
    assert M.transform_fingerprint(paths.transform_dir) != before["transform_fingerprint"]

    staged = stage(tiny_config, paths)                             # a reader: the old pair is back
    assert M.read(paths.examples_dir) == before
    assert before["transform_fingerprint"] == M.transform_fingerprint(paths.transform_dir)
    assert M.read(staged.staged_dir)["run_id"] == before["run_id"]

    rerun = _start_cli(tiny_config, tmp_path, "killed-publish")    # the retry publishes the new pair
    assert rerun.wait(timeout=300) == 0
    after = M.read(paths.examples_dir)
    assert after["run_id"] == "killed-publish"
    assert after["transform_fingerprint"] == M.transform_fingerprint(paths.transform_dir)
    assert not [p for p in paths.run_dir.iterdir() if p.name.startswith(".")]

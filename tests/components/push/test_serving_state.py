"""The serving directory's state is respected (issue #42 item 6), each fault injected for real:
a pin on-call wrote into models.config, a models.config that does not parse, a hotfix copied in
by hand, a lost serving volume, and a serving dir push may not write to."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from google.protobuf import text_format

from components.evaluate import run as evaluate
from components.push import RollbackError, rollback, run
from components.push.__main__ import SKIPPED_EXIT, main
from pipeline.config import PROJECT_ROOT
from pipeline.contracts import serving
from tests.components.evaluate.fixtures import CLEAN_DAY, FIRST_DAY, MALFORMED_DAY


def _versions(config) -> list[int]:
    return serving.list_versions(config.data.serving_base / config.push.model_name)


def _hidden(config) -> list[Path]:
    base = config.data.serving_base
    folders = [base, base / config.push.model_name, serving.history_dir(base, config.push.model_name)]
    return [p for folder in folders if folder.is_dir() for p in folder.iterdir() if p.name.startswith(".")]


def _config_file(config, tmp_path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    return path


def _push_cli(config, paths, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "components.push", "push", "--date", paths.run_date.isoformat(),
                           "--run-id", paths.run_id, "--config", str(_config_file(config, tmp_path))],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)


def _refusal(done: subprocess.CompletedProcess) -> str:
    """The CLI's one refusal line (exit 2, no traceback)."""
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == "", done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if "push refused:" in x]
    return line


def _pin(config, *versions: int) -> Path:
    """What on-call writes into models.config in an incident."""
    path = config.data.serving_base / serving.MODELS_CONFIG
    model_base = (config.data.serving_base / config.push.model_name).resolve()
    path.write_text(f'model_config_list {{ config {{ name: "{config.push.model_name}" base_path: "{model_base}" '
                    f'model_platform: "tensorflow" model_version_policy {{ specific {{ '
                    f'{" ".join(f"versions: {v}" for v in versions)} }} }} }} }}\n')
    return path


def _served_policy(config):
    from tensorflow_serving.config import model_server_config_pb2

    parsed = text_format.Parse((config.data.serving_base / serving.MODELS_CONFIG).read_text(),
                               model_server_config_pb2.ModelServerConfig())
    (entry,) = parsed.model_config_list.config
    return entry.model_version_policy


def _retrained(paths) -> None:
    """The candidate with one more export asset: other bytes (digest), the same answers."""
    (paths.model_dir / "assets.extra").mkdir(exist_ok=True)
    (paths.model_dir / "assets.extra" / "note.txt").write_text("retrained")


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_pin_in_models_config_is_kept_is_the_gates_baseline_and_survives_retention(runs, caplog):
    config, paths = runs.make(CLEAN_DAY, **{"push.keep_versions": 2})
    runs.serve_by_hand(config, 1, "good", data_date=FIRST_DAY)
    runs.serve_by_hand(config, 2, "bad", data_date=FIRST_DAY)          # the bad one that was served
    _pin(config, 1)                                                     # on-call pins the good one
    _retrained(paths)
    result = evaluate(config, paths)
    assert result.baseline_version == 1 and result.blessed             # judged against what users get

    with caplog.at_level("WARNING"):
        pushed = run(config, paths)
    assert not pushed.pushed and pushed.version == 3 and pushed.served_version == 1, pushed
    assert "published but not served" in pushed.reason and "pins version(s) [1]" in pushed.reason
    warnings = [r.getMessage() for r in caplog.records if "pin kept" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0] and "version 3 is published but not served" in warnings[0]
    policy = _served_policy(config)
    assert policy.HasField("specific") and list(policy.specific.versions) == [1]
    assert _versions(config) == [1, 2, 3]                               # keep_versions 2, the pinned one kept
    assert serving.served_version(paths.model_base) == 1
    history = serving.read_history(config.data.serving_base, "recommender", "push")[3]
    assert history["verification"]["ok"] and history["kept_pin"] == [1]

    caplog.clear()                                                      # a retry publishes nothing new
    argv = ["push", "--date", CLEAN_DAY.isoformat(), "--run-id", paths.run_id, "--config",
            str(_config_file(config, runs.root))]
    assert main(argv) == SKIPPED_EXIT and _versions(config) == [1, 2, 3]


def test_a_rollback_under_a_pin_refuses_naming_it(runs):
    config, _ = runs.make(CLEAN_DAY)
    runs.serve_by_hand(config, 1, "good", data_date=FIRST_DAY)
    runs.serve_by_hand(config, 2, "bad", data_date=FIRST_DAY)
    pin = _pin(config, 1).read_text()
    with pytest.raises(RollbackError, match=r"pins recommender to version\(s\) \[1\] by hand"):
        rollback(config, "CTR dropped")
    assert _versions(config) == [1, 2] and (config.data.serving_base / serving.MODELS_CONFIG).read_text() == pin


@pytest.mark.integration      # the step's CLI in a child process loads TensorFlow (tests/tiers.py)
def test_an_unparsable_models_config_is_refused_before_anything_is_published(runs, tmp_path):
    config, paths = runs.make(CLEAN_DAY)
    runs.serve_by_hand(config, 1, "bad", data_date=FIRST_DAY)
    assert evaluate(config, paths).blessed
    broken = (f'model_config_list {{ config {{ name: "recommender" base_path: "{paths.model_base}" '
              'model_version_policy { specific { versions: 1 } }\n')         # a pin typed without its last brace
    (config.data.serving_base / serving.MODELS_CONFIG).write_text(broken)
    line = _refusal(_push_cli(config, paths, tmp_path))
    assert f"push refused: ServingDirError: {config.data.serving_base / 'models.config'} is not a " \
           "ModelServerConfig text proto" in line, line
    assert _versions(config) == [1] and not _hidden(config)
    assert serving.read_history(config.data.serving_base, "recommender", "push") == {}   # nothing verified either
    assert (config.data.serving_base / serving.MODELS_CONFIG).read_text() == broken
    with pytest.raises(serving.ServingDirError, match="not a ModelServerConfig"):
        evaluate(config, paths)                                         # the gate cannot tell what serves


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_hand_copied_hotfix_is_never_replaced_by_a_backfill_unless_forced(runs):
    config, paths = runs.make(CLEAN_DAY)                                # data date 11-03
    runs.serve_by_hand(config, 1, "bad", data_date=MALFORMED_DAY)       # pushed for 11-04
    hotfix = runs.serve_by_hand(config, 2, "good")                      # on-call's copy: no push record
    _retrained(paths)
    assert evaluate(config, paths).blessed
    skipped = run(config, paths)
    assert not skipped.pushed and skipped.served_version == 2 and _versions(config) == [1, 2]
    assert f"served version 2 has no push record ({hotfix} was copied in by hand" in skipped.reason
    assert "newest data date on record is 2026-11-04" in skipped.reason
    assert not run(config.with_overrides({"push.allow_backfill": True}), paths).pushed    # not enough
    assert _versions(config) == [1, 2]
    forced = run(config.with_overrides({"push.force": True, "push.force_reason": "INC-9: hotfix superseded"}), paths)
    assert forced.pushed and forced.version == 3
    assert serving.read_push_record(paths.model_base / "3")["replaces_unrecorded"] == 2


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_hotfix_nothing_dates_is_kept_and_a_newer_night_replaces_a_dated_one(runs, tmp_path):
    config, paths = runs.make(CLEAN_DAY)
    runs.serve_by_hand(config, 1, "good")                               # the only version, copied by hand
    _retrained(paths)
    assert evaluate(config, paths).blessed
    skipped = run(config, paths)
    assert not skipped.pushed and "no push or rollback record dates anything" in skipped.reason

    config, paths = runs.make(CLEAN_DAY, run_id="r2", **{"data.serving_base": str(tmp_path / "serving2")})
    runs.serve_by_hand(config, 1, "bad", data_date=FIRST_DAY)           # pushed for 11-01
    runs.serve_by_hand(config, 2, "good")                               # hotfix after it
    _retrained(paths)
    assert evaluate(config, paths).blessed
    pushed = run(config, paths)                                         # 11-03: newer than anything on record
    assert pushed.pushed and pushed.version == 3
    assert serving.read_push_record(paths.model_base / "3")["replaces_unrecorded"] == 2


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_lost_serving_volume_is_not_blessed_on_absolute_thresholds(runs):
    import shutil

    config, one = runs.make(CLEAN_DAY, run_id="one")
    assert evaluate(config, one).blessed and run(config, one).version == 1
    shutil.rmtree(one.model_base)                                       # the volume's versions are gone
    config, two = runs.make(CLEAN_DAY, run_id="two")
    _retrained(two)
    result = evaluate(config, two)
    assert not result.blessed and result.baseline_version is None
    (reason,) = [r for r in result.reasons if "gone" in r]
    assert "records version(s) 1 that are gone" in reason and "absolute thresholds alone" in reason
    pushed = run(config, two)
    assert not pushed.pushed and pushed.reason.startswith("not blessed") and _versions(config) == []


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[str]:
    """`folder` refuses every create, rename and delete inside it, root included (the tests run as
    root, where chmod stops nothing): `chattr +i`, else a read-only bind mount of it on itself,
    else (not root) chmod 555. Where none works the test is skipped with the reasons, not faked."""
    def sh(*cmd: str) -> str | None:
        done = subprocess.run(cmd, capture_output=True, text=True)
        return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")

    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield "chmod 555"
        finally:
            folder.chmod(0o755)
    elif (immutable := sh("chattr", "+i", str(folder))) is None:
        try:
            yield "chattr +i"
        finally:
            sh("chattr", "-i", str(folder))
    elif (bound := sh("mount", "--bind", str(folder), str(folder))) is None:
        try:
            if (remount := sh("mount", "-o", "remount,bind,ro", str(folder))) is not None:
                pytest.skip(f"cannot make {folder} read-only: chattr +i: {immutable}; remount ro: {remount}")
            yield "read-only bind mount"
        finally:
            sh("umount", "-l", str(folder))
    else:
        pytest.skip(f"cannot make {folder} read-only for root: chattr +i: {immutable}; mount --bind: {bound}")


@pytest.mark.integration      # the step's CLI in a child process loads TensorFlow (tests/tiers.py)
def test_a_read_only_serving_dir_is_one_permanent_line_and_leaves_no_copy(runs, tmp_path, monkeypatch):
    from components.push import publish
    from pipeline.orchestration import permanent_errors

    config, paths = runs.make(CLEAN_DAY)
    runs.serve_by_hand(config, 1, "bad", data_date=FIRST_DAY)
    assert evaluate(config, paths).blessed
    with _read_only(paths.model_base):
        line = _refusal(_push_cli(config, paths, tmp_path))
        assert f"push refused: ServingDirError: {paths.model_base}" in line and "must be able to write" in line
        assert _versions(config) == [1] and not _hidden(config)
        with pytest.raises(serving.ServingDirError) as refused:
            run(config, paths)
        assert isinstance(refused.value, permanent_errors())            # the DAG fails it, no retry
        monkeypatch.setattr(publish, "require_writable", lambda *a: None)
        with pytest.raises(serving.ServingDirError, match=rf"{paths.model_base}/2: .* while pushing run"):
            run(config, paths)                                          # the rename itself is refused
        assert _versions(config) == [1] and not _hidden(config)         # its full copy went with it
    monkeypatch.undo()
    result = run(config, paths)                                         # fixed: the rerun pushes
    assert result.pushed and result.version == 2

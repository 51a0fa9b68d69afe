"""One config per run: resolve_run fixes it, every task uses it whatever its worker's environment."""
import json

import pendulum
import pytest

from pipeline import orchestration as orch
from pipeline import run_config
from pipeline.config import ConfigError

AFTER = pendulum.datetime(2026, 11, 9, tz="UTC")


def _resolve(monkeypatch, tmp_path, epochs):
    monkeypatch.setenv("RECO__TRAIN__EPOCHS", str(epochs))
    monkeypatch.setenv("RECO__DATA__ARTIFACT_ROOT", str(tmp_path / "art"))
    monkeypatch.setenv("RECO__DATA__RAW_ROOT", str(tmp_path / "raw"))
    return orch.resolve_run({"run_date": "2026-11-05", "workers": 3}, None, AFTER, "manual__1")


def test_a_task_uses_the_runs_config_not_its_workers_and_says_where_they_differ(monkeypatch, tmp_path, caplog):
    spec = _resolve(monkeypatch, tmp_path, 3)
    assert spec.config["train"]["epochs"] == 3 and spec.config_digest.startswith("sha256:")
    monkeypatch.setenv("RECO__TRAIN__EPOCHS", "7")           # another worker, another environment
    with caplog.at_level("WARNING", logger="pipeline.run_config"):
        config, _ = orch.RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).load()   # through the XCom
    assert config.train.epochs == 3 and config.train.workers == 3
    assert "differ from the run's config on 1 key(s): train.epochs=7 (run: 3)" in caplog.text
    caplog.clear()
    monkeypatch.setenv("RECO__TRAIN__EPOCHS", "3")
    with caplog.at_level("WARNING", logger="pipeline.run_config"):
        orch.RunSpec.from_dict(spec.to_dict()).load()
    assert "differ" not in caplog.text


def test_an_altered_run_config_is_refused(monkeypatch, tmp_path):
    spec = _resolve(monkeypatch, tmp_path, 3).to_dict()
    spec["config"]["train"]["epochs"] = 9
    with pytest.raises(ConfigError, match="does not match its digest"):
        orch.RunSpec.from_dict(spec).load()


def test_each_step_writes_the_runs_config_and_digest_into_the_run_folder(monkeypatch, tmp_path):
    from pipeline.contracts.inputs import ValidationError

    spec = _resolve(monkeypatch, tmp_path, 3)
    monkeypatch.setenv("RECO__TRAIN__EPOCHS", "7")
    with pytest.raises(ValidationError):          # no data: validate refuses, after the config is written
        orch.run_validate(spec)
    written = json.loads((tmp_path / "art" / "runs" / "2026-11-05" / "manual__1" / run_config.FILE).read_text())
    assert written["digest"] == spec.config_digest and written["config"]["train"]["epochs"] == 3


def test_a_forced_pushs_approved_reason_reaches_the_config(monkeypatch, tmp_path):
    spec = orch.resolve_run({"run_date": "2026-11-05", "force_push": True, "force_reason": "hotfix"},
                            None, AFTER, "manual__2")
    approved = orch.with_approval(spec, {"chosen_options": ["Approve"], "responded_by_user": {"name": "ops"}})
    config, _ = approved.load()
    assert config.push.force and config.push.force_reason == "hotfix (approved by ops)"

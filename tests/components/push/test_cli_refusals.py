"""The push CLI's own refusals are one line and exit 2, never a traceback (on-call reads them)."""
from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest

from pipeline.config_sections import PROJECT_ROOT
from tests.conftest import tiny_overrides


@pytest.mark.integration      # the step's CLI in a child process loads TensorFlow (tests/tiers.py)
def test_a_rollback_with_nothing_served_is_one_line_and_exit_2(tmp_path):
    sets = [f"--set={k}={v}" for k, v in tiny_overrides(tmp_path).items() if k.startswith("data.")]
    done = subprocess.run([sys.executable, "-m", "components.push", "rollback", "--reason", "bad model", *sets],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(lines) == 1 and "rollback refused: RollbackError: no version is served under" in lines[0], done.stderr


@pytest.mark.integration      # the step's CLI in a child process loads TensorFlow (tests/tiers.py)
def test_a_rollback_with_no_earlier_version_is_one_line_and_exit_2(runs, tmp_path):
    import yaml

    config, _ = runs.make(dt.date(2026, 11, 3))
    runs.serve_by_hand(config, 1)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(config.to_dict()))
    done = subprocess.run([sys.executable, "-m", "components.push", "rollback", "--reason", "bad model",
                           "--config", str(tmp_path / "params.yaml")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(lines) == 1 and "RollbackError: no earlier version to roll back to" in lines[0], done.stderr

"""`make demo` never resets the state a live `make airflow` of the same home is using."""
from __future__ import annotations

import logging
import subprocess

import pytest

from pipeline import demo

pytestmark = pytest.mark.integration          # it starts a stand-in of the script's process


def test_the_demo_refuses_a_home_with_a_live_airflow_and_ignores_a_stale_pid_file(tmp_path, monkeypatch, caplog):
    home = tmp_path / "airflow"
    home.mkdir()
    script = subprocess.Popen(["bash", "-c", "exec -a airflow_standalone.sh sleep 60"])   # the script's name
    try:
        (home / "airflow.pid").write_text(f"{script.pid}\n")
        monkeypatch.setenv("AIRFLOW_HOME", str(home))
        reset = []
        monkeypatch.setattr(demo, "reset_state", lambda config: reset.append(config))
        with caplog.at_level(logging.ERROR, logger="demo"):
            assert demo.main([]) == 2
        assert f"make airflow is running on {home} (pid {script.pid})" in caplog.text and not reset
    finally:
        script.kill()
        script.wait()
    assert demo.live_airflow_pid(home) is None          # the script is gone: its pid file is stale
    (home / "airflow.pid").write_text("not a pid")
    assert demo.live_airflow_pid(home) is None

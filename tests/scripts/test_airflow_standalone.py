"""`make airflow` for real: scheduler, dag-processor, triggerer and api-server started by the
script in a temp AIRFLOW_HOME on a free port; loopback only, a real login, Ctrl-C stops them all."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from pipeline.config import PROJECT_ROOT

pytestmark = pytest.mark.slow
SCRIPT = PROJECT_ROOT / "scripts" / "airflow_standalone.sh"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, proc: subprocess.Popen, home: Path, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"script exited early:\n{proc.stdout.read() if proc.stdout else ''}"
        try:
            if requests.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(1)
    logs = {p.name: p.read_text()[-1500:] for p in (home / "logs").glob("*.log")}
    raise AssertionError(f"api-server not up in {timeout} s: {logs}")


def listening_addresses(pids: list[int]) -> set[str]:
    out = set()
    for pid in pids:
        try:
            for c in psutil.Process(pid).net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN:
                    out.add(c.laddr.ip)
        except psutil.NoSuchProcess:
            pass
    return out


def test_make_airflow_listens_on_loopback_requires_login_and_stops_on_ctrl_c(tmp_path):
    home, port = tmp_path / "airflow", free_port()
    env = {**os.environ, "AIRFLOW_HOME": str(home), "RECO_AIRFLOW_PORT": str(port),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW__")}    # the script's own settings
    proc = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, proc, home)
        tree = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        names = " ".join(" ".join(psutil.Process(p).cmdline()) for p in tree if psutil.pid_exists(p))
        # (the api-server retitles itself "airflow api_server -- host:...")
        assert all(f"airflow {c}" in names or f"airflow {c.replace('-', '_')}" in names for c in COMPONENTS), names
        # LocalExecutor sized to the machine, not Airflow's default 32 workers.
        assert names.count("LocalExecutor") == len(os.sched_getaffinity(0)), names   # what nproc counts

        assert requests.get(f"{url}/api/v2/dags", timeout=10).status_code == 401      # no login, no API
        passwords = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())
        token = requests.post(f"{url}/auth/token", json={"username": "admin", "password": passwords["admin"]},
                              timeout=10)
        assert token.status_code == 201, token.text
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        assert requests.get(f"{url}/api/v2/dags", headers=headers, timeout=10).status_code == 200
        assert requests.post(f"{url}/auth/token", json={"username": "admin", "password": "wrong"},
                             timeout=10).status_code == 401

        # A conf value outside a Param's schema is refused at trigger time (the DAG stays paused).
        dag_url = f"{url}/api/v2/dags/recommender_nightly"
        deadline = time.monotonic() + 180
        while requests.get(dag_url, headers=headers, timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the dag-processor never parsed recommender_nightly"
            time.sleep(2)
        bad = requests.post(f"{dag_url}/dagRuns", headers=headers, timeout=30,
                            json={"logical_date": None, "conf": {"workers": 0}})
        assert bad.status_code == 400 and "workers" in bad.text, (bad.status_code, bad.text)

        # Nothing listens beyond loopback (no 0.0.0.0 API, no log servers).
        addresses = listening_addresses(tree)
        assert addresses and addresses <= {"127.0.0.1"}, addresses
        out = ""
    finally:
        proc.send_signal(signal.SIGINT)                       # Ctrl-C: the script, not the group
        try:
            out = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert f"Airflow UI: http://127.0.0.1:{port}" in out, out
    time.sleep(1)
    left = [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(psutil.Process(p).cmdline()) for p in left]

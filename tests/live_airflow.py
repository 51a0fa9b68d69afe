"""A real Airflow for tests: `scripts/airflow_standalone.sh` (what `make airflow` runs) in a temp
AIRFLOW_HOME on a free loopback port, logged in through its REST API, stopped by PID."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from pipeline.config import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "airflow_standalone.sh"
DAG_ID = "recommender_nightly"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveAirflow:
    """The script's process, its URL and an authenticated session once `start` returned."""

    def __init__(self, home: Path, extra_env: dict[str, str] | None = None):
        self.home, self.port = home, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "AIRFLOW_HOME": str(home), "RECO_AIRFLOW_PORT": str(self.port),
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **(extra_env or {})}
        self.env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW__")}   # the script's own settings
        self.proc: subprocess.Popen | None = None
        self.session = requests.Session()

    def start(self, timeout: float = 240.0) -> LiveAirflow:
        # As from a terminal: Ctrl-C delivered. A shell running this suite in the background
        # (many CI runners) passes SIGINT ignored, and bash cannot trap a signal ignored at entry.
        self.proc = subprocess.Popen(["bash", str(SCRIPT)], env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + timeout
        while not self._healthy():
            assert self.proc.poll() is None, f"script exited early:\n{self.proc.stdout.read()}"
            assert time.monotonic() < deadline, f"api-server not up in {timeout} s: {self.component_logs()}"
            time.sleep(1)
        return self

    def _healthy(self) -> bool:
        try:
            return requests.get(f"{self.url}/api/v2/monitor/health", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    def login(self, user: str = "admin", password: str | None = None) -> requests.Response:
        if password is None:
            password = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[user]
        token = requests.post(f"{self.url}/auth/token", json={"username": user, "password": password}, timeout=10)
        if token.status_code == 201:
            self.session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        return token

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return self.session.request(method, f"{self.url}/api/v2{path}", timeout=30, **kwargs)

    def wait_for_dag(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while self.api("GET", f"/dags/{DAG_ID}").status_code != 200:
            assert time.monotonic() < deadline, f"the dag-processor never parsed {DAG_ID}: {self.component_logs()}"
            time.sleep(2)

    def trigger(self, conf: dict) -> requests.Response:
        return self.api("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf})

    def task_state(self, run_id: str, task_id: str) -> str | None:
        return self.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}").json().get("state")

    def wait_for(self, what: str, check, timeout: float = 600.0, every: float = 1.0):
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.component_logs()}"
            time.sleep(every)
        return found

    def wait_for_run(self, run_id: str, timeout: float = 600.0) -> str:
        def finished():
            state = self.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}").json()["state"]
            return state if state in ("success", "failed") else None
        return self.wait_for(f"run {run_id} to finish", finished, timeout, every=2.0)

    def task_log(self, run_id: str, task_id: str, try_number: int = 1) -> str:
        reply = self.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
                         headers={"Accept": "application/json"})
        return json.dumps(reply.json())

    def component_logs(self) -> dict[str, str]:
        return {p.name: p.read_text()[-1500:] for p in (self.home / "logs").glob("*.log")}

    def stop(self, reader_gone: bool = False) -> str:
        """Ctrl-C to the script (it stops what it started); SIGKILL the group if it hangs.
        `reader_gone`: close our end of its output first, as a killed terminal or test would."""
        if self.proc is None:
            return ""
        if reader_gone:
            self.proc.stdout.close()
        self.proc.send_signal(signal.SIGINT)
        try:
            if reader_gone:
                self.proc.wait(timeout=60)
                return ""
            return self.proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise

"""A real Airflow for tests: `scripts/airflow_standalone.sh` (what `make airflow` runs) in a temp
AIRFLOW_HOME on a free loopback port, logged in through its REST API, stopped by PID. By default
on the stack production runs (`make airflow-celery`: PostgreSQL, Redis, two Celery workers, the
training task on its own queue), each service on its own free loopback port.

One per test session (the `live` fixture): the `make airflow` checks (tests/scripts) and the
nightly story under the scheduler (tests/dags) share it; the Ctrl-C test stops it, and a test
that asks for it afterwards gets a fresh one.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests
import yaml

from pipeline.config import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "airflow_standalone.sh"
DAG_ID = "recommender_nightly"
FIRST, STORY_DAY = dt.date(2026, 11, 1), dt.date(2026, 11, 5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveAirflow:
    """The script's process, its URL and an authenticated session once `start` returned."""

    def __init__(self, home: Path, extra_env: dict[str, str] | None = None, stack: str = "celery",
                 make_target: str | None = None):
        """`make_target`: start it as the README does (`make airflow`) instead of the script
        itself; Ctrl-C then goes to make's whole process group, as a terminal sends it."""
        self.home, self.port, self.stack, self.make_target = home, free_port(), stack, make_target
        self.pg_port, self.redis_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "AIRFLOW_HOME": str(home), "RECO_AIRFLOW_PORT": str(self.port),
               "RECO_AIRFLOW_STACK": stack, "RECO_PG_PORT": str(self.pg_port),
               "RECO_REDIS_PORT": str(self.redis_port),
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        # The script's own settings, not this shell's; the test's own (extra_env) on top.
        self.env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW__")} | (extra_env or {})
        self.proc: subprocess.Popen | None = None
        self.session = requests.Session()

    def start(self, timeout: float = 240.0) -> LiveAirflow:
        # As from a terminal: Ctrl-C delivered. A shell running this suite in the background
        # (many CI runners) passes SIGINT ignored, and bash cannot trap a signal ignored at entry.
        argv = ["make", "--no-print-directory", self.make_target] if self.make_target else ["bash", str(SCRIPT)]
        self.proc = subprocess.Popen(argv, env=self.env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
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

    def password_of(self, user: str) -> str:
        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[user]

    def request_token(self, user: str, password: str | None = None) -> requests.Response:
        """POST /auth/token: the REST API's login (a wrong password answers 401)."""
        password = self.password_of(user) if password is None else password
        return requests.post(f"{self.url}/auth/token", json={"username": user, "password": password}, timeout=10)

    def login(self, user: str = "admin", password: str | None = None) -> requests.Response:
        token = self.request_token(user, password)
        if token.status_code == 201:
            self.session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        return token

    def api(self, method: str, path: str, as_user: str | None = None, **kwargs) -> requests.Response:
        """A REST call as the logged-in operator, or as `as_user` (another person: four eyes)."""
        session = self.session if as_user is None else self._session_of(as_user)
        return session.request(method, f"{self.url}/api/v2{path}", timeout=30, **kwargs)

    def token_of(self, user: str) -> str:
        token = self.request_token(user)
        assert token.status_code == 201, token.text
        return token.json()["access_token"]

    def _session_of(self, user: str) -> requests.Session:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.token_of(user)}"
        return session

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

    def red_lines(self, run_id: str) -> dict[str, list[str]]:
        """Error-level lines in the log of every task of the run that succeeded (its last try)."""
        tis = self.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances").json()["task_instances"]
        red = {}
        for ti in (ti for ti in tis if ti["state"] == "success"):
            reply = self.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/logs/"
                             f"{ti['try_number']}", headers={"Accept": "application/json"})
            lines = [entry.get("event", "") for entry in reply.json()["content"]
                     if isinstance(entry, dict) and entry.get("level") in ("error", "critical")]
            if lines:
                red[ti["task_id"]] = lines
        return red

    def sql(self, query: str) -> str:
        """A query on the metadata database (stack=celery: the PostgreSQL the script started)."""
        secrets = dict(line.split("=", 1) for line in (self.home / "stack.env").read_text().split())
        done = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "reco", "-d", "airflow",
                               "-tAc", query], env={**os.environ, "PGPASSWORD": secrets["PG_PASSWORD"]},
                              capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.strip()

    def component_logs(self) -> dict[str, str]:
        return {p.name: p.read_text()[-1500:] for p in (self.home / "logs").glob("*.log")}

    def stop(self, reader_gone: bool = False) -> str:
        """Ctrl-C to the script (it stops what it started); SIGKILL the group if it hangs.
        `reader_gone`: close our end of its output first, as a killed terminal or test would."""
        if self.proc is None or self.proc.returncode is not None:
            return ""
        if reader_gone:
            self.proc.stdout.close()
        if self.make_target:
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            self.proc.send_signal(signal.SIGINT)
        try:
            if reader_gone:
                self.proc.wait(timeout=60)
                return ""
            return self.proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise


def _story_config(root: Path):
    """A yearly cron whose first interval has not ended: unpausing schedules no run of its own, so
    only the runs the tests trigger (with an explicit run_date) exist. The data dates are in the
    past: the landing deadline is set to 1 h from now so the marker wait really waits.
    `push.approvers` stays at its default (empty): anyone may answer a forced push's request, so
    the story meets the requester's own Approve (refused, the request kept open)."""
    from pipeline.datagen import generate
    from tests.conftest import ONE_WORKER, make_tiny_config

    since = dt.datetime.now(dt.UTC) - dt.datetime.combine(STORY_DAY + dt.timedelta(days=1), dt.time(), dt.UTC)
    config = make_tiny_config(root, **{"schedule.cron": "0 2 1 1 *", "schedule.retries": 1, **ONE_WORKER,
                                       "schedule.retry_delay_s": 1.0, "schedule.data_poke_s": 1.0,
                                       "schedule.data_wait_h": since.total_seconds() / 3600 + 1})
    (root / "params.yaml").write_text(yaml.safe_dump(config.to_dict()))
    g = config.generator
    generate(config.data.raw_root, FIRST, (STORY_DAY - FIRST).days + 1, users=g.users, items=g.items,
             events_per_day=g.events_per_day, seed=g.seed, with_ceiling=False)
    return config


def _searchable_root() -> Path:
    """A temp root PostgreSQL's own user can reach (as root the script runs the server as
    `postgres`, and pytest's temp base is private to its user); owner-only listing."""
    root = Path(tempfile.mkdtemp(prefix="reco-live-"))
    root.chmod(0o711)
    return root


@pytest.fixture(scope="session")
def _live_airflow():
    holder: dict = {"roots": []}
    yield holder
    if "airflow" in holder:
        holder["airflow"].stop()
    for root in holder["roots"]:
        shutil.rmtree(root, ignore_errors=True)


TRAINING_WORKER_BATCH = 333       # the training worker's own eval.batch_size: differs from the run's


@pytest.fixture
def live(_live_airflow):
    """(config, LiveAirflow) on the production-shaped stack (PostgreSQL + Redis + CeleryExecutor,
    `make airflow-celery`): logged in, the DAG parsed and unpaused; started at first use."""
    airflow = _live_airflow.get("airflow")
    if airflow is None or airflow.proc.poll() is not None:
        root = _searchable_root()
        _live_airflow["roots"].append(root)
        _live_airflow["config"] = _story_config(root)
        # A task whose worker died fails after 30 s without a heartbeat (Airflow's default: 300 s).
        # The training worker has an environment of its own (RECO_TRAINING_WORKER_ENV): the run's
        # config still holds on it (pipeline/run_config.py; the story test checks the train log).
        env = {"RECO_CONFIG": str(root / "params.yaml"), "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
               "RECO_TRAINING_WORKER_ENV": f"RECO__EVAL__BATCH_SIZE={TRAINING_WORKER_BATCH}"}
        airflow = _live_airflow["airflow"] = LiveAirflow(root / "airflow", env)
        airflow.start()
        assert airflow.login().status_code == 201
        airflow.wait_for_dag()
        assert airflow.api("PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}).status_code == 200
    return _live_airflow["config"], airflow

"""`make airflow` for real: scheduler, dag-processor, triggerer and api-server started by the
script in a temp AIRFLOW_HOME on a free port (the session's one live Airflow,
tests/live_airflow.py, on `make airflow-celery`'s stack: PostgreSQL, Redis, two Celery workers);
loopback only, a real login, Ctrl-C stops them all, database and broker included (even when
nobody reads the script's output any more), and exits 0."""
from __future__ import annotations

import os
import stat
import time

import psutil
import pytest
import requests

from tests.live_airflow import DAG_ID

pytestmark = pytest.mark.airflow
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


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


def process_tree(airflow) -> list[int]:
    return [airflow.proc.pid] + [c.pid for c in psutil.Process(airflow.proc.pid).children(recursive=True)]


def live_cmdlines(pids: list[int]) -> list[str]:
    """Command lines of the processes still running: a short-lived child (a DAG parse, a
    gunicorn worker) may exit, or linger as a zombie, between listing the tree and reading it."""
    out = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append(" ".join(proc.cmdline()))
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return out


def test_make_airflow_listens_on_loopback_requires_login_and_refuses_bad_conf(live):
    _, airflow = live
    tree = process_tree(airflow)
    names = " ".join(live_cmdlines(tree))
    # (the api-server retitles itself "airflow api_server -- host:...")
    assert all(f"airflow {c}" in names or f"airflow {c.replace('-', '_')}" in names for c in COMPONENTS), names
    cores = len(os.sched_getaffinity(0))                                         # what nproc counts
    if airflow.stack == "celery":
        # Two Celery workers: every task but training on `default` (one slot per core), the
        # training gang launcher alone on `training`; PostgreSQL and Redis started by the script.
        assert f"--queues default --concurrency {cores}" in names, names
        assert "--queues training --concurrency 1" in names, names
        assert "postgres -D" in names and "redis-server 127.0.0.1:" in names, names
        assert airflow.sql("SELECT 1") == "1"                                   # the metadata DB
    else:
        # LocalExecutor sized to the machine, not Airflow's default 32 workers.
        assert names.count("LocalExecutor") == cores, names

    # `make demo` reads this to refuse resetting state under this live Airflow (tests/pipeline/test_demo_guard.py)
    assert (airflow.home / "airflow.pid").read_text().strip() == str(airflow.proc.pid)
    assert requests.get(f"{airflow.url}/api/v2/dags", timeout=10).status_code == 401   # no login, no API
    assert airflow.login(password="wrong").status_code == 401
    assert airflow.login().status_code == 201
    # A shared machine's other users can read neither the passwords nor the log that prints a new one.
    for private in (airflow.home / "simple_auth_manager_passwords.json.generated",
                    airflow.home / "logs" / "api-server.log",
                    *([airflow.home / "stack.env"] if airflow.stack == "celery" else [])):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    assert airflow.api("GET", "/dags").status_code == 200

    # A conf value outside a Param's schema is refused at trigger time: no run is created.
    runs = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns").json()["total_entries"]
    bad = airflow.trigger({"workers": 0})
    assert bad.status_code == 400 and "workers" in bad.text, (bad.status_code, bad.text)
    assert airflow.api("GET", f"/dags/{DAG_ID}/dagRuns").json()["total_entries"] == runs

    # Nothing listens beyond loopback (no 0.0.0.0 API, no log servers, nor database or broker).
    addresses = listening_addresses(tree)
    assert addresses and addresses <= {"127.0.0.1"}, addresses
    url_line = next(line for line in airflow.proc.stdout if "Airflow UI" in line)
    assert f"Airflow UI: http://127.0.0.1:{airflow.port}" in url_line, url_line


def test_ctrl_c_stops_every_component_even_with_nobody_reading(live):
    """Last of the session's live-Airflow tests (collection order): it stops the shared one."""
    _, airflow = live
    tree = process_tree(airflow)
    # Ctrl-C after whoever read the script's output has gone (a closed terminal, a killed test):
    # stopping must not depend on being able to print.
    airflow.stop(reader_gone=True)
    time.sleep(1)
    left = live_cmdlines(tree)
    assert not left, left
    assert airflow.proc.returncode == 0          # Ctrl-C is how it is meant to end: not a crash
    assert not (airflow.home / "airflow.pid").exists()

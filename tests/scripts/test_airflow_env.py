"""`reco_airflow_init` (scripts/airflow_env.sh, used by `make airflow`, `make demo` and the DAG
tests) leaves the SQLite metadata DB readable by its owner only, from its first byte.

Cheap: `airflow db migrate` is stood in for by a shell function (which wins over the venv's
`airflow` on PATH) that writes the database the way SQLite does, with the process's umask; the
real migrate runs in tests/dags/test_dag_e2e.py."""
from __future__ import annotations

import os
import stat
import subprocess

from pipeline.config import PROJECT_ROOT

FAKE_AIRFLOW = r'''
airflow() {
  case "$1 $2" in
    "db migrate") [ -n "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-}" ] ||    # SQLite: Airflow's default
                    python -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('create table t (x)')" \
                      "$AIRFLOW_HOME/airflow.db" ;;
  esac
}
'''


def init(home, **env) -> subprocess.CompletedProcess:
    script = "\n".join(["set -euo pipefail", "umask 022", f"source {PROJECT_ROOT}/scripts/airflow_env.sh",
                         FAKE_AIRFLOW, "reco_airflow_init"])
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AIRFLOW_HOME": str(home), **env})


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_sqlite_metadata_db_is_owner_only(tmp_path):
    done = init(tmp_path / "airflow")
    assert done.returncode == 0, done.stdout + done.stderr
    db = tmp_path / "airflow" / "airflow.db"
    assert db.stat().st_size > 0 and mode(db) == 0o600


def test_an_existing_db_is_made_owner_only(tmp_path):
    (tmp_path / "airflow").mkdir()
    db = tmp_path / "airflow" / "airflow.db"
    db.write_bytes(b"")
    db.chmod(0o644)
    assert init(tmp_path / "airflow").returncode == 0
    assert mode(db) == 0o600


def test_no_sqlite_file_is_made_for_a_postgres_metadata_db(tmp_path):
    done = init(tmp_path / "airflow", AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="postgresql+psycopg2://reco@127.0.0.1/airflow")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "airflow" / "airflow.db").exists()


def _conn(home, **env) -> str:
    script = (f"source {PROJECT_ROOT}/scripts/airflow_env.sh && "
              'echo "$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN|$AIRFLOW__CORE__EXECUTOR"')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")},
                               "AIRFLOW_HOME": str(home), **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_second_shell_follows_the_running_celery_stack_and_the_demo_does_not(tmp_path):
    """`source scripts/airflow_env.sh` beside `make airflow-celery` pointed the CLI at SQLite
    ("Database migration required"; following the hint made an empty SQLite DB)."""
    home = tmp_path / "airflow"
    home.mkdir()
    assert _conn(home) == "|LocalExecutor"                                        # no stack: SQLite
    (home / "stack.cli.env").write_text("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgresql+psycopg2://reco:pw@"
                                        "127.0.0.1:15432/airflow\nAIRFLOW__CORE__EXECUTOR=CeleryExecutor\n")
    assert _conn(home) == "postgresql+psycopg2://reco:pw@127.0.0.1:15432/airflow|CeleryExecutor"
    assert _conn(home, RECO_AIRFLOW_IGNORE_STACK="1") == "|LocalExecutor"

# Source me: an Airflow home inside var/ (SQLite, LocalExecutor) on the project's dags folder.
# Idempotent: `airflow db migrate` and `airflow pools set` are safe to repeat.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$ROOT/var/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__EXECUTOR=LocalExecutor
export AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT=60
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export TF_USE_LEGACY_KERAS=1
export TF_CPP_MIN_LOG_LEVEL=2
export PATH="$ROOT/.venv/bin:$PATH"

# A second shell beside a running `make airflow-celery`: the CLI talks to that stack's PostgreSQL
# and Redis (the stack writes their settings here, owner-only, when it starts), not to an empty
# SQLite. What picks its database itself (the stack scripts, make demo) sets RECO_AIRFLOW_IGNORE_STACK.
if [ -z "${RECO_AIRFLOW_IGNORE_STACK:-}" ] && [ -s "$AIRFLOW_HOME/stack.cli.env" ]; then
  set -a
  # shellcheck disable=SC1091
  source "$AIRFLOW_HOME/stack.cli.env"
  set +a
  echo "airflow_env.sh: the CLI uses the Celery stack's PostgreSQL ($AIRFLOW_HOME/stack.cli.env)" >&2
fi

reco_airflow_init() {
  mkdir -p "$AIRFLOW_HOME"
  # The SQLite metadata DB (connections, variables, users' sessions) is owner-only from its first
  # byte: created empty with mode 600 (an empty file is a valid SQLite database, and SQLite gives
  # its journal the database's mode), then filled in place by migrate. Not with a PostgreSQL
  # metadata DB (make airflow-celery, docker compose).
  local db="$AIRFLOW_HOME/airflow.db" sqlite=""
  case "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-sqlite:///$db}" in "sqlite:///$db") sqlite=1 ;; esac
  if [ -n "$sqlite" ]; then
    [ -e "$db" ] || install -m 600 /dev/null "$db"
    chmod 600 "$db"
  fi
  airflow db migrate >"$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -20 "$AIRFLOW_HOME/migrate.log"; return 1; }
  if [ -n "$sqlite" ] && [ -e "$db" ]; then chmod 600 "$db"; fi
  # The training task runs in this pool; a task whose pool does not exist is never scheduled.
  # preprocess and evaluate of concurrent runs take turns in the heavy pool.
  local pools
  pools=$(python -c "from pipeline.config import load_config; s = load_config().schedule
print(s.training_pool, s.training_pool_slots, s.heavy_pool, s.heavy_pool_slots)")
  set -- $pools
  airflow pools set "$1" "$2" "MultiWorkerMirroredStrategy training gangs" >/dev/null
  airflow pools set "$3" "$4" "preprocess (Beam) and evaluate of concurrent runs" >/dev/null
}

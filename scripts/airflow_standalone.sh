#!/usr/bin/env bash
# `make airflow`: a local Airflow (scheduler, dag-processor, triggerer, api-server) on the project's
# dags folder, safe by default:
#   - the UI/API listens on 127.0.0.1 only (RECO_AIRFLOW_HOST / RECO_AIRFLOW_PORT to change);
#   - no log servers: `airflow standalone` would start them on every interface; with one machine
#     the UI reads task logs from $AIRFLOW_HOME/logs directly;
#   - a real login: the simple auth manager with one admin whose generated password is in the
#     file printed below, readable by its owner only (never "everyone is admin");
#   - executor parallelism sized to the machine's cores, not Airflow's 32;
#   - Ctrl-C or SIGTERM stops every process it started (each runs in this script's process group).
#     Started in the background by a non-interactive shell, SIGINT arrives ignored and bash
#     cannot trap it: stop it with SIGTERM then (kill <pid>).
# RECO_AIRFLOW_STACK=celery (`make airflow-celery`): PostgreSQL + Redis + CeleryExecutor with two
# workers instead of SQLite + LocalExecutor (scripts/airflow_stack.sh).
# Not `airflow standalone`: it binds 0.0.0.0, ignores SIGINT when backgrounded, and SIGTERM to it
# alone leaves its children running.
set -euo pipefail
export RECO_AIRFLOW_IGNORE_STACK=1      # this script picks the database itself (airflow_env.sh)
source "$(dirname "$0")/airflow_env.sh"

HOST="${RECO_AIRFLOW_HOST:-127.0.0.1}"
PORT="${RECO_AIRFLOW_PORT:-8080}"
CORES="$(nproc 2>/dev/null || echo 2)"
export AIRFLOW__API__HOST="$HOST"
export AIRFLOW__API__PORT="$PORT"
export AIRFLOW__API__BASE_URL="http://$HOST:$PORT"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://$HOST:$PORT/execution/"
export AIRFLOW__CORE__AUTH_MANAGER="airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS=False
# Two people: the operator who triggers (and may force) runs, and an approver for a forced push
# (four eyes: the requester's own Approve counts as a Reject; airflow_glue/approval.py).
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${RECO_AIRFLOW_USER:-admin}:admin,${RECO_AIRFLOW_APPROVER:-approver}:user"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
export AIRFLOW__CORE__PARALLELISM="${AIRFLOW__CORE__PARALLELISM:-$CORES}"
export AIRFLOW__API__WORKERS="${AIRFLOW__API__WORKERS:-1}"

STACK="${RECO_AIRFLOW_STACK:-local}"
if [ "$STACK" = celery ]; then
  # shellcheck source=scripts/airflow_stack.sh
  source "$(dirname "$0")/airflow_stack.sh"
elif [ "$STACK" = local ]; then
  rm -f "$AIRFLOW_HOME/stack.cli.env"       # SQLite in this home now: a second shell's CLI follows
else
  echo "RECO_AIRFLOW_STACK: '$STACK', expected 'local' (SQLite + LocalExecutor) or 'celery'" >&2
  exit 2
fi

# Owner-only: the generated password file (Airflow would write it 0644) and the component logs
# (the api-server prints a newly generated password there). An empty file is a valid one.
private() { [ -e "$1" ] || install -m 600 /dev/null "$1"; chmod 600 "$1"; }
mkdir -p "$AIRFLOW_HOME/logs"
private "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"

pids=()       # the Airflow components and Celery workers
svc_pids=()   # PostgreSQL and Redis (stack=celery): stopped after everything that uses them
stop() {
  trap - INT TERM EXIT
  rm -f "$AIRFLOW_HOME/airflow.pid"
  trap '' PIPE   # whoever read our output may be gone (a killed terminal or test): still stop all
  echo "stopping Airflow (pids ${pids[*]:-none} ${svc_pids[*]:-})" 2>/dev/null || true
  stop_pids "${pids[@]}"
  if [ "${#svc_pids[@]}" -gt 0 ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" stop -m fast -w -t 20 >/dev/null 2>&1 || true
    stop_pids "${svc_pids[@]}"
  fi
  wait 2>/dev/null || true
}
stop_pids() {
  [ "$#" -gt 0 ] || return 0
  # TERM first; anything still alive after the grace period (TF workers ignore TERM) is KILLed.
  for pid in "$@"; do pkill -TERM -P "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 20); do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  for pid in "$@"; do pkill -KILL -P "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
}
# Ctrl-C / SIGTERM is how this is meant to end: say so and exit 0. Anything else ending it is not.
trap 'stop; echo "stopped" 2>/dev/null || true; exit 0' INT TERM
trap stop EXIT

# `make demo` refuses to reset the data and serving dirs under a live Airflow of this home.
echo $$ >"$AIRFLOW_HOME/airflow.pid"

start_proc() {  # name, then the command (run in $START_DIR when set); logs to logs/<name>.log
  local name="$1"; shift
  private "$AIRFLOW_HOME/logs/$name.log"
  if declare -F "$1" >/dev/null; then
    (cd "${START_DIR:-.}" && "$@") >"$AIRFLOW_HOME/logs/$name.log" 2>&1 &
  else
    (cd "${START_DIR:-.}" && exec "$@") >"$AIRFLOW_HOME/logs/$name.log" 2>&1 &
  fi
  case "$name" in postgres|redis) svc_pids+=("$!") ;; *) pids+=("$!") ;; esac
}
start() { local name="$1"; shift; start_proc "$name" airflow "$@"; }

if [ "$STACK" = celery ]; then
  stack_start_services || exit 1
fi
reco_airflow_init
start api-server api-server --host "$HOST" --port "$PORT"
start scheduler scheduler --skip-serve-logs
start dag-processor dag-processor
start triggerer triggerer --skip-serve-logs
[ "$STACK" = celery ] && stack_start_workers

# The URL once the API answers, not before.
python - "$AIRFLOW__API__BASE_URL" <<'PY' || true
import sys, time, urllib.request
for _ in range(240):
    try:
        urllib.request.urlopen(f"{sys.argv[1]}/api/v2/monitor/health", timeout=2)
        break
    except OSError:
        time.sleep(0.5)
PY
echo "Airflow UI: http://$HOST:$PORT  (listening on $HOST only; stack: $STACK)"
echo "login: ${RECO_AIRFLOW_USER:-admin} (operator) or ${RECO_AIRFLOW_APPROVER:-approver} (approves forced pushes); passwords in $AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE (written at first start)"
echo "logs: $AIRFLOW_HOME/logs/*.log; Ctrl-C stops everything."
echo "DAG: recommender_nightly. Unpause it before triggering: runs of a paused DAG stay queued."

# Any component that exits takes the whole set down: a half-running Airflow only confuses.
wait -n "${pids[@]}" "${svc_pids[@]}" || true
echo "an Airflow component exited; see $AIRFLOW_HOME/logs" >&2
exit 1

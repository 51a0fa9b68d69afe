# Sourced by airflow_standalone.sh when RECO_AIRFLOW_STACK=celery (`make airflow-celery`): the stack
# production runs, on this machine, from Debian's packages (no Docker):
#   - PostgreSQL 15 as the metadata database, its cluster in $AIRFLOW_HOME/postgres (initdb'd at
#     first start), listening on 127.0.0.1 only, password auth (scram) for one role;
#   - Redis 7 as the Celery broker, bound to 127.0.0.1, with a password, no persistence;
#   - CeleryExecutor with two workers in their own working directories: `default` runs every task
#     but training, `training` (concurrency 1) runs the gang launcher, the way GPU hosts are fed;
#     a worker that dies is started again (its task is retried);
#   - generated passwords in $AIRFLOW_HOME/stack.env, readable by its owner only.
# Everything started here is registered with the caller's `start_proc`, so Ctrl-C stops it too.
# As root, PostgreSQL runs as the `postgres` user (it refuses root): that user must be able to
# reach $AIRFLOW_HOME (every parent directory searchable).

PG_BIN="${RECO_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
PG_PORT="${RECO_PG_PORT:-15432}"
REDIS_PORT="${RECO_REDIS_PORT:-16379}"
PG_DATA="$AIRFLOW_HOME/postgres"
STACK_ENV="$AIRFLOW_HOME/stack.env"

as_pg() {  # run a PostgreSQL binary as the cluster's owner
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stack_check() {
  local missing=()
  [ -x "$PG_BIN/postgres" ] || missing+=("PostgreSQL server (Debian: postgresql-15)")
  command -v redis-server >/dev/null || missing+=("redis-server (Debian: redis-server)")
  python -c "import airflow.providers.celery, psycopg2" 2>/dev/null || missing+=("the celery extra (pip: -e '.[celery]')")
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "make airflow-celery needs: ${missing[*]}; \`make setup-celery\` installs them" >&2
    return 1
  fi
}

stack_secrets() {
  if [ ! -s "$STACK_ENV" ]; then
    install -m 600 /dev/null "$STACK_ENV"
    { echo "PG_PASSWORD=$(python -c 'import secrets; print(secrets.token_urlsafe(24))')"
      echo "REDIS_PASSWORD=$(python -c 'import secrets; print(secrets.token_urlsafe(24))')"; } >"$STACK_ENV"
  fi
  chmod 600 "$STACK_ENV"
  # shellcheck disable=SC1090
  source "$STACK_ENV"
}

stack_initdb() {
  [ -f "$PG_DATA/PG_VERSION" ] && return 0
  mkdir -p "$PG_DATA"
  [ "$(id -u)" = 0 ] && chown postgres: "$PG_DATA"
  chmod 700 "$PG_DATA"
  local pwfile
  pwfile="$(mktemp)"; echo "$PG_PASSWORD" >"$pwfile"
  [ "$(id -u)" = 0 ] && chown postgres: "$pwfile"
  as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U reco --pwfile="$pwfile" --auth-host=scram-sha-256 \
    --auth-local=scram-sha-256 -E UTF8 >"$AIRFLOW_HOME/logs/initdb.log" 2>&1 \
    || { rm -f "$pwfile"; tail -5 "$AIRFLOW_HOME/logs/initdb.log" >&2; return 1; }
  rm -f "$pwfile"
}

stack_start_services() {  # postgres and redis, in the foreground of background jobs (stoppable by PID)
  stack_check && stack_secrets && stack_initdb || return 1
  start_proc postgres as_pg "$PG_BIN/postgres" -D "$PG_DATA" -c listen_addresses=127.0.0.1 -p "$PG_PORT" \
    -c unix_socket_directories="$PG_DATA"
  start_proc redis redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --requirepass "$REDIS_PASSWORD" \
    --save "" --appendonly no --dir "$AIRFLOW_HOME" --protected-mode yes
  local i
  for i in $(seq 1 60); do
    "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break
    sleep 0.5
  done
  export PGPASSWORD="$PG_PASSWORD"
  psql -q -h 127.0.0.1 -p "$PG_PORT" -U reco -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='airflow'" \
    | grep -q 1 || psql -q -h 127.0.0.1 -p "$PG_PORT" -U reco -d postgres -c "CREATE DATABASE airflow"
  unset PGPASSWORD
  export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="postgresql+psycopg2://reco:$PG_PASSWORD@127.0.0.1:$PG_PORT/airflow"
  set -a
  # shellcheck source=docker/celery.env
  source "$ROOT/docker/celery.env"          # the settings docker-compose.yml uses too
  set +a
  export AIRFLOW__CELERY__BROKER_URL="redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT/0"
  export AIRFLOW__CELERY__RESULT_BACKEND="db+postgresql+psycopg2://reco:$PG_PASSWORD@127.0.0.1:$PG_PORT/airflow"
  # What `source scripts/airflow_env.sh` in a second shell needs to reach this stack (owner-only).
  install -m 600 /dev/null "$AIRFLOW_HOME/stack.cli.env"
  env | grep -E '^AIRFLOW__(DATABASE__SQL_ALCHEMY_CONN|CORE__EXECUTOR|CELERY__[A-Z_]+)=' \
    >"$AIRFLOW_HOME/stack.cli.env"
}

supervise() {  # the command, started again whenever it dies: what systemd or a pod's restart does
  local child rc
  trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 0' TERM
  while true; do
    "$@" &
    child=$!
    rc=0; wait "$child" || rc=$?
    echo "$(date -u +%FT%TZ) RECO WORKER EXITED ($rc): restarting it in 2 s; its running task fails on its" \
      "heartbeat and Airflow retries it"
    sleep 2
  done
}

stack_start_workers() {
  # A worker that dies (SIGKILL, OOM, a lost host) is restarted, not the stack taken down: the
  # scheduler fails its task once the heartbeat stops, and the retry runs on the new worker.
  # RECO_TRAINING_WORKER_ENV: the training worker's own environment (KEY=VALUE ...), as a GPU host's
  # differs; a run's tasks still use the run's config (pipeline/run_config.py) and say where it differs.
  local queue concurrency extra
  for queue in default training; do
    concurrency=1; [ "$queue" = default ] && concurrency="$CORES"
    extra=(); [ "$queue" = training ] && read -r -a extra <<< "${RECO_TRAINING_WORKER_ENV:-}"
    mkdir -p "$AIRFLOW_HOME/workers/$queue"
    START_DIR="$AIRFLOW_HOME/workers/$queue" start_proc "worker-$queue" supervise env "${extra[@]}" \
      airflow celery worker \
      --queues "$queue" --concurrency "$concurrency" --celery-hostname "$queue@%h" --skip-serve-logs
  done
}

#!/usr/bin/env bash
# `make airflow`: the Airflow UI on the project's dags folder, to trigger runs from the form.
set -euo pipefail
source "$(dirname "$0")/airflow_env.sh"
reco_airflow_init
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS:-True}"
echo "Airflow UI: http://localhost:8080  (login: none needed, every user is admin in this local setup;"
echo "set AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS=False to get the generated admin password in"
echo "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated). DAG: recommender_nightly (unpause it to schedule)."
exec airflow standalone

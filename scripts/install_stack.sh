#!/usr/bin/env bash
# Part of `make setup`: the Debian packages of the production-shaped local stack
# (`make airflow-celery`: PostgreSQL 15, Redis 7), installed when missing. Debian's post-install
# would start system-wide services; this project starts its own per Airflow home, so a
# policy-rc.d keeps them from starting while apt runs.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
[ "${#need[@]}" -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
policy=/usr/sbin/policy-rc.d
created=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null && $SUDO chmod +x "$policy" && created=1
fi
cleanup() { [ "$created" = 1 ] && $SUDO rm -f "$policy"; return 0; }
trap cleanup EXIT
echo "installing ${need[*]} (Debian packages) for make airflow-celery"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }

#!/usr/bin/env bash
# Part of `make setup`: the Debian packages of the production-shaped local stack, installed when
# missing: `make airflow-celery` (PostgreSQL 15, Redis 7) and the real S3 server the artifact-store
# tests run (OpenStack Swift with its s3api middleware: tests/s3_server.py). Debian's post-install
# would start system-wide services; this project starts its own per Airflow home (and per test),
# so a policy-rc.d keeps them from starting while apt runs.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
for server in proxy account container object; do     # Swift: one package per server
  command -v "swift-$server-server" >/dev/null || { need+=(swift swift-proxy swift-account swift-container swift-object); break; }
done
[ "${#need[@]}" -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
policy=/usr/sbin/policy-rc.d
created=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null && $SUDO chmod +x "$policy" && created=1
fi
cleanup() { [ "$created" = 1 ] && $SUDO rm -f "$policy"; return 0; }
trap cleanup EXIT
echo "installing ${need[*]} (Debian packages) for make airflow-celery and the S3 store tests"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }

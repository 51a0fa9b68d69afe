"""Submit a rendered gang to the cluster and supervise it like the local launcher: all or none.

The job is created first, then what it owns (ConfigMap, Service); the launcher polls the job's
status and the workers' heartbeats on the shared volume, reads a failed gang's pod logs, and
deletes the job either way. The API calls are in client.py; rendering is manifests.py.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from components.train.gang import heartbeat
from components.train.gang.worker_spec import ready_file
from components.train.k8s.manifests import owned_by, render, write_manifests
from pipeline.config import Config
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)
POLL_S = 5.0             # job status and heartbeat poll


def job_state(doc: dict[str, Any], status: dict[str, Any]) -> str | None:
    """'succeeded', 'failed' or None (still running) from a TFJob's or Job's status."""
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Succeeded", "Complete"):
            return "succeeded"
        if cond.get("status") == "True" and cond.get("type") == "Failed":
            return "failed"
    if doc["kind"] == "Job" and (status.get("failed") or 0) > 0:
        return "failed"
    return None


def _wait(config: Config, paths: RunPaths, cluster, job: dict[str, Any]) -> None:
    from components.train.gang.launcher import GangError, GangStalled, GangTimeout, failure_reason

    name = job["metadata"]["name"]
    deadline = time.monotonic() + config.train.timeout_s
    watch = heartbeat.ProgressWatch(config.train.progress_timeout_s)
    while True:
        state = job_state(job, cluster.status(job))
        if state == "succeeded":
            return
        if state == "failed":
            logs = cluster.failed_pod_logs(job["metadata"]["namespace"], name)
            tails = "".join(f"\n--- {pod} (last lines) ---\n{text}" for pod, text in sorted(logs.items()))
            reason = next((r for _, text in sorted(logs.items()) if (r := failure_reason(text))), "")
            raise GangError(f"{job['kind']} {name} failed: pod(s) {sorted(logs) or 'unknown'} failed"
                            f"{': ' + reason if reason else ''}{tails}", reason=reason)
        if time.monotonic() > deadline:
            raise GangTimeout(f"{job['kind']} {name} exceeded {config.train.timeout_s:.0f} s")
        # The local launcher's progress deadline, on the heartbeats the pods write to the shared
        # volume: a frozen or hung pod never fails, so only this ends the gang before the deadline.
        beats = {i: heartbeat.read(ready_file(paths, i)) for i in range(config.train.workers)}
        stalled = watch.check(beats, time.monotonic())
        if stalled is not None:
            raise GangStalled(f"{job['kind']} {name}: {stalled[1]}; stopped the gang", stalled[0])
        time.sleep(POLL_S)


def _create_replacing(cluster, doc: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Create `doc`; if this run's object is left from a launcher killed before its cleanup (an
    Airflow retry), delete it first and wait until it is gone: a retry starts a fresh gang."""
    from components.train.k8s.client import AlreadyExists

    try:
        return cluster.create(doc)
    except AlreadyExists:
        log.warning("%s %s exists (a killed launcher's): deleting it to start again", doc["kind"],
                    doc["metadata"]["name"])
    cluster.delete(doc)
    deadline = time.monotonic() + timeout_s
    while cluster.exists(doc):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{doc['kind']} {doc['metadata']['name']} still exists {timeout_s:.0f} s after delete")
        time.sleep(POLL_S)
    return cluster.create(doc)


def submit_and_wait(config: Config, paths: RunPaths, config_json: Path, cluster=None) -> None:
    """Create the job, then what it owns; poll until it ends; delete it either way."""
    from components.train.k8s.client import KubeCluster

    docs = render(config, paths, Path(config_json).read_text())
    manifest = write_manifests(docs, paths)
    cluster = cluster or KubeCluster()
    job, owned = docs[-1], docs[:-1]
    log.info("submitting %s %s (%s)", job["kind"], job["metadata"]["name"], manifest)
    for i in range(config.train.workers):     # a killed gang's last beats are not this gang's
        ready_file(paths, i).unlink(missing_ok=True)
    created = _create_replacing(cluster, job, config.train.startup_timeout_s)
    try:
        for doc in owned:
            _create_replacing(cluster, owned_by(doc, created), config.train.startup_timeout_s)
        _wait(config, paths, cluster, job)
    finally:
        for doc in (job, *owned):         # owned objects go with the job; deleting them too is quick
            cluster.delete(doc)

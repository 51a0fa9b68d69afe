"""Cluster backend: the same worker image, command and env as Kubernetes manifests.

Two flavours, same pods:
- "tfjob": a Kubeflow Training Operator TFJob. The operator gives every worker TF_CONFIG,
  and runPolicy gives the gang semantics the local launcher implements by hand
  (backoffLimit 0, all pods deleted when one fails, a deadline, gang scheduling minAvailable).
- "indexed-job": a plain batch/v1 Indexed Job plus a headless Service, for clusters without
  the operator. Pod i is reachable as <job>-<i>.<service>; the worker builds TF_CONFIG from
  RECO_WORKER_HOSTS and JOB_COMPLETION_INDEX (see worker.Task.from_env).

Data layout on the cluster: the artifact root (transform graph, backups, model) is a shared
volume mounted at the same path as locally, so every path in RunPaths is unchanged; the staged
shards are on each node's local SSD (hostPath at staging_root), filled by the stage step.
Rendering is pure Python (dicts -> YAML), unit-tested without a cluster.
"""
from __future__ import annotations

import hashlib
import logging
import re
import time
from pathlib import Path
from typing import Any

import yaml

from components.train.worker_spec import WORKER_ENV, WORKER_ENV_DEFAULTS, WORKER_MODULE, worker_args
from pipeline.config import Config
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)

PORT = 2222
CONFIG_MOUNT = "/etc/reco"
POLL_S = 5.0


def resource_name(paths: RunPaths) -> str:
    """A DNS-1123 name unique per run, short enough for '-worker-NN' pod suffixes (<= 63)."""
    base = re.sub(r"[^a-z0-9-]+", "-", f"reco-train-{paths.ds}-{paths.run_id}".lower()).strip("-")
    if len(base) <= 45:
        return base
    digest = hashlib.sha1(base.encode()).hexdigest()[:8]
    return f"{base[:36].rstrip('-')}-{digest}"


def worker_command(paths: RunPaths) -> list[str]:
    """The local launcher's worker command, reading the config from the mounted ConfigMap."""
    return ["python", "-m", WORKER_MODULE, *worker_args(Path(CONFIG_MOUNT) / "config.json", paths)]


def _env(extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    env = {**WORKER_ENV_DEFAULTS, **WORKER_ENV, **(extra or {})}
    return [{"name": k, "value": v} for k, v in env.items()]


def _labels(name: str) -> dict[str, str]:
    return {"app": "reco-nightly", "step": "train", "reco/run": name}


def pod_spec(config: Config, paths: RunPaths, name: str, container: str,
             extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One worker pod: image, command, env, GPUs, the config, shared artifacts and local SSD."""
    resources: dict[str, Any] = {}
    if config.train.gpus_per_worker:
        # A Quantity, which the API's schema types as a string.
        resources = {"limits": {"nvidia.com/gpu": str(config.train.gpus_per_worker)}}
    return {
        "restartPolicy": "Never",
        "containers": [{
            "name": container,
            "image": config.train.image,
            "command": worker_command(paths),
            "env": _env(extra_env),
            "ports": [{"name": "tfjob-port", "containerPort": PORT}],
            "resources": resources,
            "volumeMounts": [
                {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
                {"name": "artifacts", "mountPath": str(config.data.artifact_root)},
                {"name": "ssd", "mountPath": str(config.data.staging_root)},
            ],
        }],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{name}-config"}},
            {"name": "artifacts",
             "persistentVolumeClaim": {"claimName": config.train.k8s_artifacts_pvc}},
            {"name": "ssd", "hostPath": {"path": str(config.data.staging_root),
                                         "type": "DirectoryOrCreate"}},
        ],
    }


def config_map(config_json: str, name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "namespace": namespace,
                         "labels": _labels(name)},
            "data": {"config.json": config_json}}


def tfjob(config: Config, paths: RunPaths, name: str) -> dict[str, Any]:
    n = config.train.workers
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": name, "namespace": config.train.namespace,
                     "labels": _labels(name)},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "All", "backoffLimit": 0,
                          "activeDeadlineSeconds": int(config.train.timeout_s),
                          "schedulingPolicy": {"minAvailable": n}},
            "successPolicy": "AllWorkers",
            "tfReplicaSpecs": {"Worker": {
                "replicas": n, "restartPolicy": "Never",
                "template": {"metadata": {"labels": _labels(name)},
                             "spec": pod_spec(config, paths, name, "tensorflow")}}},
        },
    }


def indexed_job(config: Config, paths: RunPaths, name: str) -> list[dict[str, Any]]:
    """Headless Service + Indexed Job: stable DNS names per index, fail the Job on any failure."""
    n, ns = config.train.workers, config.train.namespace
    hosts = ",".join(f"{name}-{i}.{name}:{PORT}" for i in range(n))
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": _labels(name)},
        "spec": {"clusterIP": "None", "selector": {"job-name": name},
                 "ports": [{"name": "grpc", "port": PORT}], "publishNotReadyAddresses": True},
    }
    spec = pod_spec(config, paths, name, "worker", {"RECO_WORKER_HOSTS": hosts})
    spec["subdomain"] = name
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": _labels(name)},
        "spec": {"completionMode": "Indexed", "completions": n, "parallelism": n,
                 "backoffLimit": 0, "activeDeadlineSeconds": int(config.train.timeout_s),
                 "template": {"metadata": {"labels": _labels(name)}, "spec": spec}},
    }
    return [service, job]


def render(config: Config, paths: RunPaths, config_json: str) -> list[dict[str, Any]]:
    """All objects of one training run, in apply order."""
    name = resource_name(paths)
    docs = [config_map(config_json, name, config.train.namespace)]
    if config.train.k8s_flavor == "tfjob":
        docs.append(tfjob(config, paths, name))
    else:
        docs += indexed_job(config, paths, name)
    return docs


def to_yaml(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def write_manifests(docs: list[dict[str, Any]], paths: RunPaths) -> Path:
    """The submitted objects as YAML beside the run, for `kubectl` and for the record."""
    out = paths.train_dir / "k8s" / "manifests.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_yaml(docs))
    return out


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


def submit_and_wait(config: Config, paths: RunPaths, config_json: Path, cluster=None) -> None:
    """Apply the manifests, poll until the job ends, delete everything on failure or timeout."""
    from components.train.launcher import GangError, GangTimeout

    docs = render(config, paths, Path(config_json).read_text())
    manifest = write_manifests(docs, paths)
    cluster = cluster or KubeCluster()
    job = docs[-1]
    log.info("submitting %s %s (%s)", job["kind"], job["metadata"]["name"], manifest)
    for doc in docs:
        cluster.create(doc)
    deadline = time.monotonic() + config.train.timeout_s
    try:
        while True:
            state = job_state(job, cluster.status(job))
            if state == "succeeded":
                return
            if state == "failed":
                raise GangError(f"{job['kind']} {job['metadata']['name']} failed; "
                                f"see `kubectl logs -l reco/run={job['metadata']['name']}`")
            if time.monotonic() > deadline:
                raise GangTimeout(f"{job['kind']} exceeded {config.train.timeout_s:.0f} s")
            time.sleep(POLL_S)
    except BaseException:
        for doc in reversed(docs):
            cluster.delete(doc)
        raise


class KubeCluster:
    """The few API calls the backend needs, via the official client (in-cluster or kubeconfig)."""

    def __init__(self):
        from kubernetes import client
        from kubernetes import config as kube_config

        try:
            kube_config.load_incluster_config()
        except kube_config.ConfigException:
            kube_config.load_kube_config()
        self.api = client.ApiClient()
        self.custom = client.CustomObjectsApi(self.api)

    def create(self, doc: dict) -> None:
        from kubernetes import utils

        if doc["kind"] == "TFJob":
            self.custom.create_namespaced_custom_object(
                "kubeflow.org", "v1", doc["metadata"]["namespace"], "tfjobs", doc)
        else:
            utils.create_from_dict(self.api, doc)

    def status(self, doc: dict) -> dict:
        from kubernetes import client

        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        if doc["kind"] == "TFJob":
            obj = self.custom.get_namespaced_custom_object("kubeflow.org", "v1", ns, "tfjobs", name)
            return obj.get("status") or {}
        obj = client.BatchV1Api(self.api).read_namespaced_job_status(name, ns)
        return self.api.sanitize_for_serialization(obj.status) or {}

    def delete(self, doc: dict) -> None:
        from kubernetes import client

        ns, name, kind = doc["metadata"]["namespace"], doc["metadata"]["name"], doc["kind"]
        body = client.V1DeleteOptions(propagation_policy="Foreground")
        try:
            if kind == "TFJob":
                self.custom.delete_namespaced_custom_object("kubeflow.org", "v1", ns, "tfjobs", name)
            elif kind == "Job":
                client.BatchV1Api(self.api).delete_namespaced_job(name, ns, body=body)
            elif kind == "Service":
                client.CoreV1Api(self.api).delete_namespaced_service(name, ns)
            elif kind == "ConfigMap":
                client.CoreV1Api(self.api).delete_namespaced_config_map(name, ns)
        except client.ApiException as err:
            log.warning("could not delete %s %s: %s", kind, name, err.reason)

"""Cluster backend: the same worker image, command and env as Kubernetes manifests.

Two flavours, same pods:
- "tfjob": a Kubeflow Training Operator TFJob. The operator gives every worker TF_CONFIG,
  and runPolicy gives the gang semantics the local launcher implements by hand
  (backoffLimit 0, all pods deleted when one fails, a deadline, gang scheduling minAvailable).
- "indexed-job": a plain batch/v1 Indexed Job plus a headless Service, for clusters without
  the operator. Pod i is reachable as <job>-<i>.<service>; the worker builds TF_CONFIG from
  RECO_WORKER_HOSTS and JOB_COMPLETION_INDEX (see worker.Task.from_env).

Data layout on the cluster: the artifact root (transform graph, backups, model) is a shared
volume mounted at the same path as locally, so every path in RunPaths is unchanged. Each worker
pod stages its own shards onto its node's local SSD first: an init container runs
`python -m components.stage --worker I`, into a hostPath subdirectory per worker index (two
workers on one node do not share a staged dir), mounted at staging_root in both containers.

Network: TensorFlow's gRPC server listens on every interface without authentication (see
gang/netns.py), so a NetworkPolicy selects the gang's pods (label `reco/run`) and admits to them
only the gang's own pods, on the worker port. It is created before the ConfigMap every pod
mounts, and a pod's containers cannot start before that volume exists, so no worker serves
before the policy is there. It takes effect where the cluster's network plugin enforces
NetworkPolicies (Calico, Cilium and most others; not kubenet or flannel alone).

Lifecycle: the Job (or TFJob) is created first, then its NetworkPolicy, ConfigMap and Service
owned by it, so the garbage collector removes them with the Job; the launcher deletes the Job on
success and on failure (a failed gang's pod logs are read first), and `ttlSecondsAfterFinished`
removes it even if the launcher itself was killed. Rendering is pure Python (dicts -> YAML),
tested against the API's models; submitting and supervising is submit.py, the API calls client.py.
"""
from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any

import yaml

from components.train.gang.worker_spec import WORKER_ENV, WORKER_ENV_DEFAULTS, WORKER_MODULE, ready_file, worker_args
from pipeline.config import Config
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)

PORT = 2222
CONFIG_MOUNT = "/etc/reco"
TTL_S = 3600             # a finished Job (and what it owns) is garbage-collected after this
WORKER_INDEX_ENV = "RECO_WORKER_INDEX"
# Where each flavour's controller writes a pod's worker index (read through the downward API).
INDEX_FIELD = {"tfjob": "metadata.labels['training.kubeflow.org/replica-index']",
               "indexed-job": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}


def resource_name(paths: RunPaths) -> str:
    """A DNS-1123 name unique per run, short enough for '-worker-NN' pod suffixes (<= 63)."""
    base = re.sub(r"[^a-z0-9-]+", "-", f"reco-train-{paths.ds}-{paths.run_id}".lower()).strip("-")
    if len(base) <= 45:
        return base
    digest = hashlib.sha1(base.encode()).hexdigest()[:8]
    return f"{base[:36].rstrip('-')}-{digest}"


def worker_command(paths: RunPaths) -> list[str]:
    """The local launcher's worker command, reading the config from the mounted ConfigMap; the
    heartbeat goes to the shared artifact volume, where the launcher pod reads it."""
    return ["python", "-m", WORKER_MODULE, *worker_args(Path(CONFIG_MOUNT) / "config.json", paths,
                                                        ready_file=ready_file(paths, f"$({WORKER_INDEX_ENV})"))]


def _env(extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    env = {**WORKER_ENV_DEFAULTS, **WORKER_ENV, **(extra or {})}
    return [{"name": k, "value": v} for k, v in env.items()]


def _labels(name: str) -> dict[str, str]:
    return {"app": "reco-nightly", "step": "train", "reco/run": name}


def _mounts(config: Config) -> list[dict[str, Any]]:
    return [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": "artifacts", "mountPath": str(config.data.artifact_root)},
            {"name": "ssd", "mountPath": str(config.data.staging_root),
             "subPathExpr": f"worker-$({WORKER_INDEX_ENV})"}]


def stage_container(config: Config, paths: RunPaths, env: list[dict[str, Any]]) -> dict[str, Any]:
    """The init container: copy this worker's shards from the shared store to the node's SSD."""
    return {"name": "stage", "image": config.execution.image, "env": env, "volumeMounts": _mounts(config),
            "command": ["python", "-m", "components.stage", "--config", f"{CONFIG_MOUNT}/config.json",
                        "--date", paths.ds, "--run-id", paths.run_id,
                        "--worker", f"$({WORKER_INDEX_ENV})", "--workers", str(config.train.workers)]}


def pod_spec(config: Config, paths: RunPaths, name: str, container: str,
             extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One worker pod: stage, then train; the config, shared artifacts and the node's SSD."""
    resources: dict[str, Any] = {}
    if config.train.gpus_per_worker:
        # A Quantity, which the API's schema types as a string.
        resources = {"limits": {"nvidia.com/gpu": str(config.train.gpus_per_worker)}}
    field_path = INDEX_FIELD[config.execution.k8s_flavor]
    index = {"name": WORKER_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}
    env = [index, *_env(extra_env)]
    return {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,       # workers never call the API
        "initContainers": [stage_container(config, paths, env)],
        "containers": [{
            "name": container,
            "image": config.execution.image,
            "command": worker_command(paths),
            "env": env,
            "ports": [{"name": "tfjob-port", "containerPort": PORT}],
            "resources": resources,
            "volumeMounts": _mounts(config),
        }],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{name}-config"}},
            {"name": "artifacts",
             "persistentVolumeClaim": {"claimName": config.execution.k8s_artifacts_pvc}},
            {"name": "ssd", "hostPath": {"path": str(config.data.staging_root),
                                         "type": "DirectoryOrCreate"}},
        ],
    }


def network_policy(name: str, namespace: str) -> dict[str, Any]:
    """Only the gang's own pods reach its pods, and only on the worker port: every other
    ingress (other pods, other namespaces, the nodes' networks) is refused. Egress is left open
    (the shared volume, DNS)."""
    gang = {"podSelector": {"matchLabels": {"reco/run": name}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{name}-gang", "namespace": namespace, "labels": _labels(name)},
            "spec": {**gang, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [gang], "ports": [{"protocol": "TCP", "port": PORT}]}]}}


def config_map(config_json: str, name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "namespace": namespace,
                         "labels": _labels(name)},
            "data": {"config.json": config_json}}


def tfjob(config: Config, paths: RunPaths, name: str) -> dict[str, Any]:
    n = config.train.workers
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": name, "namespace": config.execution.namespace,
                     "labels": _labels(name)},
        "spec": {
            # "Running": the operator stops the peers of a failed worker but keeps the failed pod
            # for its log (read before cleanup); the launcher's delete and the TTL remove it.
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0, "ttlSecondsAfterFinished": TTL_S,
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
    n, ns = config.train.workers, config.execution.namespace
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
                 "ttlSecondsAfterFinished": TTL_S,
                 "template": {"metadata": {"labels": _labels(name)}, "spec": spec}},
    }
    return [service, job]


def render(config: Config, paths: RunPaths, config_json: str) -> list[dict[str, Any]]:
    """All objects of one training run, in apply order: the job last (submit.py creates it
    first and the others, owned by it, in this order: the policy before the pods' ConfigMap)."""
    name = resource_name(paths)
    ns = config.execution.namespace
    docs = [network_policy(name, ns), config_map(config_json, name, ns)]
    if config.execution.k8s_flavor == "tfjob":
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


def owned_by(doc: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    """`doc` with an ownerReference to the created `owner`: deleted with it by the garbage collector."""
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": False}
    return {**doc, "metadata": {**doc["metadata"], "ownerReferences": [ref]}}

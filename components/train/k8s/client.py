"""The few Kubernetes API calls the cluster backend makes, through the official client.

In a pod it uses the pod's service account (the Role that `python -m components.train.k8s
rbac` renders grants exactly these calls); elsewhere the kubeconfig. Tested against a loopback
stand-in of the API server (tests/components/train/kube_api_standin.py).
"""
from __future__ import annotations

import logging
import os
from typing import Any

from pipeline.config import Config

log = logging.getLogger(__name__)
LOG_TAIL_LINES = 40
TFJOB = ("kubeflow.org", "v1", "tfjobs")


def rbac(config: Config) -> list[dict[str, Any]]:
    """ServiceAccount + Role + RoleBinding for the launcher pod: the calls KubeCluster makes."""
    ns, sa = config.execution.namespace, config.execution.k8s_service_account
    meta = {"name": sa, "namespace": ns, "labels": {"app": "reco-nightly"}}
    verbs = ["create", "get", "delete"]
    rules = [{"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": verbs},
             {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
             {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
             {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": verbs},
             {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
             {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": verbs},
             {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": verbs}]
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
             "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}]


class AlreadyExists(RuntimeError):
    """An object of that name exists: a previous launcher of this run was killed before cleanup."""


class KubeCluster:
    def __init__(self):
        from kubernetes import client
        from kubernetes import config as kube_config

        try:
            kube_config.load_incluster_config()
        except kube_config.ConfigException:
            # $KUBECONFIG read now: the client reads it once, when first imported.
            kube_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        self.api = client.ApiClient()
        self.custom = client.CustomObjectsApi(self.api)

    def create(self, doc: dict) -> dict:
        """Create `doc`; returns the created object as the API server stored it (with its uid)."""
        from kubernetes import client, utils

        try:
            if doc["kind"] == "TFJob":
                return self.custom.create_namespaced_custom_object(*TFJOB[:2], doc["metadata"]["namespace"],
                                                                   TFJOB[2], doc)
            (created,) = utils.create_from_dict(self.api, doc)
        except (client.ApiException, utils.FailToCreateError) as err:
            statuses = [e.status for e in getattr(err, "api_exceptions", [err])]
            if 409 in statuses:
                raise AlreadyExists(f"{doc['kind']} {doc['metadata']['name']} already exists") from err
            raise
        return self.api.sanitize_for_serialization(created)

    def exists(self, doc: dict) -> bool:
        from kubernetes import client

        ns, name, kind = doc["metadata"]["namespace"], doc["metadata"]["name"], doc["kind"]
        try:
            if kind == "TFJob":
                self.custom.get_namespaced_custom_object(*TFJOB[:2], ns, TFJOB[2], name)
            elif kind == "Job":
                client.BatchV1Api(self.api).read_namespaced_job(name, ns)
            elif kind == "Service":
                client.CoreV1Api(self.api).read_namespaced_service(name, ns)
            elif kind == "NetworkPolicy":
                client.NetworkingV1Api(self.api).read_namespaced_network_policy(name, ns)
            else:
                client.CoreV1Api(self.api).read_namespaced_config_map(name, ns)
        except client.ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def status(self, doc: dict) -> dict:
        from kubernetes import client

        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        if doc["kind"] == "TFJob":
            obj = self.custom.get_namespaced_custom_object(*TFJOB[:2], ns, TFJOB[2], name)
            return obj.get("status") or {}
        obj = client.BatchV1Api(self.api).read_namespaced_job_status(name, ns)
        return self.api.sanitize_for_serialization(obj.status) or {}

    def failed_pod_logs(self, namespace: str, run_label: str) -> dict[str, str]:
        """"pod/container" -> its last lines, for each container of the gang's Failed pods that
        exited non-zero (the stage init container or the worker): read before cleanup deletes
        them, so the task log says why the gang failed."""
        from kubernetes import client

        core = client.CoreV1Api(self.api)
        pods = core.list_namespaced_pod(namespace, label_selector=f"reco/run={run_label}").items
        logs = {}
        for pod in pods:
            if not (pod.status and pod.status.phase == "Failed"):
                continue
            for container in _failed_containers(pod.status):
                try:
                    # The raw body: deserialized, the client hands back the repr of bytes ("b'…\\n'").
                    text = core.read_namespaced_pod_log(pod.metadata.name, namespace, container=container,
                                                        tail_lines=LOG_TAIL_LINES,
                                                        _preload_content=False).data.decode("utf-8", "replace")
                except client.ApiException as err:
                    text = f"(log unavailable: {err.reason})"
                logs[f"{pod.metadata.name}/{container}"] = text
        return logs

    def delete(self, doc: dict) -> None:
        """Delete `doc` (a Job's pods with it: foreground propagation); a missing object is fine."""
        from kubernetes import client

        ns, name, kind = doc["metadata"]["namespace"], doc["metadata"]["name"], doc["kind"]
        body = client.V1DeleteOptions(propagation_policy="Foreground")
        try:
            if kind == "TFJob":
                self.custom.delete_namespaced_custom_object(*TFJOB[:2], ns, TFJOB[2], name, body=body)
            elif kind == "Job":
                client.BatchV1Api(self.api).delete_namespaced_job(name, ns, body=body)
            elif kind == "Service":
                client.CoreV1Api(self.api).delete_namespaced_service(name, ns)
            elif kind == "ConfigMap":
                client.CoreV1Api(self.api).delete_namespaced_config_map(name, ns)
            elif kind == "NetworkPolicy":
                client.NetworkingV1Api(self.api).delete_namespaced_network_policy(name, ns)
        except client.ApiException as err:
            if err.status != 404:
                log.warning("could not delete %s %s: %s", kind, name, err.reason)


def _failed_containers(status) -> list[str]:
    """Containers that terminated with a non-zero exit code, init containers first."""
    statuses = [*(status.init_container_statuses or []), *(status.container_statuses or [])]
    return [c.name for c in statuses
            if c.state and c.state.terminated and (c.state.terminated.exit_code or 0) != 0]

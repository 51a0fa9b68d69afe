"""The few Kubernetes API calls the cluster backend makes, through the official client.

In a pod it uses the pod's service account (the Role that `python -m components.train.kubernetes
rbac` renders grants exactly these calls); elsewhere the kubeconfig. Tested against a loopback
stand-in of the API server (tests/components/train/kube_api_standin.py).
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)
LOG_TAIL_LINES = 40
TFJOB = ("kubeflow.org", "v1", "tfjobs")


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
        from kubernetes import utils

        if doc["kind"] == "TFJob":
            return self.custom.create_namespaced_custom_object(*TFJOB[:2], doc["metadata"]["namespace"],
                                                               TFJOB[2], doc)
        (created,) = utils.create_from_dict(self.api, doc)
        return self.api.sanitize_for_serialization(created)

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
                    text = core.read_namespaced_pod_log(pod.metadata.name, namespace, container=container,
                                                        tail_lines=LOG_TAIL_LINES)
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
        except client.ApiException as err:
            if err.status != 404:
                log.warning("could not delete %s %s: %s", kind, name, err.reason)


def _failed_containers(status) -> list[str]:
    """Containers that terminated with a non-zero exit code, init containers first."""
    statuses = [*(status.init_container_statuses or []), *(status.container_statuses or [])]
    return [c.name for c in statuses
            if c.state and c.state.terminated and (c.state.terminated.exit_code or 0) != 0]

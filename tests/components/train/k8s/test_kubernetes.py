"""The cluster backend's rendered manifests (no cluster here) and its submit/wait/cleanup logic."""
from __future__ import annotations

import json

import pytest
import yaml

from components.train.gang.launcher import GangError
from components.train.k8s import cli, submit
from components.train.k8s import manifests as k8s
from components.train.k8s.client import rbac
from pipeline.config import Config
from pipeline.paths import RunPaths


def _config(**train) -> Config:
    base = {"train.workers": 3, "execution.image": "registry/reco-worker:1.2", "execution.namespace": "ml",
            "train.gpus_per_worker": 1, "train.timeout_s": 1800.0,
            "data.artifact_root": "/mnt/artifacts", "data.staging_root": "/mnt/ssd"}
    return Config().with_overrides({**base, **train})


def _paths(config, run_id="scheduled__2026-11-08T02:00:00+00:00"):
    return RunPaths.for_run(config, "2026-11-08", run_id)


def _render(config, paths):
    docs = k8s.render(config, paths, json.dumps(config.to_dict()))
    return list(yaml.safe_load_all(k8s.to_yaml(docs)))       # round-trips as YAML


def test_tfjob_manifest():
    config = _config()
    paths = _paths(config)
    _, cm, job = _render(config, paths)
    name = k8s.resource_name(paths)
    assert cm["kind"] == "ConfigMap" and json.loads(cm["data"]["config.json"])["train"]["workers"] == 3
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "TFJob"
    assert job["metadata"] == {"name": name, "namespace": "ml",
                               "labels": {"app": "reco-nightly", "step": "train", "reco/run": name}}
    run_policy = job["spec"]["runPolicy"]
    assert run_policy["backoffLimit"] == 0 and run_policy["cleanPodPolicy"] == "Running"
    assert run_policy["ttlSecondsAfterFinished"] == k8s.TTL_S
    assert run_policy["activeDeadlineSeconds"] == 1800
    assert run_policy["schedulingPolicy"]["minAvailable"] == 3          # gang scheduling
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3 and worker["restartPolicy"] == "Never"
    (container,) = worker["template"]["spec"]["containers"]
    assert container["name"] == "tensorflow"                # the operator's required name
    assert container["image"] == "registry/reco-worker:1.2"
    assert container["command"] == ["python", "-m", "components.train.worker", "--config-json",
                                    "/etc/reco/config.json", "--date", "2026-11-08",
                                    "--run-id", paths.run_id,     # the heartbeat, on the shared volume:
                                    "--ready-file", f"{paths.logs_dir}/worker-$(RECO_WORKER_INDEX).ready"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TF_USE_LEGACY_KERAS"] == "1" and "TF_CONFIG" not in env   # the operator sets it
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"config": "/etc/reco", "artifacts": "/mnt/artifacts", "ssd": "/mnt/ssd"}
    ssd = next(m for m in container["volumeMounts"] if m["name"] == "ssd")
    assert ssd["subPathExpr"] == "worker-$(RECO_WORKER_INDEX)"          # one staged dir per worker
    index = {e["name"]: e for e in container["env"]}["RECO_WORKER_INDEX"]
    assert index["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['training.kubeflow.org/replica-index']"
    (stage,) = worker["template"]["spec"]["initContainers"]
    assert stage["command"] == ["python", "-m", "components.stage", "--config", "/etc/reco/config.json",
                                "--date", "2026-11-08", "--run-id", paths.run_id,
                                "--worker", "$(RECO_WORKER_INDEX)", "--workers", "3"]
    assert stage["volumeMounts"] == container["volumeMounts"] and stage["image"] == container["image"]
    assert worker["template"]["spec"]["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in worker["template"]["spec"]["volumes"]}
    assert volumes["ssd"]["hostPath"]["path"] == "/mnt/ssd"             # node-local staged shards
    assert volumes["artifacts"]["persistentVolumeClaim"]["claimName"] == "reco-artifacts"
    assert volumes["config"]["configMap"]["name"] == cm["metadata"]["name"]


def test_indexed_job_with_headless_service():
    config = _config(**{"execution.k8s_flavor": "indexed-job", "train.gpus_per_worker": 0})
    paths = _paths(config)
    _, cm, service, job = _render(config, paths)
    name = k8s.resource_name(paths)
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"job-name": name}
    assert job["kind"] == "Job" and job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    assert job["spec"]["backoffLimit"] == 0                # one failed pod fails the gang
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == name and pod["restartPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RECO_WORKER_HOSTS"].split(",") == [f"{name}-{i}.{name}:2222" for i in range(3)]
    index = {e["name"]: e for e in pod["containers"][0]["env"]}["RECO_WORKER_INDEX"]
    assert "job-completion-index" in index["valueFrom"]["fieldRef"]["fieldPath"]
    assert job["spec"]["ttlSecondsAfterFinished"] == k8s.TTL_S
    assert pod["containers"][0]["resources"] == {}


@pytest.mark.parametrize("flavor", ["tfjob", "indexed-job"])
def test_a_network_policy_admits_only_the_gangs_pods_to_the_worker_port(flavor):
    """TF's gRPC server listens on every interface, unauthenticated: on a cluster the policy is
    what keeps other pods off it. It selects the pods the job's template labels, admits ingress
    from those same pods only (same namespace: no namespaceSelector), on the worker port only,
    and is applied before the ConfigMap the pods cannot start without."""
    config = _config(**{"execution.k8s_flavor": flavor})
    docs = _render(config, _paths(config))
    name = k8s.resource_name(_paths(config))
    policy, job = docs[0], docs[-1]
    assert [d["kind"] for d in docs[:2]] == ["NetworkPolicy", "ConfigMap"]
    assert policy["apiVersion"] == "networking.k8s.io/v1" and policy["metadata"]["namespace"] == "ml"
    template = job["spec"]["tfReplicaSpecs"]["Worker"]["template"] if flavor == "tfjob" else job["spec"]["template"]
    pod_labels = template["metadata"]["labels"]
    gang = policy["spec"]["podSelector"]["matchLabels"]
    assert gang == {"reco/run": name} and gang.items() <= pod_labels.items()       # selects every worker pod
    assert policy["spec"]["policyTypes"] == ["Ingress"]                              # all other ingress refused
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"reco/run": name}}}]   # the gang's pods, nothing else
    (container,) = template["spec"]["containers"]
    assert rule["ports"] == [{"protocol": "TCP", "port": container["ports"][0]["containerPort"]}]


def test_worker_builds_tf_config_from_indexed_job_env(monkeypatch):
    from components.train.worker.main import Task

    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv("RECO_WORKER_HOSTS", "j-0.j:2222,j-1.j:2222")
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    task = Task.from_env()
    assert (task.num_workers, task.index, task.is_chief) == (2, 1, False)
    assert json.loads(__import__("os").environ["TF_CONFIG"])["cluster"]["worker"][1] == "j-1.j:2222"


def test_resource_names_are_dns_safe_and_unique():
    config = _config()
    long_a = k8s.resource_name(_paths(config, "manual__2026-11-08T10:11:12.123456+00:00_retry_a"))
    long_b = k8s.resource_name(_paths(config, "manual__2026-11-08T10:11:12.123456+00:00_retry_b"))
    for name in (long_a, long_b, k8s.resource_name(_paths(config))):
        assert len(name) <= 45 and name == name.lower()
        assert all(c.isalnum() or c == "-" for c in name) and name[0].isalpha() and name[-1].isalnum()
    assert long_a != long_b


class FakeCluster:
    def __init__(self, states):
        self.states, self.created, self.deleted, self.owners = list(states), [], [], {}

    def create(self, doc):
        self.created.append(doc["kind"])
        self.owners[doc["kind"]] = [o["kind"] for o in doc["metadata"].get("ownerReferences", [])]
        return {**doc, "metadata": {**doc["metadata"], "uid": f"uid-{doc['kind']}"}}

    def status(self, doc):
        return self.states.pop(0) if self.states else {}

    def failed_pod_logs(self, namespace, run_label):
        return {f"{run_label}-1": "Traceback: boom\n"}

    def delete(self, doc):
        self.deleted.append(doc["kind"])


def test_submit_waits_for_success_then_cleans_up(tmp_path, monkeypatch):
    monkeypatch.setattr(submit, "POLL_S", 0.01)
    config = _config(**{"data.artifact_root": str(tmp_path)})
    paths, cfg_json = _paths(config), tmp_path / "config.json"
    cfg_json.write_text(json.dumps(config.to_dict()))
    cluster = FakeCluster([{}, {"conditions": [{"type": "Succeeded", "status": "True"}]}])
    submit.submit_and_wait(config, paths, cfg_json, cluster=cluster)
    assert cluster.created == ["TFJob", "NetworkPolicy", "ConfigMap"]
    assert cluster.owners["ConfigMap"] == cluster.owners["NetworkPolicy"] == ["TFJob"]
    assert cluster.deleted == ["TFJob", "NetworkPolicy", "ConfigMap"]
    assert (paths.train_dir / "k8s" / "manifests.yaml").exists()


def test_failed_job_is_deleted_and_raises_with_the_failed_pods_log(tmp_path, monkeypatch):
    monkeypatch.setattr(submit, "POLL_S", 0.01)
    config = _config(**{"data.artifact_root": str(tmp_path), "execution.k8s_flavor": "indexed-job"})
    paths, cfg_json = _paths(config), tmp_path / "config.json"
    cfg_json.write_text("{}")
    cluster = FakeCluster([{"active": 3}, {"failed": 1, "active": 2}])
    with pytest.raises(GangError, match="(?s)-1'] failed.*Traceback: boom"):
        submit.submit_and_wait(config, paths, cfg_json, cluster=cluster)
    assert cluster.deleted == ["Job", "NetworkPolicy", "ConfigMap", "Service"]


MODELS = {"ConfigMap": "V1ConfigMap", "Job": "V1Job", "Service": "V1Service", "ServiceAccount": "V1ServiceAccount",
          "Role": "V1Role", "RoleBinding": "V1RoleBinding", "NetworkPolicy": "V1NetworkPolicy"}


def _api_schema_round_trip(doc: dict, model: str) -> dict:
    """`doc` deserialized into the kubernetes client's model of the API type, then serialized
    again: required fields are checked on the way in, and any key the API does not define is
    dropped, so the result differs from `doc` wherever `doc` is not a valid object."""
    from kubernetes.client import ApiClient

    class Response:
        data = json.dumps(doc)

    client = ApiClient()
    return client.sanitize_for_serialization(client.deserialize(Response(), model))


@pytest.mark.parametrize("flavor", ["tfjob", "indexed-job"])
def test_rendered_objects_are_valid_kubernetes_api_objects(flavor):
    config = _config(**{"execution.k8s_flavor": flavor})
    docs = _render(config, _paths(config)) + rbac(config)
    for doc in docs:
        if doc["kind"] == "TFJob":      # a CRD the client has no model of: check its pod template
            template = doc["spec"]["tfReplicaSpecs"]["Worker"]["template"]
            assert _api_schema_round_trip(template, "V1PodTemplateSpec") == template
        else:
            assert _api_schema_round_trip(doc, MODELS[doc["kind"]]) == doc, doc["kind"]


def test_schema_check_catches_a_misspelt_field():
    config = _config(**{"execution.k8s_flavor": "indexed-job"})
    job = _render(config, _paths(config))[-1]
    job["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []     # not an API field
    assert _api_schema_round_trip(job, "V1Job") != job


def test_rbac_cli_prints_the_launchers_account_role_and_binding(capsys, monkeypatch):
    monkeypatch.setenv("RECO__EXECUTION__NAMESPACE", "ml")
    assert cli.main(["rbac"]) == 0
    account, role, binding = yaml.safe_load_all(capsys.readouterr().out)
    assert account["kind"] == "ServiceAccount" and account["metadata"]["namespace"] == "ml"
    granted = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"]}
    assert granted[("batch", "jobs")] == granted[("kubeflow.org", "tfjobs")] == {"create", "get", "delete"}
    assert granted[("", "pods/log")] == {"get"} and ("", "secrets") not in granted
    assert granted[("networking.k8s.io", "networkpolicies")] == {"create", "get", "delete"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "ml"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]

"""KubeCluster's real client calls against a loopback stand-in of the API server: create the job
then its owned objects, poll, read a failed pod's log, delete everything, for both flavours."""
from __future__ import annotations

import json

import pytest

from components.train.gang.launcher import GangError, GangStalled
from components.train.k8s import manifests as k8s
from components.train.k8s import submit
from pipeline.config import Config
from pipeline.paths import RunPaths
from tests.components.train import kube_api_standin
from tests.components.train.kube_api_standin import CRASH_LOG, STAGE_LOG, KubeApiStandIn

# The stand-in routes the core, batch and kubeflow groups; the gang's NetworkPolicy is in
# networking.k8s.io, served the same way (objects kept as posted).
_GROUPS = kube_api_standin.GROUPS.replace(r"|apis/kubeflow\.org/v1)",
                                          r"|apis/kubeflow\.org/v1|apis/networking\.k8s\.io/v1)")
POLICIES = "/apis/networking.k8s.io/v1/namespaces/ml/networkpolicies"


@pytest.fixture(autouse=True)
def _standin_serves_network_policies(monkeypatch):
    import re

    if "networking" not in kube_api_standin.GROUPS:
        monkeypatch.setattr(kube_api_standin, "COLLECTION", re.compile(_GROUPS + r"$"))
        monkeypatch.setattr(kube_api_standin, "ITEM", re.compile(_GROUPS + r"/([^/]+)(/status|/log)?$"))


def _run(tmp_path, flavor: str, **overrides) -> tuple[Config, RunPaths]:
    config = Config().with_overrides({"train.workers": 2, "execution.namespace": "ml", "execution.k8s_flavor": flavor,
                                      "data.artifact_root": str(tmp_path / "artifacts"), **overrides})
    return config, RunPaths.for_run(config, "2026-11-08", "scheduled__2026-11-08T02:00:00+00:00")


def _submit(tmp_path, monkeypatch, standin: KubeApiStandIn, flavor: str, **overrides):
    from components.train.k8s.client import KubeCluster

    monkeypatch.setattr(submit, "POLL_S", 0.01)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)       # not in a pod: use the kubeconfig
    monkeypatch.setenv("KUBECONFIG", str(standin.write_kubeconfig(tmp_path / "kubeconfig", "ml")))
    config, paths = _run(tmp_path, flavor, **overrides)
    config_json = tmp_path / "config.json"
    config_json.write_text(json.dumps(config.to_dict()))
    submit.submit_and_wait(config, paths, config_json, cluster=KubeCluster())
    return k8s.resource_name(paths)


@pytest.mark.parametrize(("flavor", "created"), [
    ("indexed-job", [("POST", "/apis/batch/v1/namespaces/ml/jobs"), ("POST", POLICIES),
                     ("POST", "/api/v1/namespaces/ml/configmaps"), ("POST", "/api/v1/namespaces/ml/services")]),
    ("tfjob", [("POST", "/apis/kubeflow.org/v1/namespaces/ml/tfjobs"), ("POST", POLICIES),
               ("POST", "/api/v1/namespaces/ml/configmaps")]),
])
def test_a_gang_that_succeeds_is_created_owned_polled_and_cleaned_up(tmp_path, monkeypatch, flavor, created):
    with KubeApiStandIn(outcome="succeeded", polls=2) as api:
        name = _submit(tmp_path, monkeypatch, api, flavor)
    assert [c for c in api.calls if c[0] == "POST"] == created
    assert {n for _, n in api.deleted} >= {name, f"{name}-config", f"{name}-gang"}   # the job and what it owns
    assert api.objects == {}                                                  # nothing left behind
    polls = [c for c in api.calls if c[0] == "GET"]
    assert len(polls) == 3                                                    # 2 running, then done


def test_owned_objects_reference_the_created_job_by_uid(tmp_path, monkeypatch):
    seen = {}

    class Recording(KubeApiStandIn):
        def _status(self, doc):
            seen.update({kind: d["metadata"].get("ownerReferences") for (kind, _, _), d in self.objects.items()})
            seen["job_uid"] = doc["metadata"]["uid"]
            return super()._status(doc)

    with Recording(outcome="succeeded", polls=0) as api:
        _submit(tmp_path, monkeypatch, api, "indexed-job")
    for kind in ("networkpolicies", "configmaps", "services"):
        (ref,) = seen[kind]
        assert ref["kind"] == "Job" and ref["uid"] == seen["job_uid"]


@pytest.mark.parametrize(("flavor", "outcome", "container", "log"), [
    ("indexed-job", "failed", "worker", CRASH_LOG), ("tfjob", "failed", "worker", CRASH_LOG),
    ("indexed-job", "stage_failed", "stage", STAGE_LOG)])
def test_a_failed_pod_fails_the_gang_with_its_log_and_everything_is_deleted(tmp_path, monkeypatch, flavor, outcome,
                                                                              container, log):
    with KubeApiStandIn(outcome=outcome, polls=1) as api:
        with pytest.raises(GangError) as err:
            _submit(tmp_path, monkeypatch, api, flavor)
    name = err.value.args[0].split()[1]
    assert f"'{name}-1/{container}'] failed" in str(err.value)
    assert f"{name}-1/{container} (last lines) ---\n{log}" in str(err.value)     # the text, not a repr of bytes
    first_line = str(err.value).splitlines()[0]          # what the RECO FAILED line shows
    assert first_line.endswith("failed: StageError: shard train/part-00003 copied 0 bytes, manifest says 8912345"
                               if outcome == "stage_failed" else "failed"), first_line
    assert ("GET", f"/api/v1/namespaces/ml/pods/{name}-1/log") in api.calls
    assert ("GET", f"/api/v1/namespaces/ml/pods/{name}-0/log") not in api.calls     # only failed pods
    assert api.objects == {} and {kind for kind, _ in api.deleted} >= {"ConfigMap", "NetworkPolicy"}


def test_a_retry_after_a_killed_launcher_replaces_the_gang_it_left_running(tmp_path, monkeypatch):
    """Airflow retries the train task; the killed launcher's job and ConfigMap are still there."""
    with KubeApiStandIn(outcome="succeeded", polls=0) as api:
        name = k8s.resource_name(_run(tmp_path, "indexed-job")[1])
        api.objects[("jobs", "ml", name)] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": name, "namespace": "ml", "uid": "old"}, "spec": {"template": {"spec": {"containers": []}}}}
        api.objects[("configmaps", "ml", f"{name}-config")] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": f"{name}-config", "namespace": "ml", "uid": "old-cm"}}
        assert _submit(tmp_path, monkeypatch, api, "indexed-job") == name
    posts = [path for method, path in api.calls if method == "POST"]
    assert posts.count("/apis/batch/v1/namespaces/ml/jobs") == 2              # refused (409), then recreated
    assert ("DELETE", f"/apis/batch/v1/namespaces/ml/jobs/{name}") in api.calls[:4]
    assert api.objects == {}


def test_a_pod_whose_heartbeat_froze_stops_the_gang_before_its_deadline(tmp_path, monkeypatch):
    """The job stays Running (a frozen pod never fails); the heartbeats on the shared volume,
    where the worker command writes them, stop changing: GangStalled, and the gang is deleted.
    A killed gang's beats left from before are removed at submission, so they count for nothing."""
    from components.train.gang.worker_spec import ready_file

    paths = _run(tmp_path, "indexed-job")[1]
    assert f"{ready_file(paths, '$(RECO_WORKER_INDEX)')}" in k8s.worker_command(paths)
    ready_file(paths, 1).parent.mkdir(parents=True)
    ready_file(paths, 1).write_text("left by a killed gang")

    class FrozenPods(KubeApiStandIn):
        def _status(self, doc):
            left = ready_file(paths, 1)
            assert not left.exists() or left.read_text() != "left by a killed gang"
            for i in (0, 1):                              # the pods beat once, then froze
                ready_file(paths, i).write_text(json.dumps({"seq": 3, "steps": 12, "phase": "fit"}))
            return super()._status(doc)

    with FrozenPods(outcome="succeeded", polls=10**6) as api:
        with pytest.raises(GangStalled, match="no heartbeat for .* stopped the gang") as err:
            _submit(tmp_path, monkeypatch, api, "indexed-job",
                    **{"train.progress_timeout_s": 0.3, "train.timeout_s": 60.0})
    assert err.value.worker == 0 and api.objects == {}

"""Version labels against a loopback stand-in of TF Serving's model-status REST endpoint: canary
first, stable moved only once the new version is AVAILABLE, stable kept when it never is."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from components.push import labels
from pipeline.contracts import serving


class ServingStandIn:
    """TF Serving's handling of models.config, as far as labels go, behind its status endpoint.

    At each GET /v1/models/<name>/versions/<v> it reloads the file the push wrote, as
    ServerCore::ReloadConfig does: labels are checked first, and a label on a version that is not
    AVAILABLE is refused unless `allow_unavailable` (--allow_version_labels_for_unavailable_models)
    and the label is not assigned yet; a refused config changes nothing, so its versions never
    start loading. A version of an applied config is AVAILABLE `load_polls` polls after it was
    first asked for (never, if None). `seen` records the file at each poll.
    """

    def __init__(self, serving_base, load_polls: int | None, allow_unavailable: bool = True):
        self.serving_base, self.load_polls, self.allow = serving_base, load_polls, allow_unavailable
        self.seen, self.refused, self.labels, self.asked_at = [], 0, {}, {}
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                version = int(self.path.rstrip("/").split("/")[-1])
                standin.reload()
                state = "AVAILABLE" if standin.available(version) else "LOADING"
                body = json.dumps({"model_version_status": [{"version": str(version), "state": state}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def available(self, version: int) -> bool:
        return (self.load_polls is not None and version in self.asked_at
                and len(self.seen) - self.asked_at[version] >= self.load_polls)

    def reload(self) -> None:
        config = parse(self.serving_base)
        self.seen.append(config)
        for label, version in config["labels"].items():
            if self.labels.get(label) == version:                          # unchanged: fine
                continue
            if not self.available(version) and not (self.allow and label not in self.labels):
                self.refused += 1
                return
        self.labels = config["labels"]
        for version in config["versions"]:
            self.asked_at.setdefault(version, len(self.seen))

    def serving_stable(self, version: int) -> ServingStandIn:
        """Start as a server that has long served `version` as stable."""
        self.labels, self.asked_at[version] = {"stable": version}, -100
        return self

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def parse(serving_base) -> dict:
    """models.config as TF Serving reads it: {versions, labels} of the recommender entry."""
    config = text_format.Parse((serving_base / serving.MODELS_CONFIG).read_text(),
                               model_server_config_pb2.ModelServerConfig())
    (entry,) = config.model_config_list.config
    return {"versions": list(entry.model_version_policy.specific.versions), "labels": dict(entry.version_labels),
            "latest": entry.model_version_policy.HasField("latest")}


@pytest.fixture
def fast_polls(monkeypatch):
    monkeypatch.setattr(labels, "POLL_S", 0.01)


def test_canary_first_then_stable_once_the_new_version_is_available(tmp_path, fast_polls):
    standin = ServingStandIn(tmp_path, load_polls=2).serving_stable(3)
    try:
        labels.publish_labels(tmp_path, "recommender", previous=3, new=4, url=standin.url, timeout_s=10)
    finally:
        standin.close()
    write_1 = {"versions": [3, 4], "labels": {"stable": 3, "canary": 4}, "latest": False}
    assert standin.seen == [write_1] * 3 and standin.refused == 0     # polled while LOADING
    assert parse(tmp_path) == {"versions": [4], "labels": {"stable": 4}, "latest": False}
    standin.reload()                                                  # the server applies write 2
    assert standin.refused == 0 and standin.labels == {"stable": 4}


def test_without_the_server_flag_the_canary_write_is_refused_and_nothing_loads(tmp_path, fast_polls):
    """Why docker-compose passes --allow_version_labels_for_unavailable_models=true (a test there
    checks it): TF Serving checks labels before loading, so without it write 1 never applies."""
    standin = ServingStandIn(tmp_path, load_polls=0, allow_unavailable=False).serving_stable(3)
    try:
        with pytest.raises(labels.LabelTimeout, match="last state: LOADING"):
            labels.publish_labels(tmp_path, "recommender", previous=3, new=4, url=standin.url, timeout_s=0.2)
    finally:
        standin.close()
    assert standin.refused == len(standin.seen) > 0 and 4 not in standin.asked_at


def test_stable_stays_on_the_old_version_when_the_new_one_never_loads(tmp_path, fast_polls):
    standin = ServingStandIn(tmp_path, load_polls=None).serving_stable(3)
    try:
        with pytest.raises(labels.LabelTimeout, match="version 4 is not AVAILABLE.*last state: LOADING"):
            labels.publish_labels(tmp_path, "recommender", previous=3, new=4, url=standin.url, timeout_s=0.2)
    finally:
        standin.close()
    assert parse(tmp_path)["labels"] == {"stable": 3, "canary": 4}


def test_an_unreachable_server_is_named_and_the_first_version_needs_one_write(tmp_path, fast_polls):
    with pytest.raises(labels.LabelTimeout, match="last state: unreachable"):
        labels.publish_labels(tmp_path, "recommender", previous=1, new=2, url="http://127.0.0.1:9", timeout_s=0.1)
    labels.publish_labels(tmp_path / "fresh", "recommender", previous=None, new=1, url="http://127.0.0.1:9",
                          timeout_s=0.1)                   # nothing served before: no wait, stable at once
    assert parse(tmp_path / "fresh") == {"versions": [1], "labels": {"stable": 1}, "latest": False}


def test_push_then_rollback_move_stable_through_canary_via_finish(tmp_path, fast_polls):
    """publish.finish (push and rollback both end there) starts from the version labelled stable."""
    from components.push import publish
    from pipeline.config import PushConfig

    model_base = tmp_path / "recommender"
    for version in (1, 2, 3):
        (model_base / str(version)).mkdir(parents=True)
    standin = ServingStandIn(tmp_path, load_polls=1)
    push = PushConfig(serving_url=standin.url, label_wait_s=5.0)
    try:
        publish.finish(model_base / "1", "push", {"version": 1}, push)                   # first model: one write
        standin.reload()                       # TF Serving reads the file on its own poll between pushes
        publish.finish(model_base / "2", "push", {"version": 2}, push, previous=1)
        standin.reload()
        publish.finish(model_base / "3", "rollback", {"version": 3, "restored_from": 1}, push, previous=2)
        standin.reload()
    finally:
        standin.close()
    labelled = [s["labels"] for i, s in enumerate(standin.seen) if i == 0 or s != standin.seen[i - 1]]
    assert labelled == [{"stable": 1}, {"stable": 1, "canary": 2}, {"stable": 2}, {"stable": 2, "canary": 3},
                        {"stable": 3}]
    assert standin.refused == 0 and standin.labels == {"stable": 3} == parse(tmp_path)["labels"]



def _timed_out_canary(runs):
    """Version 1 served as stable, then a push whose version 2 never loads: (config, paths, standin)."""
    from components.evaluate import run as evaluate
    from components.push import run as push
    from tests.components.evaluate.fixtures import CLEAN_DAY, FIRST_DAY

    config, paths = runs.make(CLEAN_DAY)
    runs.serve_by_hand(config, 1, "bad", data_date=FIRST_DAY)
    standin = ServingStandIn(config.data.serving_base, load_polls=None).serving_stable(1)
    config = config.with_overrides({"push.serving_url": standin.url, "push.label_wait_s": 0.3})
    assert evaluate(config, paths).blessed
    with pytest.raises(labels.LabelTimeout, match="version 2 is not AVAILABLE"):
        push(config, paths)
    return config, paths, standin


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_canary_that_never_loads_is_not_served_and_a_retried_push_moves_stable_to_it(runs, fast_polls):
    """After a LabelTimeout users of `stable` still get the old version, so the gate's baseline and
    the push's served version stay on it; rerunning the push labels the waiting canary, no new version."""
    from components.push import run as push

    config, paths, standin = _timed_out_canary(runs)
    model_base = paths.model_base
    try:
        assert serving.list_versions(model_base) == [1, 2] and serving.canary_versions(model_base) == {2}
        assert serving.served_version(model_base) == 1
        assert parse(config.data.serving_base)["labels"] == {"stable": 1, "canary": 2}
        standin.load_polls = 1                                     # the server loads it now
        again = push(config, paths)
    finally:
        standin.close()
    assert again.pushed and again.version == 2 and "already served" in again.reason
    assert serving.list_versions(model_base) == [1, 2] and not serving.canary_versions(model_base)
    assert serving.served_version(model_base) == 2 == again.served_version
    assert parse(config.data.serving_base)["labels"] == {"stable": 2}


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_rollback_gives_up_on_a_canary_that_never_loaded(runs, fast_polls):
    from components.push.rollback import rollback

    config, paths, standin = _timed_out_canary(runs)
    try:
        standin.load_polls = 1
        result = rollback(config, "version 2 never loads")
    finally:
        standin.close()
    assert result.version == 3 and serving.read_push_record(paths.model_base / "3")["restored_from"] == 1
    assert serving.served_version(paths.model_base) == 3
    assert parse(config.data.serving_base)["labels"] == {"stable": 3}

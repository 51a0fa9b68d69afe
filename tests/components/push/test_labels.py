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
    """GET /v1/models/<name>/versions/<v>: LOADING for `loading_polls` calls, then AVAILABLE
    (never, if None). Each call records the models.config TF Serving would be reading then."""

    def __init__(self, serving_base, loading_polls: int | None):
        self.serving_base, self.loading_polls, self.seen = serving_base, loading_polls, []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                version = self.path.rstrip("/").split("/")[-1]
                standin.seen.append(parse(standin.serving_base))
                ready = standin.loading_polls is not None and len(standin.seen) > standin.loading_polls
                body = json.dumps({"model_version_status": [{"version": version,
                                                             "state": "AVAILABLE" if ready else "LOADING"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

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
    standin = ServingStandIn(tmp_path, loading_polls=2)
    try:
        labels.publish_labels(tmp_path, "recommender", previous=3, new=4, url=standin.url, timeout_s=10)
    finally:
        standin.close()
    write_1 = {"versions": [3, 4], "labels": {"stable": 3, "canary": 4}, "latest": False}
    assert standin.seen == [write_1] * 3                  # polled while LOADING, stable untouched
    assert parse(tmp_path) == {"versions": [4], "labels": {"stable": 4}, "latest": False}


def test_stable_stays_on_the_old_version_when_the_new_one_never_loads(tmp_path, fast_polls):
    standin = ServingStandIn(tmp_path, loading_polls=None)
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
    standin = ServingStandIn(tmp_path, loading_polls=0)
    push = PushConfig(serving_url=standin.url, label_wait_s=5.0)
    try:
        publish.finish(model_base / "1", "push", {"version": 1}, push)                   # first model: one write
        publish.finish(model_base / "2", "push", {"version": 2}, push, previous=1)
        publish.finish(model_base / "3", "rollback", {"version": 3, "restored_from": 1}, push, previous=2)
    finally:
        standin.close()
    assert [s["labels"] for s in standin.seen] == [{"stable": 1, "canary": 2}, {"stable": 2, "canary": 3}]
    assert parse(tmp_path)["labels"] == {"stable": 3}

"""A loopback stand-in for the Kubernetes API endpoints `KubeCluster` calls (no cluster here).

It speaks the real REST paths and JSON shapes, so the official `kubernetes` client runs unmodified
against it (pointed at it by a kubeconfig). Objects are kept as posted; a Job or TFJob reports
`polls` running statuses, then the configured outcome. With outcome "failed", worker pod 1 is
listed as Failed with its main container exited 1; with "stage_failed", its stage init container
exited 1 and the main container never started. As the real API does, a pod log is served only
for a named container (pods here have two), and the pod list honours the label selector.
"""
from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import yaml

GROUPS = r"^/(?:api/v1|apis/batch/v1|apis/kubeflow\.org/v1)/namespaces/([^/]+)/([a-z]+)"
COLLECTION = re.compile(GROUPS + r"$")
ITEM = re.compile(GROUPS + r"/([^/]+)(/status|/log)?$")
CRASH_LOG = "worker-1 crashed: CUDA error: an illegal memory access was encountered\n"
STAGE_LOG = "StageError: shard train/part-00003 copied 0 bytes, manifest says 8912345\n"


class KubeApiStandIn:
    def __init__(self, outcome: str = "succeeded", polls: int = 1, workers: int = 2):
        self.outcome, self.polls, self.workers = outcome, polls, workers
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.calls: list[tuple[str, str]] = []
        self.deleted: list[tuple[str, str]] = []
        self._status_reads = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> KubeApiStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "test",
                                                           "namespace": namespace}}]}))
        return path

    def _status(self, doc: dict) -> dict:
        self._status_reads += 1
        if self._status_reads <= self.polls:
            return {"active": self.workers}
        if self.outcome == "succeeded":
            kind = "Complete" if doc["kind"] == "Job" else "Succeeded"
            return {"succeeded": self.workers, "conditions": [{"type": kind, "status": "True"}]}
        return {"failed": 1, "active": self.workers - 1,
                "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}

    def _pods(self, namespace: str, selector: str) -> dict:
        run = selector.split("=", 1)[1]
        jobs = [name for (plural, _, name) in self.objects if plural in ("jobs", "tfjobs")]
        if run not in jobs:
            return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []}

        def state(code):
            if code is None:
                return {"waiting": {"reason": "PodInitializing"}}
            return {"terminated": {"exitCode": code}}

        codes = {"failed": (0, 1), "stage_failed": (1, None)}.get(self.outcome)     # (stage, main) of pod 1
        items = []
        for i in range(self.workers):
            stage, main = codes if codes and i == 1 else (0, None)
            items.append({"metadata": {"name": f"{run}-{i}", "namespace": namespace, "labels": {"reco/run": run}},
                          "status": {"phase": "Failed" if codes and i == 1 else "Running",
                                     "initContainerStatuses": [{"name": "stage", "state": state(stage), "ready": True,
                                                                "restartCount": 0, "image": "w", "imageID": ""}],
                                     "containerStatuses": [{"name": "worker", "state": state(main), "ready": False,
                                                            "restartCount": 0, "image": "w", "imageID": ""}]}})
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def _log(self, pod: str, container: str | None):
        if container is None:
            return 400, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                         "message": f"a container name must be specified for pod {pod}"}
        failed = {"failed": "worker", "stage_failed": "stage"}.get(self.outcome)
        return 200, (CRASH_LOG if container == "worker" else STAGE_LOG) if pod.endswith("-1") and container == failed \
            else ""

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):       # quiet: the test asserts on `calls`
                pass

            def _send(self, code: int, body) -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                standin.calls.append((method, url.path))
                if method == "POST" and (m := COLLECTION.match(url.path)):
                    doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    if (m.group(2), m.group(1), doc["metadata"]["name"]) in standin.objects:
                        return self._send(409, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                "reason": "AlreadyExists", "code": 409})
                    doc["metadata"]["uid"] = str(uuid.uuid4())
                    standin.objects[(m.group(2), m.group(1), doc["metadata"]["name"])] = doc
                    return self._send(201, doc)
                if method == "GET" and (m := COLLECTION.match(url.path)) and m.group(2) == "pods":
                    return self._send(200, standin._pods(m.group(1), parse_qs(url.query)["labelSelector"][0]))
                m = ITEM.match(url.path)
                if not m:
                    return self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})
                namespace, plural, name, sub = m.groups()
                if method == "GET" and plural == "pods" and sub == "/log":
                    return self._send(*standin._log(name, parse_qs(url.query).get("container", [None])[0]))
                doc = standin.objects.get((plural, namespace, name))
                if doc is None:
                    return self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})
                if method == "DELETE":
                    del standin.objects[(plural, namespace, name)]
                    standin.deleted.append((doc["kind"], name))
                    return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                return self._send(200, {**doc, "status": standin._status(doc)})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_DELETE(self):
                self._route("DELETE")

        return Handler

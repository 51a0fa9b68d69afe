"""Version labels: `canary` on the new version, then `stable` moved to it, in two models.config writes.

On when `push.serving_url` names TF Serving's REST endpoint. Clients that ask for the label
`stable` keep getting the old version until the new one is loaded and answering; a canary
client can ask for `canary` meanwhile. TF Serving assigns a label only to a version it has
loaded (and never moves an existing label to one it has not), so:

1. write 1: serve both versions (specific policy), `stable` -> old, `canary` -> new (no `canary`
   when it still names an older canary, e.g. after a LabelTimeout: an assigned label only moves
   to a loaded version, so that write would be refused whole);
2. wait until the server reports the new version AVAILABLE (GET /v1/models/<name>/versions/<v>);
3. write 2: `stable` -> new, only the new version served (the old one unloads).

A rollback publishes the restored copy as a new version and goes through the same writes, so
`stable` moves back. If the new version never becomes AVAILABLE, write 2 is not made: `stable`
stays on the old version and LabelTimeout says so. Between the writes the new version has a
canary record (pipeline/contracts/serving.py), so the gate and the push keep taking the version
labelled stable as the served one; rerunning the push (the version is already published) makes
write 2 once the server has loaded it.
"""
from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path

from components.push import serving_files
from pipeline import fsutil
from pipeline.contracts import serving

log = logging.getLogger(__name__)
STABLE, CANARY = "stable", "canary"
POLL_S = 1.0


class LabelTimeout(RuntimeError):
    """The new version did not become AVAILABLE on the server in time: `stable` was not moved."""


def version_state(url: str, model_name: str, version: int) -> str | None:
    """TF Serving's state of one version (e.g. "AVAILABLE", "LOADING"), None if unreachable/unknown."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/v1/models/{model_name}/versions/{version}",
                                    timeout=5) as response:
            statuses = json.load(response).get("model_version_status") or []
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return next((s.get("state") for s in statuses if str(s.get("version")) == str(version)), None)


def wait_available(url: str, model_name: str, version: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (state := version_state(url, model_name, version)) != "AVAILABLE":
        if time.monotonic() > deadline:
            raise LabelTimeout(f"{model_name} version {version} is not AVAILABLE on {url} after {timeout_s:.0f} s "
                               f"(last state: {state or 'unreachable'}); label {STABLE!r} was not moved to it")
        time.sleep(POLL_S)


def publish_labels(serving_base: Path, model_name: str, previous: int | None, new: int, url: str,
                   timeout_s: float) -> None:
    """The two writes (one when nothing was served before, or when `new` is already stable),
    starting from the version labelled stable now, else `previous`. The canary record written
    before write 1 is removed by publish.finish once `new` serves."""
    current = serving_files.version_labels(serving_base, model_name)
    previous = current.get(STABLE, previous)
    if previous is not None and previous != new:
        fsutil.write_json_atomic(serving.canary_path(serving_base / model_name, new),
                                 {"version": new, STABLE: previous, "url": url})
        first = {STABLE: previous, CANARY: new}
        if current.get(CANARY, new) != new:
            first.pop(CANARY)       # names an older canary: it may only move to a loaded version
        serving_files.write_models_config(serving_base, model_name, first, also_serve=(new,))
        log.info("%s: labels %s; waiting for v%d to be AVAILABLE on %s", model_name, first, new, url)
        wait_available(url, model_name, new, timeout_s)
    serving_files.write_models_config(serving_base, model_name, {STABLE: new})
    log.info("%s: %s -> v%d", model_name, STABLE, new)

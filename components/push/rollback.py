"""Rollback: serve the previous model again, atomically, with the reason on record.

Mechanism: the previous version's directory is re-published under a NEW, higher version
number (copy to a hidden temp, fsync, rename), not pinned in models.config. Why:
- it works with any model server setup: TF Serving's file-system poller picks up a new
  highest version within seconds, while a changed models.config is only read by a server
  started with --model_config_file_poll_wait_seconds (or after a restart / ReloadConfig);
- the pipeline never pins: "served" stays the highest integer version unless on-call pins
  one by hand in models.config. With such a pin a restored copy would not be served, so a
  rollback refuses and names the pin (edit the pin to the version to serve instead);
- the rolled-back version stays on disk for debugging, and the restored copy carries the
  data date of the model it restores, so the next nightly run replaces it as usual.

Which version is "previous": the highest version below the served one that was not itself
rolled back from, and that is not the same bytes as the served model; so a second
rollback goes one model further back instead of flapping between two versions.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from components.push import publish
from components.push.verify import verify_version
from pipeline.config import Config
from pipeline.contracts import serving
from pipeline.results import PushResult

log = logging.getLogger(__name__)


class RollbackError(RuntimeError):
    """Nothing to roll back to, or the restored version fails verification."""


def rollback(config: Config, reason: str, to_version: int | None = None) -> PushResult:
    if not (reason or "").strip():
        raise RollbackError("a rollback needs a reason (it is recorded)")
    base, name = config.data.serving_base, config.push.model_name
    model_base = base / name
    with publish.writes_to(base, "rolling back"), publish.push_lock(base, name):
        publish.clean_stale(base, name)
        policy = serving.version_policy(base, name)
        if policy is not None and policy.pinned:
            raise RollbackError(f"{base / serving.MODELS_CONFIG} pins {name} to version(s) {list(policy.pinned)} "
                                "by hand: a restored copy would be published but not served; change the pin "
                                "to the version to serve instead, or remove it and roll back")
        publish.require_writable(base, name)
        # The newest published version: the served one, or a canary still waiting for `stable`
        # (rolling back then gives up on the canary).
        served = (serving.list_versions(model_base) or [None])[-1]
        if served is None:
            raise RollbackError(f"no version is served under {model_base}: nothing to roll back")
        target = to_version if to_version is not None else _previous(base, name, served)
        tdir = serving.version_dir(model_base, target)
        if not tdir.is_dir():
            raise RollbackError(f"cannot roll back to version {target}: no such version")
        if target == served or serving.same_model(model_base, target, served):
            # Restoring the served bytes would record them as rolled back, which push then refuses.
            raise RollbackError(f"cannot roll back to version {target}: its model is the served one "
                                f"(version {served})")
        target_record = serving.read_push_record(tdir) or {}
        version = serving.next_version(base, name)
        record = {**target_record, "version": version, "source": "rollback", "restored_from": target,
                  "rolled_back_from": served, "reason": reason, "pushed_at": publish.now_iso(),
                  # what this rollback takes away: push refuses to serve it again (serving.rolled_back_digests)
                  "rolled_back_digest": serving.model_digest(serving.version_dir(model_base, served))}
        # The copy carries the warmup and verification requests; the record is the rollback's.
        tmp = publish.stage(tdir, base, name, version, serving.model_digest(tdir),
                            {serving.PUSH_RECORD: json.dumps(record, indent=2).encode()})
        vdir = publish.publish(tmp, model_base, version)
        record["verification"] = _verify(config, vdir, target_record)
        if record["verification"] and not record["verification"]["ok"]:
            publish.withdraw(vdir, "rollback", record)
            raise RollbackError(f"restored copy of version {target} fails verification, unpublished: "
                                f"{record['verification']['detail']}")
        path, _ = publish.finish(vdir, "rollback", record, config.push, served)
    message = f"rolled back: version {version} restores version {target} (was serving {served}): {reason}"
    log.warning(message)
    return PushResult(pushed=True, reason=message, version=version, version_dir=str(vdir),
                      served_version=version, record_path=str(path))


def _previous(base, name: str, served: int) -> int:
    model_base = base / name
    rolled_back = {r.get("rolled_back_from") for r in serving.read_history(base, name, "rollback").values()}
    for v in reversed(serving.list_versions(model_base)):
        if v < served and v not in rolled_back and not serving.same_model(model_base, v, served):
            return v
    versions, skipped = serving.list_versions(model_base), sorted(rolled_back - {None})
    raise RollbackError(f"no earlier version to roll back to under {model_base} "
                        f"(versions {versions}, rolled back from {skipped})")


def _verify(config: Config, vdir, target_record: dict[str, Any]) -> dict[str, Any] | None:
    """Same check as a push when the restored model carries its requests and answers."""
    requests = vdir / serving.ASSETS_EXTRA / serving.VERIFY_REQUESTS
    expected = target_record.get("expected_by_signature") or target_record.get("expected_predictions")
    if not requests.exists() or not expected:
        log.warning("version %s has no verification requests (pushed by hand?): not verified", vdir.name)
        return None
    return verify_version(vdir, json.loads(requests.read_text()), expected, config.push.verify_tolerance,
                          config.push.verify_timeout_s).to_dict()

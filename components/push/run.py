"""Push: publish a BLESSED model as the next TF Serving version, verify it, keep K versions.

Order of operations, and why:
1. Gate: BLESSED, or force + a reason (recorded). The evaluated model's digest must match the
   model on disk: a verdict is about bytes, not about a path.
2. Read the serving dir before touching it: models.config must parse (else ServingDirError,
   nothing published) and every directory push writes must be writable (else ServingDirError,
   nothing copied). "Served" is what models.config serves: a pin set by hand wins over `latest`.
3. Skip when the served model (or a version published above it: a canary still waiting for
   `stable`, or one published behind a pin) is this very model (an idempotent retry: a canary
   gets its label move again), or when this run's data is older than the served model's (a
   backfill must not replace fresher data by default; `allow_backfill` overrides). A served
   version without a push record (copied in by hand: a hotfix) counts as newer than every
   recorded data date; only `force` replaces it with a run of such a date. Refuse a model that
   a rollback took away (an Airflow retry or "clear task" of that night would otherwise serve it
   again; force overrides).
4. Stage a copy beside the model dir with the warmup requests and the push record (all inside
   one free-space check, removed if any write fails), fsync,
   rename to the next integer version: TF Serving sees all of it or none of it.
5. Verify in a fresh process against the evaluation's predictions; on mismatch unpublish
   (atomically) and fail. Only then write models.config (a pin is kept: the version is then
   published but not served, `pushed` is false and the CLI exits 3), the history record and
   apply retention.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from components.push import publish, serving_files
from components.push.verify import verify_version
from pipeline import fsutil
from pipeline.config import Config
from pipeline.contracts import serving, signature
from pipeline.contracts.evaluation import (
    BY_ID_PROBABILITY,
    CANDIDATE_PROBABILITY,
    METRICS_FILE,
    SAMPLE_FILE,
    read_verdict,
)
from pipeline.paths import RunPaths
from pipeline.results import PushResult

log = logging.getLogger(__name__)



class PushError(RuntimeError):
    """The push could not be completed safely (no evaluation, verification mismatch, ...)."""


def run(config: Config, paths: RunPaths) -> PushResult:
    """Push the run's model if BLESSED (or `push.force` with `push.force_reason`)."""
    force, force_reason, allow_backfill = config.push.force, config.push.force_reason, config.push.allow_backfill
    if force and not (force_reason or "").strip():
        raise PushError("push.force needs a reason in push.force_reason (it is recorded in the push record)")
    evaluation = _load_evaluation(paths)
    blessed, lines = evaluation["verdict"]
    if not blessed and not force:
        return _skip(paths, f"not blessed: {'; '.join(lines) or 'see ' + str(paths.eval_dir)}")
    digest = serving.tree_digest(paths.model_dir)
    if digest != evaluation["metrics"]["candidate_digest"]:
        raise PushError(f"{paths.model_dir} is not the model that was evaluated (digest changed): "
                        "re-run evaluation; --force overrides a verdict, not a mismatch")
    with publish.writes_to(paths.serving_base, f"pushing run {paths.run_id} of {paths.ds}"), \
            publish.push_lock(paths.serving_base, paths.model_name):
        publish.clean_stale(paths.serving_base, paths.model_name)
        policy = serving.version_policy(paths.serving_base, paths.model_name)  # parses: before anything
        publish.require_writable(paths.serving_base, paths.model_name)
        served = serving.served_version(paths.model_base)
        above = [v for v in serving.list_versions(paths.model_base) if served is None or v > served]
        candidates = [v for v in [served, *sorted({*above, *serving.canary_versions(paths.model_base)})]
                      if v is not None]
        records = {v: serving.read_push_record(serving.version_dir(paths.model_base, v)) for v in candidates}
        for version, record in records.items():
            if record and record.get("model_digest") == digest:
                return _already_served(config, paths, version, record)
        taken = serving.rolled_back_digests(paths.serving_base, paths.model_name).get(digest)
        if taken and not force:
            raise serving.RolledBackError(_rolled_back(paths, digest, taken))
        served_record = records.get(served)
        unrecorded = served is not None and served_record is None
        served_date = served_record.get("data_date") if served_record else None
        if unrecorded:          # a hotfix copied in by hand: newer than every recorded data date
            newest = serving.newest_data_date(paths.serving_base, paths.model_name)
            if (newest is None or paths.ds <= newest) and not force:
                return _skip(paths, _unrecorded(paths, served, newest), served)
        elif served_date and paths.ds < served_date and not allow_backfill:
            return _skip(paths, f"backfill: run data date {paths.ds} is older than served version "
                         f"{served}'s data date {served_date}; not replacing fresher data "
                         "(use --allow-backfill / push.allow_backfill to override)", served)
        return _push(config, paths, evaluation, digest, served,
                     {"forced": bool(force and not blessed), "force_reason": force_reason if force else None,
                      "backfill": bool(served_date and paths.ds < served_date),
                      "replaces_unrecorded": served if unrecorded else None,
                      "kept_pin": list(policy.pinned) if policy and policy.pinned else None,
                      "overrides_rollback": taken["version"] if taken else None})


def _unrecorded(paths: RunPaths, served: int, newest: str | None) -> str:
    known = (f"the newest data date on record is {newest}" if newest else
             "no push or rollback record dates anything")
    return (f"served version {served} has no push record ({serving.version_dir(paths.model_base, served)} was "
            f"copied in by hand: a hotfix?); it counts as newer than every recorded push and {known}, so "
            f"run data date {paths.ds} does not replace it; only a forced push does (push.force with "
            "push.force_reason; in the DAG force_push, approved by a second person)")


def _rolled_back(paths: RunPaths, digest: str, taken: dict[str, Any]) -> str:
    where = serving.history_path(paths.serving_base, paths.model_name, "rollback", taken["version"])
    return (f"this model (digest {digest[:12]}) was rolled back by on-call: rollback record version "
            f"{taken['version']} ({where}) took version {taken['rolled_back_from']} away at "
            f"{taken.get('pushed_at')}: {taken.get('reason')!r}; a retry or rerun must not undo that "
            "(push.force with a push.force_reason overrides)")


def _load_evaluation(paths: RunPaths) -> dict[str, Any]:
    verdict = read_verdict(paths.eval_dir)
    if verdict is None or not (paths.eval_dir / SAMPLE_FILE).exists():
        raise PushError(f"no evaluation in {paths.eval_dir}: run the evaluate step first "
                        "(force overrides its verdict, not its absence)")
    return {
        "verdict": verdict,
        "metrics": json.loads((paths.eval_dir / METRICS_FILE).read_text()),
        "sample": json.loads((paths.eval_dir / SAMPLE_FILE).read_text())["examples"],
    }


def _push(config: Config, paths: RunPaths, evaluation: dict[str, Any], digest: str,
          served: int | None, flags: dict[str, Any]) -> PushResult:
    name, base = paths.model_name, paths.serving_base
    examples = evaluation["sample"][: config.push.warmup_requests]
    expected = _expected(examples)
    signatures = {sig: inputs for sig, inputs in serving_files.client_signatures(paths.model_dir).items()
                  if sig in expected}
    bodies = [serving_files.rest_body(examples, inputs, sig) for sig, inputs in signatures.items()]
    version = serving.next_version(base, name)
    record = _push_record(paths, evaluation, digest, version, served, flags) | {
        "expected_predictions": expected[signature.SERVING_DEFAULT], "expected_by_signature": expected}
    warmup = [record for sig, inputs in signatures.items()
              for record in serving_files.warmup_records(examples, name, config.push.warmup_batch_sizes, inputs, sig)]
    extras = {
        serving.PUSH_RECORD: json.dumps(record, indent=2).encode(),
        serving.VERIFY_REQUESTS: json.dumps(bodies).encode(),
        serving.WARMUP_FILE: serving_files.warmup_bytes(warmup),
    }
    tmp = publish.stage(paths.model_dir, base, name, version, digest, extras)
    vdir = publish.publish(tmp, paths.model_base, version)
    log.info("published %s (previously served: %s); verifying in a fresh process", vdir, served)
    check = verify_version(vdir, bodies, expected, config.push.verify_tolerance, config.push.verify_timeout_s)
    record["verification"] = check.to_dict()
    if not check.ok:
        publish.withdraw(vdir, "push", record)
        _write_run_record(paths, {**record, "pushed": False, "unpublished": True})
        raise PushError(f"verification of version {version} failed, unpublished it "
                        f"(version {served} is served again): {check.detail}")
    history, removed = publish.finish(vdir, "push", record, config.push, served)
    tflite = _maybe_tflite(config, paths, evaluation["sample"])
    result = _published(paths, version, f"pushed version {version}: {check.detail}", check.detail)
    _write_run_record(paths, {**record, "pushed": result.pushed, "history_record": str(history),
                              "retention_removed": removed, "tflite": tflite})
    if result.pushed:
        log.info("version %d serves; %s", version, check.detail)
    return result


def _published(paths: RunPaths, version: int, reason: str, detail: str) -> PushResult:
    """The result of a verified, published version: served (`reason`), or (a pin in models.config,
    kept) published but not served, which is no served-model event (`pushed` false; `detail`)."""
    served = serving.served_version(paths.model_base)
    vdir = serving.version_dir(paths.model_base, version)
    if served != version:
        policy = serving.version_policy(paths.serving_base, paths.model_name)
        pins = list(policy.pinned) if policy else []
        reason = (f"version {version} is published but not served: {paths.serving_base / serving.MODELS_CONFIG} "
                  f"pins version(s) {pins} (kept; version {served} serves; remove the pin to serve "
                  f"version {version}); {detail}")
    return PushResult(pushed=served == version, reason=reason, version=version, version_dir=str(vdir),
                      served_version=served, record_path=str(paths.push_dir / serving.PUSH_RECORD))


def _expected(examples: list[dict[str, Any]]) -> dict[str, list[float]]:
    """What each client signature must answer for the sample, as evaluate scored it. By id only
    when evaluate could score every sample row by id: a warmup request TF Serving cannot answer
    would fail the model's load."""
    expected = {signature.SERVING_DEFAULT: [e[CANDIDATE_PROBABILITY] for e in examples]}
    if examples and all(BY_ID_PROBABILITY in e for e in examples):
        expected[signature.SERVING_BY_ID] = [e[BY_ID_PROBABILITY] for e in examples]
    return expected


def _push_record(paths: RunPaths, evaluation: dict[str, Any], digest: str, version: int,
                 served: int | None, flags: dict[str, Any]) -> dict[str, Any]:
    """What was pushed, from which run and evaluation, and what the model server must provide."""
    server_flags = serving.export_facts(paths.model_dir)["tf_serving_flags"]
    if server_flags:
        log.info("version %d needs TF Serving started with %s (its model part is XLA-compiled: "
                 "model.serving_xla)", version, " ".join(server_flags))
    metrics = evaluation["metrics"]
    return {
        "version": version, "model_name": paths.model_name, "source": "push", "run_id": paths.run_id,
        "run_date": paths.ds, "data_date": paths.ds, "pushed_at": publish.now_iso(), "model_dir": str(paths.model_dir),
        "model_digest": digest, "previous_version": served, **flags,
        "tf_serving_flags": server_flags,
        "evaluation": {"blessed": evaluation["verdict"][0], "reasons": evaluation["verdict"][1],
                       "candidate_auc": metrics["candidate"]["auc"],
                       "popularity_auc": (metrics.get("popularity") or {}).get("auc"),
                       "baseline_version": metrics["baseline_version"],
                       "metrics_path": str(paths.eval_dir / METRICS_FILE)},
    }


def _already_served(config: Config, paths: RunPaths, served: int, record: dict[str, Any]) -> PushResult:
    """A retry after a push that published (`served`: that version, served or not): verify it if
    that was never recorded, then stop."""
    history = serving.read_history(paths.serving_base, paths.model_name, "push").get(served)
    vdir = serving.version_dir(paths.model_base, served)
    if not (history and history.get("verification", {}).get("ok")):
        bodies = json.loads((vdir / serving.ASSETS_EXTRA / serving.VERIFY_REQUESTS).read_text())
        expected = record.get("expected_by_signature") or record["expected_predictions"]
        check = verify_version(vdir, bodies, expected, config.push.verify_tolerance,
                               config.push.verify_timeout_s)
        if not check.ok:
            serving.unpublish(vdir)
            raise PushError(f"served version {served} (this model) fails verification, unpublished: "
                            f"{check.detail}")
        publish.finish(vdir, "push", {**record, "verification": check.to_dict()}, config.push,
                       record.get("previous_version"))
    result = _published(paths, served, f"this model is already served as version {served} (retry of a "
                        "completed push)", "this model was published before (retry of a completed push)")
    _write_run_record(paths, {**record, "pushed": result.pushed, "note": result.reason})
    return result


def _skip(paths: RunPaths, reason: str, served: int | None = None) -> PushResult:
    served = serving.served_version(paths.model_base) if served is None else served
    log.warning("push skipped: %s", reason)
    _write_run_record(paths, {"pushed": False, "reason": reason, "run_id": paths.run_id,
                              "run_date": paths.ds, "served_version": served, "at": publish.now_iso()})
    return PushResult(pushed=False, reason=reason, served_version=served,
                      record_path=str(paths.push_dir / serving.PUSH_RECORD))


def _maybe_tflite(config: Config, paths: RunPaths, examples: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not config.push.tflite:
        return None
    from components.push.tflite import convert_and_measure

    return convert_and_measure(paths.model_dir, paths.push_dir / "model.tflite", examples, runs=100)


def _write_run_record(paths: RunPaths, record: dict[str, Any]) -> None:
    fsutil.write_json_atomic(paths.push_dir / serving.PUSH_RECORD, record)

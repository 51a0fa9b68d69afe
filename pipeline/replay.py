"""`python -m pipeline replay`: what would the last N nights have served with this config?

Runs the nightly chain for N consecutive data dates through the same step code the DAG runs
(validate -> preprocess -> stage -> train -> evaluate -> gate -> push; pipeline/orchestration.py),
in its own root, and judges it by what users would have been served: each night records the
candidate's, the served model's and item popularity's AUC on the eval day, the verdict, the
version served after the night, and the AUC of that served model on the *following* day (what
the gate bet on), with the seconds of every step and the bytes written. Other serving policies
are replayed on the same nights from the same candidates (pipeline/replay_policies.py): one
training per night, the rest is scoring. A killed replay continues after its last finished night.

Outputs in the root: replay.json (every night, the policies' summary), replay.md (the table) and
replay.png (each policy's next-day AUC per night).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from pipeline import orchestration as orch
from pipeline import replay_policies as P
from pipeline import run_config
from pipeline.config import Config, ConfigError, load_config
from pipeline.contracts import serving
from pipeline.fsutil import write_json_atomic
from pipeline.paths import RunPaths, parse_date

log = logging.getLogger(__name__)
RUN_ID = "replay"
STEPS = ("validate", "preprocess", "stage", "train", "evaluate")


def replay_config(root: Path, raw_root: Path | None, config_file: str | None, sets: dict) -> Config:
    """The config file (or conf/params.yaml) with the replay's own roots under `root`."""
    roots = {"data.artifact_root": str(root / "artifacts"), "data.staging_root": str(root / "ssd"),
             "data.serving_base": str(root / "serving"), "data.artifact_store": ""}
    if raw_root is not None:
        roots["data.raw_root"] = str(raw_root)
    return load_config(config_file, overrides={**sets, **roots})


def night(config: Config, day: dt.date, policies: P.Replay) -> dict[str, Any]:
    """One night of the chain, then every policy's choice; the night's record."""
    spec = orch.RunSpec(day.isoformat(), RUN_ID, overrides=run_config.flat(config))
    record: dict[str, Any] = {"date": day.isoformat(), "seconds": {}, "verdict": None}
    results: dict[str, dict] = {}
    try:
        for step in STEPS:
            start = time.perf_counter()
            results[step] = getattr(orch, f"run_{step}")(spec)
            record["seconds"][step] = round(time.perf_counter() - start, 2)
        go, reason = orch.gate(spec, results["evaluate"])
        record["verdict"], record["gate"] = ("BLESSED" if results["evaluate"]["blessed"] else "NOT_BLESSED"), reason
        if go:
            start = time.perf_counter()
            results["push"] = orch.run_push(spec)
            record["seconds"]["push"] = round(time.perf_counter() - start, 2)
    except orch.permanent_errors() as err:      # a night the pipeline refuses: nothing trained or served
        record["refused"] = f"{type(err).__name__}: {err}"
        log.warning("night %s refused: %s", day, record["refused"])
    _, paths = spec.load()
    candidate = day.isoformat() if "evaluate" in results else None
    pushed = bool(results.get("push", {}).get("pushed"))
    record.update(_scores(config, paths, policies, candidate, pushed))
    record.update(candidate_auc=_get(results, "evaluate", "candidate_auc"),
                  served_auc=_get(results, "evaluate", "baseline_auc"),
                  popularity_auc=_get(results, "evaluate", "popularity_auc"),
                  pushed=pushed, served_version=_served_version(paths),
                  bytes_written=_bytes(paths.run_dir) + _bytes(paths.staged_dir))
    return record


def _scores(config: Config, paths: RunPaths, policies: P.Replay, candidate: str | None, pushed: bool) -> dict:
    """Every model a policy serves (and tonight's candidate) on tonight's eval day; the policies move on."""
    compare_module = importlib.import_module("components.evaluate.compare")   # at run time, as orchestration
    compare, POPULARITY = compare_module.compare, compare_module.POPULARITY

    models = {name: RunPaths.for_run(config, name, RUN_ID).model_dir for name in policies.models_to_score(candidate)}
    try:
        scored = compare(config, paths, models, candidate) if models else {"aucs": {}, "diffs": {}, "rows": 0}
    except Exception as err:                    # noqa: BLE001 - an unscorable day: no policy is judged on it
        log.warning("night %s: models not scored: %s", paths.ds, err)
        scored = {"aucs": {}, "diffs": {}, "rows": 0}
    step = policies.night(paths.ds, candidate, scored["aucs"], scored["diffs"], pushed, scored["aucs"].get(POPULARITY))
    return {"aucs": scored["aucs"], "eval_rows": scored["rows"], **step}


def _serve_as_recorded(config: Config, last: dict[str, Any]) -> None:
    """A night killed after its push left its version serving: the resumed night must be judged
    against what the last finished night left, so that version is re-served (push's rollback)."""
    paths = RunPaths.for_run(config, last["date"], RUN_ID)
    recorded, now = last.get("served_version"), _served_version(paths)
    if recorded is None or now == recorded:
        return
    if now is not None and serving.same_model(paths.model_base, now, recorded):
        return                  # an earlier resume re-served it (a rollback re-publishes under a new number)
    rollback = importlib.import_module("components.push.rollback").rollback
    log.warning("replay: version %s serves, the last finished night left version %s: re-serving it", now, recorded)
    rollback(config, "replay resumed after a killed night", to_version=recorded)


def _get(results: dict, step: str, key: str):
    return results.get(step, {}).get(key)


def _served_version(paths: RunPaths) -> int | None:
    return serving.served_version(paths.model_base)


def _bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file()) if Path(folder).exists() else 0


def run(config: Config, root: Path, start: dt.date, nights: int) -> dict[str, Any]:
    """Replay `nights` data dates from `start` in `root`, continuing after the last finished night."""
    out = root / "replay.json"
    state = json.loads(out.read_text()) if out.exists() else {"nights": []}
    if state.get("config_digest", run_config.digest(config)) != run_config.digest(config):
        raise ConfigError(f"{out} was replayed with another config: use a new --root")
    policies = P.Replay(**state.get("policies", {}))
    done = {n["date"] for n in state["nights"]}
    if state["nights"]:
        _serve_as_recorded(config, state["nights"][-1])
    for k in range(nights):
        day = start + dt.timedelta(days=k)
        if day.isoformat() in done:
            continue
        began = time.perf_counter()
        state["nights"].append(night(config, day, policies))
        state.update(config_digest=run_config.digest(config), policies=dataclasses.asdict(policies),
                     summary=P.summary(state["nights"]))
        write_json_atomic(out, state)
        _progress(k + 1, nights, state["nights"][-1], time.perf_counter() - began)
    from pipeline.replay_report import write_outputs

    write_outputs(root, state)
    return state


def _progress(k: int, n: int, record: dict, seconds: float) -> None:
    f = lambda x: "-" if x is None else f"{x:.4f}"      # noqa: E731
    log.info("REPLAY night %d/%d %s: candidate %s, served %s, popularity %s; %s; served version %s; "
             "yesterday's served model today %s (%.0f s)", k, n, record["date"], f(record["candidate_auc"]),
             f(record["served_auc"]), f(record["popularity_auc"]), record.get("refused") or record["verdict"],
             record["served_version"], f(record["next_day"].get("gate")), seconds)


def main(argv: list[str] | None = None) -> int:
    from pipeline.cli import parse_sets, setup_logging

    parser = argparse.ArgumentParser(prog="python -m pipeline replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", required=True, type=parse_date, help="first data date, YYYY-MM-DD")
    parser.add_argument("--nights", required=True, type=int, help="consecutive data dates to replay")
    parser.add_argument("--root", required=True, type=Path, help="the replay's own folder (artifacts, SSD, serving)")
    parser.add_argument("--raw-root", type=Path, help="raw partitions (default: the config's data.raw_root)")
    parser.add_argument("--config", help="params file (default: $RECO_CONFIG or conf/params.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    args = parser.parse_args(argv)
    setup_logging()
    try:
        config = replay_config(args.root.resolve(), args.raw_root, args.config, parse_sets(args.set))
        run(config, args.root.resolve(), args.start, args.nights)
    except ConfigError as err:
        log.error("replay refused: %s", err)
        return 2
    return 0

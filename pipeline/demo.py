"""`make demo`: eight days of generated data, then the real nightly DAG for the last two dates.

Runs real Airflow (`airflow dags test`, SQLite metadata DB and an Airflow home under var/), so
what the demo shows is what the scheduler would do. The second run has the first run's model
as its baseline to beat. Demo state (data, artifacts, SSD staging, serving dir) is reset first
so the demo is repeatable; the Airflow home is kept.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pipeline.config import PROJECT_ROOT, Config, load_config
from pipeline.datagen import generate

log = logging.getLogger("demo")
DAG_ID = "recommender_nightly"
ENV_SCRIPT = PROJECT_ROOT / "scripts" / "airflow_env.sh"


def airflow(command: str, log_file: Path) -> float:
    """Run an airflow CLI command in the project's Airflow env; returns wall seconds."""
    start = time.perf_counter()
    with open(log_file, "w") as out:
        done = subprocess.run(["bash", "-c", f"source {ENV_SCRIPT} && {command}"], stdout=out,
                              stderr=subprocess.STDOUT, cwd=PROJECT_ROOT,
                              env={**os.environ, "RECO_AIRFLOW_IGNORE_STACK": "1"})   # SQLite, whatever ran here
    if done.returncode != 0:
        tail = log_file.read_text().splitlines()[-40:]
        raise RuntimeError(f"`{command}` failed (exit {done.returncode}); last lines of {log_file}:\n"
                           + "\n".join(tail))
    return time.perf_counter() - start


def latest_summary(config: Config, day: dt.date) -> dict:
    runs = sorted((config.data.artifact_root / "runs" / day.isoformat()).glob("*/summary.json"),
                  key=lambda p: p.stat().st_mtime)
    if not runs:
        raise RuntimeError(f"no summary.json for {day}: did the DAG run reach its summary task?")
    return json.loads(runs[-1].read_text())


def task_seconds(config: Config, day: dt.date) -> float:
    """Sum of the task bodies' own durations, as recorded by pipeline.orchestration.timed."""
    total = 0.0
    for timings in (config.data.artifact_root / "runs" / day.isoformat()).glob("*/timings.jsonl"):
        total += sum(json.loads(line)["seconds"] for line in timings.read_text().splitlines() if line)
    return total


def live_airflow_pid(home: Path) -> int | None:
    """The pid of a running `make airflow` on this Airflow home (its script writes the pid file
    and removes it when it stops), else None; a pid file left by a killed script is stale."""
    try:
        pid = int((home / "airflow.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"airflow_standalone" in cmdline else None


def reset_state(config: Config) -> None:
    for path in (config.data.raw_root, config.data.artifact_root, config.data.staging_root,
                 config.data.serving_base):
        if path.is_relative_to(PROJECT_ROOT / "var"):   # never delete outside var/
            shutil.rmtree(path, ignore_errors=True)


def describe(summary: dict) -> str:
    def fmt(v):
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    return "\n".join([
        f"  data date {summary['run_date']}  (run {summary['run_id']})",
        f"    rows: {summary['train_examples']} train, {summary['eval_examples']} eval, "
        f"{summary['rejected_rows']} rejected",
        f"    AUC: candidate {fmt(summary['candidate_auc'])} vs baseline {fmt(summary['baseline_auc'])}"
        f" (served version {summary['baseline_version']}), item popularity {fmt(summary.get('popularity_auc'))}",
        f"    blessing: {'BLESSED' if summary['blessed'] else 'NOT_BLESSED'}; gate: {summary['gate']}",
        f"    push: {'pushed' if summary['pushed'] else 'not pushed'} ({summary['push_reason']})",
        f"    served version now: {summary['served_version']} under {summary['served_path']}",
        f"    report: {summary['report']}",
        f"    TensorBoard: tensorboard --logdir {summary['tensorboard']}",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline demo", description=__doc__)
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--keep-state", action="store_true", help="do not reset var/ demo state")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    config = load_config()
    home = Path(os.environ.get("AIRFLOW_HOME") or PROJECT_ROOT / "var" / "airflow")
    if (pid := live_airflow_pid(home)) is not None:
        log.error("make airflow is running on %s (pid %d): the demo would reset the data, artifacts and "
                  "serving dir under its scheduler and share its metadata DB; stop it (Ctrl-C) first", home, pid)
        return 2
    wall_start = time.perf_counter()
    if not args.keep_state:
        reset_state(config)
    end = dt.date.today() - dt.timedelta(days=1)
    start = end - dt.timedelta(days=args.days - 1)
    g = config.generator
    log.info("generating %d days of data (%s..%s, %d events/day) into %s", args.days, start, end,
             g.events_per_day, config.data.raw_root)
    report = generate(config.data.raw_root, start, args.days, users=g.users, items=g.items,
                      events_per_day=g.events_per_day, ctr=g.ctr, seed=g.seed, regime=g.regime)
    log.info("ceiling AUC of the generated world: %.3f", report.ceiling_auc)
    logs = PROJECT_ROOT / "var" / "demo"
    logs.mkdir(parents=True, exist_ok=True)
    log.info("initialising Airflow home (SQLite, LocalExecutor) in var/airflow")
    airflow("reco_airflow_init", logs / "airflow_init.log")
    summaries, dag_seconds = [], 0.0
    for day in (end - dt.timedelta(days=1), end):
        log.info("running the nightly DAG for data date %s (log: %s)", day, logs / f"dag_{day}.log")
        conf = json.dumps({"run_date": day.isoformat()})   # explicit D, whatever the schedule
        dag_seconds += airflow(f"airflow dags test {DAG_ID} --conf '{conf}'", logs / f"dag_{day}.log")
        summaries.append(latest_summary(config, day))
    wall = time.perf_counter() - wall_start
    tasks = sum(task_seconds(config, dt.date.fromisoformat(s["run_date"])) for s in summaries)
    timing = {"wall_s": wall, "dag_s": dag_seconds, "task_s": tasks,
              "overhead_fraction": (dag_seconds - tasks) / dag_seconds if dag_seconds else 0.0,
              "nights": [{k: s.get(k) for k in ("run_date", "blessed", "candidate_auc", "baseline_auc",
                                                "popularity_auc", "pushed")}
                         for s in summaries]}
    (logs / "timing.json").write_text(json.dumps(timing, indent=2))
    sys.stdout.write("\n=== demo summary ===\n" + "\n".join(describe(s) for s in summaries)
                     + f"\n  wall time {wall:.0f} s (DAG runs {dag_seconds:.0f} s, task bodies {tasks:.0f} s)\n"
                     + "  next: `make airflow` for the UI and its trigger form\n")
    return 0

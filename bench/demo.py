"""`make demo`'s wall time split into task-body time and orchestration overhead, and how often
both of its nights are BLESSED.

Runs the real demo (two `airflow dags test` runs) `--runs` times from a fresh state; task time
is the sum of the step bodies' durations recorded by pipeline.orchestration (timings.jsonl); the
rest of the DAG runs' wall time is Airflow's overhead (process start, parsing, XCom, state
updates). Each run's two nights' verdicts and AUCs come from the demo's own record
(var/demo/timing.json): the second night is judged against the model the first one pushed, so
training noise alone can flip its verdict (the nightly gate's seed luck, docs/benchmarks.md).
Times are medians over the runs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from bench.common import write_result
from pipeline.config import PROJECT_ROOT


def one_run() -> dict:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline", "demo"], check=True, cwd=PROJECT_ROOT)
    wall = time.perf_counter() - start
    timing = json.loads((PROJECT_ROOT / "var" / "demo" / "timing.json").read_text())
    nights = timing["nights"]
    return {"wall_s": wall, "dag_runs_s": timing["dag_s"], "task_s": timing["task_s"],
            "blessed": [bool(n["blessed"]) for n in nights],
            "candidate_auc": [n["candidate_auc"] for n in nights],
            "popularity_auc": [n["popularity_auc"] for n in nights]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.demo")
    parser.add_argument("--runs", type=int, default=1, help="fresh demo runs (both nights each)")
    args = parser.parse_args(argv if argv is not None else [])
    runs: list[dict] = []
    for _ in range(args.runs):          # the result is rewritten after each run: a stopped bench keeps them
        runs.append(one_run())
        figures = summarise(runs)
        write_result("demo", figures)
    return figures


def summarise(runs: list[dict]) -> dict:
    dag, task = (statistics.median(r[k] for r in runs) for k in ("dag_runs_s", "task_s"))
    return {
        "runs": len(runs),
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "dag_runs_s": dag,
        "task_s": task,
        "overhead_fraction": (dag - task) / dag if dag else 0.0,
        "both_nights_blessed": sum(all(r["blessed"]) for r in runs),
        "per_run": runs,
        "target_wall_s": 600,
    }


if __name__ == "__main__":
    main(sys.argv[1:])

"""`make demo`'s wall time split into task-body time and orchestration overhead.

Runs the real demo (two `airflow dags test` runs); task time is the sum of the step bodies'
durations recorded by pipeline.orchestration (timings.jsonl); the rest of the DAG runs' wall
time is Airflow's overhead (process start, parsing, XCom, state updates).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

from bench.common import write_result
from pipeline.config import PROJECT_ROOT


def main() -> dict:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline", "demo"], check=True, cwd=PROJECT_ROOT)
    wall = time.perf_counter() - start
    timing = json.loads((PROJECT_ROOT / "var" / "demo" / "timing.json").read_text())
    figures = {
        "wall_s": wall,
        "dag_runs_s": timing["dag_s"],
        "task_s": timing["task_s"],
        "overhead_fraction": timing["overhead_fraction"],
        "target_wall_s": 600,
    }
    write_result("demo", figures)
    return figures


if __name__ == "__main__":
    main()

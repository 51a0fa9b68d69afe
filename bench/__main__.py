"""`python -m bench [name ...]`: run the benchmarks (all by default), one after another.

Throughput, memory and cost benchmarks live in bench/, the model-selection lab (quality, goal
reach, replays) in bench/lab/; both are run by name here.

`python -m bench report [--check]` regenerates the tables of docs/benchmarks.md instead (bench/report.py).
"""
from __future__ import annotations

import importlib
import logging
import os
import sys

BENCHMARKS = ("generate", "preprocess", "encoder", "scale", "window_cost", "train", "verify", "serving", "quality",
              "goal_reach", "demo")
LAB = ("quality", "goal_reach")          # bench/lab/


def main(argv: list[str]) -> int:
    if argv[:1] == ["report"]:      # not a benchmark: regenerates docs/benchmarks.md from bench/results
        from bench.report import main as report

        return report(argv[1:])
    if {"-h", "--help"} & set(argv):
        sys.stdout.write(f"{__doc__}\nbenchmarks: {', '.join(BENCHMARKS)}\n")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        sys.stderr.write(f"unknown benchmark(s) {unknown}; choose from {BENCHMARKS}\n")
        return 2
    for name in names:
        try:
            module = importlib.import_module(f"bench.lab.{name}" if name in LAB else f"bench.{name}")
        except ModuleNotFoundError as err:
            logging.warning("skipping %s: %s", name, err)
            continue
        module.main()
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # A process that ran a tf.Transform Beam pipeline (quality does) crashes at interpreter exit.
    logging.shutdown()
    sys.stdout.flush()
    os._exit(status)

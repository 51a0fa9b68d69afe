"""The benchmark convention: a flat JSON object of named figures, reference and ratio included."""
from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# bench/lab/goal_reach.py's window sizes (events per day): the demo's, four times it, the large set's.
GOAL_REACH_EVENTS_PER_DAY = (4000, 16_000, 50_000)
log = logging.getLogger("bench")


def write_result(name: str, figures: dict[str, float | int | str]) -> Path:
    """Write bench/results/<name>.json and print the figures as a table."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    record = {**figures, "machine": f"{platform.machine()} {os.cpu_count()} cores", "python": sys.version.split()[0]}
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    width = max(len(k) for k in figures)
    lines = [f"== {name} =="] + [f"  {k.ljust(width)}  {_fmt(v)}" for k, v in figures.items()]
    sys.stdout.write("\n".join(lines) + f"\n  -> {path.relative_to(RESULTS_DIR.parent.parent)}\n")
    return path


def median_time(fn: Callable[[], object], repeats: int = 3) -> float:
    """Median wall seconds of `repeats` calls: these machines are noisy."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class TreeRss:
    """Peak summed RSS of a process (default: this one) and its descendants, sampled every 50 ms."""

    def __init__(self, pid: int | None = None):
        self._proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> int:
        total = 0
        try:
            tree = [self._proc, *self._proc.children(recursive=True)]
        except psutil.Error:         # the watched process has exited
            return 0
        for p in tree:
            try:
                total += p.memory_info().rss
            except psutil.Error:     # a worker may exit between listing and reading
                continue
        return total

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self._sample())

    def __enter__(self) -> TreeRss:
        self.peak = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _fmt(value: object) -> str:
    return f"{value:,.3f}" if isinstance(value, float) else str(value)


def run_then_exit(main: Callable[[list[str]], object], name: str) -> None:
    """`main(sys.argv[1:])`, then os._exit with its status: a process that ran a tf.Transform
    Beam pipeline crashes at interpreter exit, which would turn a finished run into a failure."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    status = 0
    try:
        main(sys.argv[1:])
    except Exception:  # noqa: BLE001 - reported, then the exit below
        logging.getLogger(f"bench.{name}").exception("%s benchmark failed", name)
        status = 1
    logging.shutdown()
    os._exit(status)

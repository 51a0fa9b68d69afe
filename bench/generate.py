"""Generator throughput and peak RSS at 200k events, against the bare Parquet write of the same rows.

Reference: writing the already-generated events with pyarrow (the I/O floor of the same output).
Target: >= 50k events/s.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.common import median_time, write_result

EVENTS = 200_000
_CHILD = """
import datetime as dt, json, resource, sys, time
from pathlib import Path
from pipeline.datagen import generate
t = time.perf_counter()
generate(Path(sys.argv[1]), dt.date(2026, 11, 1), 1, users=20000, items=5000,
         events_per_day={events}, with_ceiling=False)
print(json.dumps({{"seconds": time.perf_counter() - t,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run_once(out: Path) -> dict:
    code = _CHILD.format(events=EVENTS)
    done = subprocess.run([sys.executable, "-c", code, str(out)], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        runs = [run_once(Path(tmp) / f"run{i}") for i in range(3)]
        runs.sort(key=lambda r: r["seconds"])
        median = runs[1]
        events = pq.read_table(Path(tmp) / "run0" / "events")
        write_s = median_time(lambda: pq.write_table(events, Path(tmp) / "rewrite.parquet"))
    # Included: building the world (20k users' taste pools) and the 5k-item snapshot (5k x 2048
    # floats). Not included: the optional ceiling-AUC fit (with_ceiling=False), a report extra.
    figures = {
        "events": EVENTS,
        "events_per_s": EVENTS / median["seconds"],
        "parquet_write_events_per_s": EVENTS / write_s,
        "ratio_to_parquet_write": (EVENTS / median["seconds"]) / (EVENTS / write_s),
        "peak_rss_mib": median["peak_rss_mib"],
        "target_events_per_s": 50_000,
    }
    write_result("generate", figures)
    return figures


if __name__ == "__main__":
    start = time.time()
    main()

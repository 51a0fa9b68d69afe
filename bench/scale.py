"""`python -m bench scale`: how preprocessing's cost and memory grow with one day's size.

`python -m bench.scale [--events 250000 1000000 3000000]`

Per size (events over 3 training days + the eval day, so the largest size is one ~day-sized
preprocess run of 3 M events): generate the raw Parquet, then a fresh child process runs the
real validate -> preprocess (Beam + tf.Transform, shards, manifest, publish) -> stage (verified
copy to the staging dir), each timed after TF/Beam are imported. This process samples the RSS
of the child's whole process tree (runner + any Beam workers) and sizes what the stages wrote.
A child per size, because a Python process does not give its peak memory back: one process
would report the largest size's peak for every later one.

Fitted cost: least squares of wall seconds = fixed + events x per-event cost over the sizes.
The goal is linear scaling (events/s at 3 M within 10 % of 1 M: `rate_3m_to_1m` >= 0.9) and
peak RSS < 2 GiB at every size.
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
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import TreeRss, write_result

log = logging.getLogger("bench.scale")
RUN_DATE = dt.date(2026, 11, 4)
DAYS = 4
SIZES = (250_000, 1_000_000, 3_000_000)
RSS_GOAL_MIB = 2048
BYTES_PER_EVENT = 1_000           # an example's shard bytes, generously (examples by reference): the disk check
GOAL_BYTES_PER_EXAMPLE, GOAL_DISK_BYTES_3M = 600, 4e9
GOAL_EVENTS_PER_S_3M = 3 * 14_400     # 3x the rate with images inside the examples (docs/benchmarks.md)


def _config(root: Path):
    from pipeline.config import load_config

    return load_config(env={}, overrides={
        "data.raw_root": str(root / "raw"), "data.artifact_root": str(root / "artifacts"),
        "data.staging_root": str(root / "ssd")})


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def child(root: Path) -> dict:
    """The measured stages, in this (child) process; returns seconds and rows per stage."""
    import apache_beam  # noqa: F401  - imports are not part of the measured stages
    import psutil
    import tensorflow  # noqa: F401
    import tensorflow_transform  # noqa: F401

    from components import preprocess, stage, validate
    from pipeline.contracts import manifest as M
    from pipeline.paths import RunPaths

    config = _config(root)
    paths = RunPaths.for_run(config, RUN_DATE, "scale")
    seconds, rss, me = {}, {}, psutil.Process()
    for name, step in (("validate", validate.run), ("preprocess", preprocess.run), ("stage", stage.run)):
        before = me.memory_info().rss
        start = time.perf_counter()
        result = step(config, paths)
        seconds[name] = time.perf_counter() - start
        rss[name] = (before, me.memory_info().rss)
        if name == "preprocess":
            events = result.train_examples + result.eval_examples
    manifest = M.read(paths.examples_dir)
    shard_bytes = sum(manifest["splits"][split]["bytes"] for split in M.SPLITS)
    return {"events": events, "seconds": seconds, "rss": rss, "examples_dir": str(paths.examples_dir),
            "bytes_per_example": shard_bytes / max(events, 1),
            "item_table_bytes": sum(t["bytes"] for t in M.item_table_record(manifest)),
            "transform_dir": str(paths.run_dir / "transform"), "staging_root": str(config.data.staging_root)}


def _measure(root: Path, events: int) -> dict:
    """Generate `events` raw events in `root`, run the stages in a child, measure it from here."""
    from pipeline.datagen import generate

    need = 2 * events * BYTES_PER_EVENT
    free = shutil.disk_usage(root).free
    if free < need:
        raise SystemExit(f"bench scale: {events:,} events need ~{need / 2**30:.1f} GiB free in {root}, "
                         f"{free / 2**30:.1f} GiB are")
    start = time.perf_counter()
    generate(root / "raw", RUN_DATE - dt.timedelta(days=DAYS - 1), DAYS, events_per_day=events // DAYS,
             with_ceiling=False)
    log.info("%d events generated in %.0fs", events, time.perf_counter() - start)
    out = root / "child.json"
    cmd = [sys.executable, "-m", "bench.scale", "--child", str(root), "--out", str(out)]
    with subprocess.Popen(cmd) as proc, TreeRss(proc.pid) as rss:
        if proc.wait() != 0:
            raise SystemExit(f"bench scale: the {events:,}-event run failed (exit {proc.returncode})")
    run = json.loads(out.read_text())
    written = {"shards": _tree_bytes(Path(run["examples_dir"])), "transform": _tree_bytes(Path(run["transform_dir"])),
               "staged": _tree_bytes(Path(run["staging_root"]))}
    total = sum(run["seconds"].values())
    return {"size": events, "events": run["events"], "seconds": total, "events_per_s": run["events"] / total,
            "stage_seconds": run["seconds"], "stage_rss": run["rss"], "peak_rss_mib": rss.peak / 2**20,
            "disk_bytes_written": sum(written.values()), "disk_bytes": written,
            "bytes_per_example": run["bytes_per_example"], "item_table_bytes": run["item_table_bytes"]}


def _label(events: int) -> str:
    return f"{events / 1e6:g}m".replace(".", "_")


def figures_of(runs: list[dict]) -> dict:
    events = np.array([r["events"] for r in runs], dtype=float)
    per_event, fixed = np.polyfit(events, np.array([r["seconds"] for r in runs]), 1)
    figures: dict = {}
    for r in runs:
        key = _label(r["size"])
        figures.update({f"events_{key}": r["events"], f"seconds_{key}": round(r["seconds"], 1),
                        f"events_per_s_{key}": round(r["events_per_s"], 1),
                        f"peak_rss_mib_{key}": round(r["peak_rss_mib"], 1),
                        f"disk_mib_written_{key}": round(r["disk_bytes_written"] / 2**20, 1),
                        f"bytes_per_example_{key}": round(r["bytes_per_example"], 1),
                        f"item_table_mib_{key}": round(r["item_table_bytes"] / 2**20, 1)})
        figures.update({f"{stage}_seconds_{key}": round(s, 1) for stage, s in r["stage_seconds"].items()})
        for stage, (before, after) in r["stage_rss"].items():      # the child process's own RSS
            figures.update({f"{stage}_rss_mib_before_{key}": round(before / 2**20, 1),
                            f"{stage}_rss_mib_after_{key}": round(after / 2**20, 1)})
        figures.update({f"{part}_mib_{key}": round(b / 2**20, 1) for part, b in r["disk_bytes"].items()})
    figures["fitted_fixed_seconds"] = round(float(fixed), 1)
    figures["fitted_us_per_event"] = round(float(per_event) * 1e6, 2)
    rate = {r["size"]: r["events_per_s"] for r in runs}
    if {1_000_000, 3_000_000} <= rate.keys():
        figures["rate_3m_to_1m"] = round(rate[3_000_000] / rate[1_000_000], 3)
    figures["peak_rss_mib_max"] = round(max(r["peak_rss_mib"] for r in runs), 1)
    figures["goal"] = (f"rate_3m_to_1m >= 0.9 and peak RSS < {RSS_GOAL_MIB} MiB at every size; "
                       f"<= {GOAL_BYTES_PER_EXAMPLE} bytes per example; <= {GOAL_DISK_BYTES_3M / 1e9:g} GB written "
                       f"and >= {GOAL_EVENTS_PER_S_3M} events/s at 3 M")
    if 3_000_000 in rate:
        big = next(r for r in runs if r["size"] == 3_000_000)
        figures["meets_goal"] = bool(
            figures.get("rate_3m_to_1m", 0) >= 0.9 and figures["peak_rss_mib_max"] < RSS_GOAL_MIB
            and max(r["bytes_per_example"] for r in runs) <= GOAL_BYTES_PER_EXAMPLE
            and big["disk_bytes_written"] <= GOAL_DISK_BYTES_3M and big["events_per_s"] >= GOAL_EVENTS_PER_S_3M)
    figures["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return figures


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=list(SIZES), help="sizes (events over 4 days)")
    parser.add_argument("--name", default="scale", help="result name: bench/results/<name>.json")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv if argv is not None else [])
    if args.child:
        args.out.write_text(json.dumps(child(args.child)))
        return {}
    runs = []
    for events in sorted(args.events):
        root = Path(tempfile.mkdtemp(prefix=f"bench-scale-{_label(events)}-"))
        try:
            runs.append(_measure(root, events))
            log.info("%s", {k: v for k, v in runs[-1].items() if k != "disk_bytes"})
        finally:
            shutil.rmtree(root, ignore_errors=True)
    figures = figures_of(runs)
    write_result(args.name, figures)
    return figures


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1:])
    logging.shutdown()
    sys.stdout.flush()
    os._exit(0)       # the child ran a tf.Transform pipeline: such a process crashes at exit

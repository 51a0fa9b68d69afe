"""Preprocess throughput: end-to-end events/s and peak RSS, next to the raw TFRecord rewrite rate.

`python -m bench.preprocess [--events 200000] [--mode auto|in_memory|multi_processing] [--name N]`

1. Generate `--events` raw events (3 training days + the eval day, 1,000 items) in a temp dir.
2. Time `components.preprocess.run` end to end (input checks, Beam pipeline with tf.Transform
   analysis, shards, manifest, atomic publish), after TF/Beam are imported, while a sampler
   thread records the RSS of the whole process tree (runner + any Beam worker processes).
3. In the same process, rewrite the produced examples: read every shard with tf.data and write
   each record with tf.io.TFRecordWriter. That is the I/O floor for these exact bytes; the
   ratio events_per_s / raw_rewrite_events_per_s is the figure of merit (target >= 0.25).
"""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import TreeRss, write_result

log = logging.getLogger("bench.preprocess")
RUN_DATE = dt.date(2026, 11, 4)


def _records_tf_data(path: Path):
    import tensorflow as tf

    for batch in tf.data.TFRecordDataset(str(path), buffer_size=8 << 20).batch(4096).as_numpy_iterator():
        yield from batch


def _records_iterator(path: Path):
    import tensorflow as tf

    yield from tf.compat.v1.io.tf_record_iterator(str(path))


def raw_rewrite(files: list[Path], out_dir: Path) -> tuple[int, float]:
    """(records, seconds) of the FASTER of two ways to read `files` and rewrite every record with
    tf.io.TFRecordWriter (batched tf.data, or the plain record iterator): the conservative floor."""
    import tensorflow as tf

    out_dir.mkdir(parents=True, exist_ok=True)
    best = None
    for reader in (_records_tf_data, _records_iterator):
        records, start = 0, time.perf_counter()
        for i, path in enumerate(files):
            with tf.io.TFRecordWriter(str(out_dir / f"rewrite-{i:05d}.tfrecord")) as writer:
                for record in reader(path):
                    writer.write(record)
                    records += 1
        seconds = time.perf_counter() - start
        log.info("raw rewrite via %s: %d records in %.2fs", reader.__name__, records, seconds)
        best = min(best or (records, seconds), (records, seconds), key=lambda r: r[1])
    return best


def _small_run(config, root: Path, events: int) -> tuple[int, float]:
    """(events, seconds) of a second, small run: the fixed cost of the pipeline (warm process)."""
    from components.preprocess import run
    from pipeline.datagen import generate
    from pipeline.paths import RunPaths

    small = config.with_overrides({"data.raw_root": str(root / "raw-small")})
    generate(small.data.raw_root, RUN_DATE - dt.timedelta(days=3), 4, events_per_day=events // 4)
    start = time.perf_counter()
    result = run(small, RunPaths.for_run(small, RUN_DATE, "bench-small"))
    return result.train_examples + result.eval_examples, time.perf_counter() - start


def _split_cost(events: int, seconds: float, small: tuple[int, float], raw_per_s: float) -> dict:
    """Fixed seconds and the marginal (per-event) rate, from the big and the small run."""
    small_events, small_seconds = small
    marginal = (events - small_events) / max(seconds - small_seconds, 1e-9)
    fixed = max(seconds - events / marginal, 0.0)
    return {"small_run_events": small_events, "small_run_seconds": round(small_seconds, 2),
            "fixed_seconds_est": round(fixed, 2), "marginal_events_per_s": round(marginal, 1),
            "marginal_ratio_to_raw": round(marginal / raw_per_s, 3)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.preprocess", description=__doc__)
    parser.add_argument("--events", type=int, default=200_000, help="total raw events (4 days)")
    parser.add_argument("--mode", default="auto", help="preprocess.direct_running_mode")
    parser.add_argument("--small-events", type=int, default=20_000,
                        help="a second, small run (after the measured one) to split fixed cost from "
                             "per-event cost; 0 to skip")
    parser.add_argument("--name", default="preprocess", help="result name: bench/results/<name>.json")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args(argv if argv is not None else [])

    import apache_beam  # noqa: F401  - imports are not part of the measured run
    import tensorflow  # noqa: F401
    import tensorflow_transform  # noqa: F401

    from components.preprocess import run
    from pipeline.config import load_config
    from pipeline.contracts.manifest import shard_files
    from pipeline.datagen import generate
    from pipeline.paths import RunPaths

    root = Path(tempfile.mkdtemp(prefix="bench-preprocess-"))
    try:
        config = load_config(overrides={
            "data.raw_root": str(root / "raw"), "data.artifact_root": str(root / "artifacts"),
            "data.staging_root": str(root / "ssd"), "preprocess.direct_running_mode": args.mode,
        }, env={})
        per_day = args.events // 4
        start = time.perf_counter()
        generate(config.data.raw_root, RUN_DATE - dt.timedelta(days=3), 4, events_per_day=per_day)
        log.info("generated %d events in %.1fs", per_day * 4, time.perf_counter() - start)

        paths = RunPaths.for_run(config, RUN_DATE, "bench")
        with TreeRss() as rss:
            start = time.perf_counter()
            result = run(config, paths)
            seconds = time.perf_counter() - start
        events = result.train_examples + result.eval_examples
        small = _small_run(config, root, args.small_events) if args.small_events else None
        files = shard_files(paths.examples_dir, "train") + shard_files(paths.examples_dir, "eval")
        rewritten, raw_seconds = raw_rewrite(files, root / "rewrite")
        assert rewritten == events, (rewritten, events)
        events_per_s, raw_per_s = events / seconds, rewritten / raw_seconds
        from components.preprocess.run import running_mode

        figures = {
            "events": events,
            "seconds": round(seconds, 2),
            "events_per_s": round(events_per_s, 1),
            "raw_rewrite_seconds": round(raw_seconds, 2),
            "raw_rewrite_events_per_s": round(raw_per_s, 1),
            "ratio_to_raw": round(events_per_s / raw_per_s, 3),
            "target_ratio": 0.25,
            "peak_rss_mib": round(rss.peak / 2**20, 1),
            "output_mib": round(sum(f.stat().st_size for f in files) / 2**20, 1),
            "running_mode": running_mode(config, events),
            **(_split_cost(events, seconds, small, raw_per_s) if small else {}),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }
        write_result(args.name, figures)
        return figures
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1:])

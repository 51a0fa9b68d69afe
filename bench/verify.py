"""What checking the staged copy costs a night: train verifies every staged file against the
staged manifest's sha256 before any worker starts (components/train/run.py), so a flipped bit on
the SSD is never trained on. Reference, measured in the same run on the same files: the wall
time of a 2-worker gang training bench train's data (its reference sizes, 2 epochs).
Goal (#42): verification <= 5 % of the night's train time. Figures in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger("bench.verify")


def staged_manifest(data: Path) -> None:
    """The `staged` records stage writes (name, bytes, sha256) for every file under `data`."""
    from pipeline.contracts import manifest as M
    from pipeline.fsutil import sha256_file, write_json_atomic

    files = sorted(p for p in data.rglob("*") if p.is_file())
    write_json_atomic(data / M.MANIFEST, {"format": M.FORMAT, "staged": [
        {"name": str(p.relative_to(data)), "bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in files]})


def main(argv: list[str] | None = None) -> dict:
    from bench.common import write_result
    from bench.train import EPOCHS, EXAMPLES, SHARDS, train_throughput, write_shards
    from pipeline.config import ModelConfig
    from pipeline.contracts import staged

    parser = argparse.ArgumentParser(prog="python -m bench.verify", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="verifications timed (median)")
    args = parser.parse_args(argv if argv is not None else [])
    root = Path(tempfile.mkdtemp(prefix="bench-verify-"))
    load_before = os.getloadavg()[0]
    try:
        data = root / "shards"
        write_shards(data, ModelConfig(), EXAMPLES, SHARDS)
        start = time.perf_counter()
        rate = train_throughput(root, data, workers=2, threads=1, pin=True)["examples_per_s"]
        train_s = time.perf_counter() - start
        staged_manifest(data)              # after training: the gang read the shards by listing
        size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            assert staged.problems(data) == []
            times.append(time.perf_counter() - start)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    verify_s = statistics.median(times)
    figures = {
        "staged_mib": round(size / 2**20, 1),
        "verify_s": round(verify_s, 3),
        "verify_mib_per_s": round(size / 2**20 / verify_s, 1),
        "train_wall_s": round(train_s, 1),
        "train_examples_per_s": round(rate, 1),
        "train_examples": EXAMPLES * EPOCHS,
        "verify_to_train_ratio": round(verify_s / train_s, 4),
        "repeats": args.repeats,
        "goal_verify_to_train_ratio": 0.05,
        "loadavg_before": round(load_before, 2),      # other work on the 2 cores slows the gang: a lower ratio
        "loadavg_after": round(os.getloadavg()[0], 2),
    }
    write_result("verify", figures)
    return figures


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1:])

"""`run(config, paths)`: start the gang (local processes or Kubernetes), return the chief's result."""
from __future__ import annotations

import json
import logging
from pathlib import Path

from pipeline.config import Config
from pipeline.fsutil import disk_full_named, write_json_atomic
from pipeline.paths import RunPaths
from pipeline.results import TrainResult

log = logging.getLogger(__name__)


def run(config: Config, paths: RunPaths, data_dir: Path | None = None) -> TrainResult:
    """Train on the staged shards of `paths` and export the model; raise if any worker fails."""
    paths.train_dir.mkdir(parents=True, exist_ok=True)
    config_json = paths.train_dir / "config.json"
    write_json_atomic(config_json, config.to_dict())
    result_path = paths.train_dir / "result.json"
    result_path.unlink(missing_ok=True)
    if config.execution.backend == "kubernetes":
        from components.train.k8s.submit import submit_and_wait
        submit_and_wait(config, paths, config_json)
    else:
        from components.train.gang.local import run_gang
        # A worker that hits a full disk exits with ENOSPC in its log tail: said as a full disk.
        with disk_full_named(paths.train_dir, f"training run {paths.run_id} (checkpoints, backups, export)"):
            run_gang(config, paths, config_json, data_dir)
    if not result_path.exists():
        raise RuntimeError(f"training finished but the chief wrote no {result_path}")
    result = TrainResult.from_dict(json.loads(result_path.read_text()))
    log.info("trained %d epoch(s) (resumed at %d) on %d worker(s): %.0f examples/s, %s",
             result.epochs, result.initial_epoch, result.workers, result.examples_per_s,
             {k: round(v, 4) for k, v in result.metrics.items()})
    return result

"""`run(config, paths)`: start the gang (local processes or Kubernetes), return the chief's result."""
from __future__ import annotations

import json
import logging
from pathlib import Path

from pipeline.config import Config
from pipeline.contracts import manifest as M
from pipeline.contracts import staged
from pipeline.fsutil import disk_full_named, write_json_atomic
from pipeline.paths import RunPaths
from pipeline.results import TrainResult

log = logging.getLogger(__name__)


def verified_staged_dir(paths: RunPaths, data_dir: Path | None) -> Path:
    """The staged copy training will read, checked against its manifest's sizes and sha256 first:
    a bit flipped on the SSD is found here, not trained on and exported (or buried in a worker's
    DataLossError, which every retry re-read). A `data_dir` that was not staged is read as is."""
    folder = Path(data_dir or paths.staged_dir)
    if data_dir is not None and "staged" not in _manifest(folder):
        return folder
    if not folder.is_dir():
        raise staged.StagedDataError(f"no staged copy of run {paths.run_id} at {folder}; {_restage(paths)}")
    found = staged.problems(folder) if (folder / M.MANIFEST).is_file() else []   # a bare listing: as is
    if found:
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        raise staged.StagedDataError(f"staged copy {folder} fails verification: {found[0]}{more}; {_restage(paths)}")
    return folder


def _manifest(folder: Path) -> dict:
    try:
        return M.read(folder)
    except FileNotFoundError:
        return {}


def _restage(paths: RunPaths) -> str:
    return (f"the DAG's train re-stages it; by hand: python -m components.stage --date {paths.ds} "
            f"--run-id {paths.run_id}")


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
        data_dir = verified_staged_dir(paths, data_dir)
        # A worker that hits a full disk exits with ENOSPC in its log tail: said as a full disk.
        with disk_full_named(paths.train_dir, f"training run {paths.run_id} (checkpoints, backups, export)"):
            run_gang(config, paths, config_json, data_dir)
        staged.unpin(data_dir)          # trained: retention may take the copy now
    if not result_path.exists():
        raise RuntimeError(f"training finished but the chief wrote no {result_path}")
    result = TrainResult.from_dict(json.loads(result_path.read_text()))
    log.info("trained %d epoch(s) (resumed at %d) on %d worker(s): %.0f examples/s, %s",
             result.epochs, result.initial_epoch, result.workers, result.examples_per_s,
             {k: round(v, 4) for k, v in result.metrics.items()})
    return result

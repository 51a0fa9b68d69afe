"""`run(config, paths)`: start the gang (local processes or Kubernetes), return the chief's result."""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from components.train.worker_spec import WORKER_MODULE, gpu_env, ready_file, tf_config, worker_args, worker_env
from pipeline.config import PROJECT_ROOT, Config
from pipeline.fsutil import write_json_atomic
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
    if config.train.backend == "kubernetes":
        from components.train import kubernetes
        kubernetes.submit_and_wait(config, paths, config_json)
    else:
        _run_local(config, paths, config_json, data_dir)
    if not result_path.exists():
        raise RuntimeError(f"training finished but the chief wrote no {result_path}")
    result = TrainResult.from_dict(json.loads(result_path.read_text()))
    log.info("trained %d epoch(s) (resumed at %d) on %d worker(s): %.0f examples/s, %s",
             result.epochs, result.initial_epoch, result.workers, result.examples_per_s,
             {k: round(v, 4) for k, v in result.metrics.items()})
    return result


def _run_local(config: Config, paths: RunPaths, config_json: Path, data_dir: Path | None):
    from components.train.launcher import Gang, GangSpec, cpu_sets, free_ports

    n = config.train.workers
    hosts = [f"localhost:{p}" for p in free_ports(n)]
    cores = len(os.sched_getaffinity(0))
    threads = config.train.threads_per_worker or max(1, cores // n)
    ready = [ready_file(paths, i) for i in range(n)]
    base = worker_env()
    spec = GangSpec(
        commands=[[sys.executable, "-m", WORKER_MODULE,
                   *worker_args(config_json, paths, data_dir, ready[i], threads)] for i in range(n)],
        envs=[{**base, "TF_CONFIG": tf_config(hosts, i), **gpu_env(config, i)} for i in range(n)],
        logs_dir=paths.logs_dir, ready_files=ready,
        startup_timeout_s=config.train.startup_timeout_s, timeout_s=config.train.timeout_s,
        kill_grace_s=config.train.kill_grace_s, progress_timeout_s=config.train.progress_timeout_s,
        cpus=cpu_sets(n) if config.train.pin_cpus else (), cwd=PROJECT_ROOT)
    log.info("launching %d worker(s) on %s, %d intra-op thread(s) each", n, hosts, threads)
    started = time.monotonic()
    Gang(spec).run()
    log.info("gang finished in %.1f s", time.monotonic() - started)

"""Training stage: the multimodal CTR model trained by a MultiWorkerMirroredStrategy gang.

`run(config, paths)` is the one entry point (DAG task, CLI and tests): it starts
`config.train.workers` worker processes on this host (backend "local") or renders and
submits the Kubernetes manifests (backend "kubernetes"), and returns the chief's TrainResult.
TensorFlow is imported only inside the worker processes, never here.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from pipeline.config import PROJECT_ROOT, Config
from pipeline.fsutil import write_json_atomic
from pipeline.paths import RunPaths
from pipeline.results import TrainResult

log = logging.getLogger(__name__)

WORKER_MODULE = "components.train.worker"


WORKER_ENV = {"TF_USE_LEGACY_KERAS": "1",   # Keras 3 fit fails under MWMS: tf_keras
              "PYTHONUNBUFFERED": "1"}
WORKER_ENV_DEFAULTS = {"TF_CPP_MIN_LOG_LEVEL": "2"}   # an operator's own value wins


def worker_env(base: dict | None = None) -> dict:
    """The environment every local worker gets (TF_CONFIG is added per worker)."""
    env = {**WORKER_ENV_DEFAULTS, **(os.environ if base is None else base), **WORKER_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    return env


def tf_config(hosts: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}})


def _gpu_env(config: Config, index: int) -> dict:
    """Several workers on one GPU host: worker i sees only its own GPUs (MWMS would otherwise
    make every worker use every GPU). gpus_per_worker=0 leaves visibility alone."""
    g = config.train.gpus_per_worker
    if not g:
        return {}
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in range(index * g, (index + 1) * g))}


def worker_args(config_json: Path, paths: RunPaths, data_dir: Path | None = None,
                ready_file: Path | None = None, threads: int = 0) -> list[str]:
    args = ["--config-json", str(config_json), "--date", paths.ds, "--run-id", paths.run_id]
    if data_dir:
        args += ["--data-dir", str(data_dir)]
    if ready_file:
        args += ["--ready-file", str(ready_file)]
    if threads:
        args += ["--threads", str(threads)]
    return args


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
    ready = [paths.logs_dir / f"worker-{i}.ready" for i in range(n)]
    base = worker_env()
    spec = GangSpec(
        commands=[[sys.executable, "-m", WORKER_MODULE,
                   *worker_args(config_json, paths, data_dir, ready[i], threads)] for i in range(n)],
        envs=[{**base, "TF_CONFIG": tf_config(hosts, i), **_gpu_env(config, i)} for i in range(n)],
        logs_dir=paths.logs_dir, ready_files=ready,
        startup_timeout_s=config.train.startup_timeout_s, timeout_s=config.train.timeout_s,
        kill_grace_s=config.train.kill_grace_s,
        cpus=cpu_sets(n) if config.train.pin_cpus else (), cwd=PROJECT_ROOT)
    log.info("launching %d worker(s) on %s, %d intra-op thread(s) each", n, hosts, threads)
    started = time.monotonic()
    Gang(spec).run()
    log.info("gang finished in %.1f s", time.monotonic() - started)

"""What every training worker is given, locally or in a pod: module, env, TF_CONFIG, arguments.

One definition for the local launcher and the Kubernetes manifests, so a worker started either
way runs the same command with the same environment.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.config import PROJECT_ROOT, Config
from pipeline.paths import RunPaths

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


def gpu_env(config: Config, index: int) -> dict:
    """Several workers on one GPU host: worker i sees only its own GPUs (MWMS would otherwise
    make every worker use every GPU). gpus_per_worker=0 leaves visibility alone."""
    g = config.train.gpus_per_worker
    if not g:
        return {}
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in range(index * g, (index + 1) * g))}


def ready_file(paths: RunPaths, index: int | str) -> Path:
    """Worker `index`'s heartbeat file (heartbeat.py), on the artifact store both launchers read.
    On Kubernetes the index is `$(RECO_WORKER_INDEX)`, which the kubelet expands in the args."""
    return paths.logs_dir / f"worker-{index}.ready"


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

"""The local backend: every training worker as a process on this host, supervised as one gang."""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from components.train.gang.lab import lab_options
from components.train.gang.launcher import Gang, GangSpec, cpu_sets, free_ports
from components.train.gang.worker_spec import WORKER_MODULE, gpu_env, ready_file, tf_config, worker_args, worker_env
from pipeline.config import PROJECT_ROOT, Config
from pipeline.paths import RunPaths

log = logging.getLogger(__name__)


def run_gang(config: Config, paths: RunPaths, config_json: Path, data_dir: Path | None) -> None:
    """Start `train.workers` worker processes here, one core set each, and supervise them to the end."""
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
        cpus=cpu_sets(n) if lab_options().pin_cpus else (), cwd=PROJECT_ROOT)
    log.info("launching %d worker(s) on %s, %d intra-op thread(s) each", n, hosts, threads)
    started = time.monotonic()
    Gang(spec).run()
    log.info("gang finished in %.1f s", time.monotonic() - started)

"""Beam's portable stack on this host, for the integration tier: the local job service (Job API:
Prepare / Run / GetStateStream; it runs the job on Beam's portable runner core) and a worker
pool (the EXTERNAL environment: it starts each SDK worker as its own process).

Both are processes of their own on free ports, each the leader of a new process group, stopped
by that group at the end (SIGTERM, then SIGKILL), so the SDK workers the pool forked go with it.
The clients connect on 127.0.0.1; the job service binds `localhost` on a port it picks and
writes to a file, the pool binds a free port found here on every interface (worker_pool_main
has neither a bind-address flag nor a port file).

The pool starts its workers with the first `python` on its PATH, not with its own interpreter:
`python_dir` goes first on the pool's PATH (default: this venv's bin).
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import PROJECT_ROOT

VENV_BIN = Path(sys.executable).parent
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class PortableStack:
    job_endpoint: str
    pool_endpoint: str
    job_log: Path
    pool_log: Path

    @property
    def beam_args(self) -> list[str]:
        """What `preprocess.beam_args` holds to run on this stack (docs/preprocess.md)."""
        return [f"--job_endpoint={self.job_endpoint}", "--environment_type=EXTERNAL",
                f"--environment_config={self.pool_endpoint}"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, path: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECO__")}
    env.update(PATH=path, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", *args], env=env, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_listening(proc: subprocess.Popen, port: int, log: Path, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited {proc.returncode} before listening:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{proc.args} not listening on {port} after {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _wait_port_file(proc: subprocess.Popen, port_file: Path, log: Path, timeout: float = START_TIMEOUT_S) -> int:
    deadline = time.monotonic() + timeout
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args} wrote no port file (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return int(port_file.read_text())


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Stop the process's whole group (it leads one): SIGTERM, then SIGKILL after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):      # forked SDK workers left behind by a quick leader exit
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def portable_stack(workdir: Path, python_dir: Path | str = VENV_BIN, job_service: bool = True):
    """Start the job service (unless `job_service=False`) and a worker pool; yield a PortableStack."""
    workdir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []
    try:
        job_port, pool_port = 0, free_port()
        job_log, pool_log = workdir / "job_service.log", workdir / "worker_pool.log"
        if job_service:                    # it binds a port of its own choice and writes it to a file
            port_file = workdir / "job_service.port"
            procs.append(_start(["apache_beam.runners.portability.local_job_service_main", "--port", "0",
                                 "--port_file", str(port_file)], job_log, os.environ.get("PATH", "")))
            job_port = _wait_port_file(procs[-1], port_file, job_log)
            _wait_listening(procs[-1], job_port, job_log)
        pool_path = os.pathsep.join([str(python_dir), os.environ.get("PATH", "")])
        procs.append(_start(["apache_beam.runners.worker.worker_pool_main", "--service_port", str(pool_port)],
                            pool_log, pool_path))
        _wait_listening(procs[-1], pool_port, pool_log)
        yield PortableStack(f"127.0.0.1:{job_port}", f"127.0.0.1:{pool_port}", job_log, pool_log)
    finally:
        for proc in reversed(procs):
            stop(proc)

"""Gang launcher: N local worker processes that all run, or none do.

A MultiWorkerMirroredStrategy gang has no fault tolerance of its own: a dead worker leaves
its peers blocked in a collective forever, and a worker whose peer never starts waits
forever at start-up. So the launcher owns the gang's life:

- start: each worker gets TF_CONFIG with free localhost ports; workers stay in the caller's
  process group (no setsid), so an orchestrator killing the task's group reaches them, and
  each asks the kernel (PR_SET_PDEATHSIG) to SIGKILL it if the launcher dies, even by SIGKILL;
- isolate: the workers share one private network namespace with only a loopback (netns.py),
  joined between fork and exec, so TF's gRPC servers, which bind every interface, are reachable
  from the gang only; where the host allows no namespace, one warning and the host's network;
- supervise: a poll loop with short sleeps (Airflow's execution_timeout arrives as SIGALRM,
  which Python only handles between bytecodes of the main thread), streaming each worker's
  log file with a `[worker-i]` prefix;
- fail fast: the first worker to exit non-zero, a start-up deadline for a gang that never
  forms, a progress deadline for a gang that stopped moving (heartbeat.py), an overall
  timeout, or SIGTERM to the launcher stop every worker: SIGTERM, then SIGKILL after
  `kill_grace_s` (TF workers catch SIGTERM for preemption and keep running). The error of a
  worker that exited non-zero carries the exception its log ends with (`failure_reason`), so
  the one line on-call reads (RECO FAILED) says why, not only that it exited 1.
"""
from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from components.train.gang import heartbeat, netns

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
POLL_S = 0.2
TAIL_LINES = 30
REASON_SCAN_BYTES = 1 << 20      # the end of a worker's log this attempt, where its exception is
REASON_MAX_CHARS = 400


class GangError(RuntimeError):
    """The gang failed; names the worker, its exit code, the exception it died of (`reason`,
    on the first line) and the tail of its log."""

    def __init__(self, message: str, worker: int | None = None,
                 exit_code: int | None = None, log_tail: str = "", reason: str = ""):
        super().__init__(message + (f"\n--- tail of worker-{worker} log ---\n{log_tail}"
                                    if log_tail else ""))
        self.worker, self.exit_code, self.log_tail, self.reason = worker, exit_code, log_tail, reason


class GangStartupTimeout(GangError):
    """Some workers did not join the gang before the start-up deadline."""


class GangStalled(GangError):
    """The gang stopped making progress (a frozen or hung worker) before the progress deadline."""


class GangTimeout(GangError):
    """The whole run exceeded its overall timeout."""


class LauncherTerminated(GangError):
    """The launcher itself received a termination signal."""


def free_ports(n: int) -> list[int]:
    """n distinct free localhost ports (all held open until all are chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("localhost", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# An exception line: a (dotted) class name, alone or followed by ": message" (not a log level's
# "WARNING: …", which native code may write between a traceback's lines).
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)(?:: (.*))?$")
# Without a traceback header in sight (a pod's log tail): only names that say they are errors.
_ERROR_NAME = re.compile(r"(Error|Exception|Exit|Interrupt|Failure)$")


def failure_reason(log_text: str) -> str:
    """What a worker died of, from its log: the exception line of its last traceback, the
    class without its module path and the first line of its message (`FileNotFoundError: no
    shard directory …`, `DataLossError: corrupted record at 12`, `OSError: [Errno 28] No space
    left on device`). Without a traceback header (cut off a log tail), the last line shaped
    `SomeError: message`. "" when the log shows none (a kill, a native crash)."""
    lines = log_text.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
                default=None)
    candidates = lines[start + 1:] if start is not None else reversed(lines)
    for line in candidates:
        if not line.strip() or line[0].isspace():       # frames, source lines, carets
            continue
        m = _EXCEPTION.match(line.rstrip())
        if m and not m.group(1).isupper() and (start is not None or (m.group(2) and _ERROR_NAME.search(m.group(1)))):
            reason = f"{m.group(1)}: {m.group(2)}" if m.group(2) else m.group(1)
            return reason if len(reason) <= REASON_MAX_CHARS else reason[:REASON_MAX_CHARS - 1] + "…"
    return ""


def cpu_sets(workers: int) -> list[set[int] | None]:
    """Disjoint CPU sets, one per worker (round-robin when there are fewer cores)."""
    cores = sorted(os.sched_getaffinity(0))
    per = max(1, len(cores) // workers)
    return [set(cores[(i * per) % len(cores):(i * per) % len(cores) + per]) for i in range(workers)]


def _child_setup(parent_pid: int, cpus: set[int] | None,
                 network: netns.PrivateNetwork | None = None) -> Callable[[], None]:
    """Runs in the child between fork and exec: join the gang's network, die with the launcher,
    optionally pin CPUs."""
    def setup() -> None:
        if network is not None:     # first: joining a user namespace must precede PDEATHSIG's check
            network.join()
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:      # the launcher died before prctl took effect
            os._exit(1)
        if cpus:
            os.sched_setaffinity(0, cpus)
    return setup


@dataclass
class _Worker:
    index: int
    proc: subprocess.Popen
    log_path: Path
    offset: int
    start: int = 0          # where this attempt's part of the (appended) log begins
    partial: str = ""
    exit_seen_at: float | None = None
    lines: list[str] = field(default_factory=list)


@dataclass
class GangSpec:
    """What to start: one command + env per worker, and the supervision limits."""

    commands: Sequence[Sequence[str]]
    envs: Sequence[dict]
    logs_dir: Path
    ready_files: Sequence[Path]
    startup_timeout_s: float
    timeout_s: float
    kill_grace_s: float
    progress_timeout_s: float = 0.0      # 0: no progress deadline
    cpus: Sequence[set[int] | None] = ()
    cwd: Path | None = None
    private_network: bool = True         # one loopback-only network namespace for the gang (netns.py)


class Gang:
    """Start, supervise and always stop a gang of worker processes (see module doc)."""

    def __init__(self, spec: GangSpec):
        self.spec = spec
        self.workers: list[_Worker] = []
        self.network: netns.PrivateNetwork | None = None

    @property
    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.workers]

    def run(self) -> None:
        """Block until every worker exited 0; raise GangError otherwise. Never leaves workers."""
        previous = _install_signal_handlers()
        try:
            self._start()
            self._supervise()
        finally:
            _ignore_termination(previous)     # a second SIGTERM must not interrupt the cleanup
            self.stop()
            if self.network is not None:      # the namespace ends with its last process
                self.network.close()
            _restore_signal_handlers(previous)

    def _start(self) -> None:
        spec = self.spec
        spec.logs_dir.mkdir(parents=True, exist_ok=True)
        for ready in spec.ready_files:
            Path(ready).unlink(missing_ok=True)
        if spec.private_network:
            self.network = netns.private_network()
            if self.network is not None:
                log.info("workers share a private network namespace (%s, %s): loopback only",
                         self.network.kind, self.network.name)
        for i, (cmd, env) in enumerate(zip(spec.commands, spec.envs)):
            log_path = spec.logs_dir / f"worker-{i}.log"
            with open(log_path, "ab") as f:   # appended: a retry keeps the failed attempt's log
                f.write(f"=== attempt started {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n".encode())
                offset = f.tell()
                cpus = spec.cpus[i] if spec.cpus else None
                proc = subprocess.Popen(list(cmd), env=env, cwd=spec.cwd, stdin=subprocess.DEVNULL,
                                        stdout=f, stderr=subprocess.STDOUT,
                                        preexec_fn=_child_setup(os.getpid(), cpus, self.network))
            self.workers.append(_Worker(i, proc, log_path, offset, start=offset))
            log.info("started worker-%d pid %d (log %s)", i, proc.pid, log_path)

    def _supervise(self) -> None:
        start = time.monotonic()
        formed, watch = False, heartbeat.ProgressWatch(self.spec.progress_timeout_s)
        next_beat_check = 0.0
        while True:
            self._pump_logs()
            now = time.monotonic()
            failed = self._first_failure(now)
            if failed is not None:
                code = failed.proc.returncode
                reason = self._reason(failed)
                raise GangError(f"worker-{failed.index} (pid {failed.proc.pid}) exited with code "
                                f"{code}{_signal_name(code)}{': ' + reason if reason else ''}; "
                                "stopped the rest of the gang", failed.index, code, self._tail(failed), reason)
            if all(w.proc.returncode == 0 for w in self.workers):
                log.info("all %d workers finished in %.1f s", len(self.workers), now - start)
                return
            if formed:
                if now >= next_beat_check:        # heartbeats change once a second: read them as often
                    self._check_progress(watch)
                    next_beat_check = now + heartbeat.READ_EVERY_S
            else:
                formed = all(Path(r).exists() for r in self.spec.ready_files)
                if formed:
                    log.info("gang formed in %.1f s", now - start)
                elif now - start > self.spec.startup_timeout_s:
                    missing = [i for i, r in enumerate(self.spec.ready_files) if not Path(r).exists()]
                    w = self.workers[missing[-1]]
                    raise GangStartupTimeout(
                        f"gang did not form within {self.spec.startup_timeout_s:.0f} s: "
                        f"worker(s) {missing} never joined", w.index, None, self._tail(w))
            if now - start > self.spec.timeout_s:
                raise GangTimeout(f"training exceeded its timeout of {self.spec.timeout_s:.0f} s")
            time.sleep(POLL_S)

    def _check_progress(self, watch: heartbeat.ProgressWatch) -> None:
        """Stop the gang when a running worker froze or the gang stopped stepping (heartbeat.py)."""
        beats = {w.index: heartbeat.read(self.spec.ready_files[w.index]) for w in self.workers
                 if w.proc.returncode is None}
        stalled = watch.check(beats, time.monotonic())
        if stalled is not None:
            index, why = stalled
            w = self.workers[index if index is not None else 0]
            raise GangStalled(f"{why}; stopped the gang", index, None, self._tail(w))

    def _first_failure(self, now: float) -> _Worker | None:
        """The earliest worker seen exiting non-zero (ties: killed by a signal first)."""
        for w in self.workers:
            if w.exit_seen_at is None and w.proc.poll() is not None:
                w.exit_seen_at = now
        failed = [w for w in self.workers if w.proc.returncode not in (None, 0)]
        if not failed:
            return None
        return min(failed, key=lambda w: (w.exit_seen_at, w.proc.returncode >= 0, w.index))

    def _pump_logs(self) -> None:
        for w in self.workers:
            try:
                with open(w.log_path, "rb") as f:
                    f.seek(w.offset)
                    chunk = f.read()
            except OSError:
                continue
            w.offset += len(chunk)
            text = w.partial + chunk.decode("utf-8", errors="replace")
            *complete, w.partial = text.split("\n")
            for line in complete:
                if line.strip():
                    log.info("[worker-%d] %s", w.index, line)
            w.lines = (w.lines + complete)[-TAIL_LINES:]

    def _reason(self, w: _Worker) -> str:
        """The exception this attempt of worker `w` died of, from the end of its log."""
        try:
            with open(w.log_path, "rb") as f:
                f.seek(max(w.start, f.seek(0, os.SEEK_END) - REASON_SCAN_BYTES))
                return failure_reason(f.read().decode("utf-8", errors="replace"))
        except OSError:
            return ""

    def _tail(self, w: _Worker) -> str:
        self._pump_logs()
        return "\n".join(w.lines + ([w.partial] if w.partial else []))

    def stop(self) -> None:
        """SIGTERM every live worker (and its children), SIGKILL what is left after the grace."""
        procs = []
        for w in self.workers:
            if w.proc.poll() is None:
                try:
                    procs += [psutil.Process(w.proc.pid)]
                    procs += psutil.Process(w.proc.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    pass
        for p in procs:
            _signal(p, signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=self.spec.kill_grace_s)
        for p in alive:
            log.warning("pid %d ignored SIGTERM for %.1f s: SIGKILL", p.pid, self.spec.kill_grace_s)
            _signal(p, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=10)
        for w in self.workers:
            w.proc.poll()        # reap, so no zombie outlives the launcher
        if procs:
            self._pump_logs()


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except psutil.NoSuchProcess:
        pass


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f" ({signal.Signals(-code).name})"
        except ValueError:
            return ""
    return ""


def _install_signal_handlers() -> dict:
    """SIGTERM/SIGHUP/SIGINT to the launcher raise LauncherTerminated in the supervision loop,
    whose `finally` stops the gang; a previous handler (e.g. the orchestrator's) is chained.
    SIGINT is handled explicitly: a shell that starts jobs in the background starts them with
    SIGINT ignored, and Ctrl-C must still stop the gang."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        old = signal.getsignal(sig)

        def handler(signum, frame, old=old):
            if callable(old) and old is not signal.default_int_handler:
                old(signum, frame)
            raise LauncherTerminated(f"launcher received {signal.Signals(signum).name}: "
                                     "stopping all workers")
        previous[sig] = old
        signal.signal(sig, handler)
    return previous


def _ignore_termination(previous: dict) -> None:
    for sig in previous:
        signal.signal(sig, signal.SIG_IGN)


def _restore_signal_handlers(previous: dict) -> None:
    for sig, old in previous.items():
        signal.signal(sig, old if old is not None else signal.SIG_DFL)

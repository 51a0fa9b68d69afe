"""Gang semantics of the launcher with stand-in worker processes (no TensorFlow, seconds each).

The stand-ins behave like TF workers where it matters: they ignore SIGTERM (as TF's
preemption notifier does), write their ready file once "the gang is up", print to their log.
The real TF gang is exercised in test_train_e2e.py.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from components.train.gang.launcher import (
    Gang,
    GangError,
    GangSpec,
    GangStartupTimeout,
    GangTimeout,
    cpu_sets,
    free_ports,
)
from pipeline.config import PROJECT_ROOT
from tests.components.train.gang.sockets import namespaces_allowed

pytestmark = pytest.mark.integration

STANDIN = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)      # like TF's preemption notifier
    ready, behaviour = sys.argv[1], sys.argv[2]
    print("hello from", behaviour, flush=True)
    if behaviour != "never-ready":
        open(ready, "w").write("up")
    if behaviour.startswith("exit-"):
        time.sleep(0.5)
        print("about to fail", flush=True)
        sys.exit(int(behaviour.split("-")[1]))
    if behaviour == "ok":
        time.sleep(0.3)
        sys.exit(0)
    if behaviour == "raise":
        time.sleep(0.5)
        raise FileNotFoundError("no shard directory /ssd/run/train (was the stage step run?)")
    time.sleep(600)
""")


def spec_for(tmp_path: Path, behaviours: list[str], **limits) -> GangSpec:
    ready = [tmp_path / f"w{i}.ready" for i in range(len(behaviours))]
    return GangSpec(
        commands=[[sys.executable, "-c", STANDIN, str(r), b] for r, b in zip(ready, behaviours)],
        envs=[dict(os.environ) for _ in behaviours], logs_dir=tmp_path / "logs", ready_files=ready,
        startup_timeout_s=limits.get("startup", 30.0), timeout_s=limits.get("timeout", 60.0),
        kill_grace_s=limits.get("grace", 1.0))


def assert_all_gone(pids: list[int]) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


def test_success_streams_prefixed_logs(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="components.train.gang.launcher")
    gang = Gang(spec_for(tmp_path, ["ok", "ok"]))
    gang.run()
    assert "[worker-1] hello from ok" in caplog.text
    assert (tmp_path / "logs" / "worker-0.log").read_text().count("hello from ok") == 1
    assert_all_gone(gang.pids)


def test_dead_worker_stops_the_gang_fast(tmp_path):
    gang = Gang(spec_for(tmp_path, ["hang", "exit-3", "hang"], grace=1.0))
    start = time.monotonic()
    with pytest.raises(GangError) as err:
        gang.run()
    assert time.monotonic() - start < 10
    assert err.value.worker == 1 and err.value.exit_code == 3
    assert "worker-1" in str(err.value) and "about to fail" in err.value.log_tail
    assert_all_gone(gang.pids)          # the SIGTERM-ignoring peers were SIGKILLed


def test_the_error_names_the_exception_the_worker_died_of(tmp_path):
    """The first line (what the RECO FAILED line shows) carries the worker's own exception."""
    gang = Gang(spec_for(tmp_path, ["hang", "raise"]))
    with pytest.raises(GangError) as err:
        gang.run()
    assert str(err.value).splitlines()[0] == (
        f"worker-1 (pid {gang.pids[1]}) exited with code 1: FileNotFoundError: no shard directory "
        "/ssd/run/train (was the stage step run?); stopped the rest of the gang")
    assert err.value.reason.startswith("FileNotFoundError: no shard directory")
    assert_all_gone(gang.pids)


def test_a_killed_worker_has_no_reason_but_its_signal(tmp_path):
    """A retry appends to the same log: the last attempt's traceback is not this one's reason."""
    with pytest.raises(GangError):
        Gang(spec_for(tmp_path, ["hang", "raise"])).run()
    assert "FileNotFoundError" in (tmp_path / "logs" / "worker-1.log").read_text()
    gang = Gang(spec_for(tmp_path, ["hang", "hang"]))
    killer = threading.Thread(target=_kill_when_ready, args=(tmp_path, gang, 1), daemon=True)
    killer.start()
    with pytest.raises(GangError) as err:
        gang.run()
    assert err.value.exit_code == -signal.SIGKILL and err.value.reason == ""
    assert str(err.value).splitlines()[0].endswith("exited with code -9 (SIGKILL); stopped the rest of the gang")


def _kill_when_ready(tmp_path: Path, gang: Gang, index: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(gang.pids) <= index:    # started: old ready files are gone
        time.sleep(0.05)
    while time.monotonic() < deadline and not (tmp_path / f"w{index}.ready").exists():
        time.sleep(0.05)
    os.kill(gang.pids[index], signal.SIGKILL)


def test_startup_deadline_for_a_peer_that_never_arrives(tmp_path):
    gang = Gang(spec_for(tmp_path, ["hang", "never-ready"], startup=2.0))
    with pytest.raises(GangStartupTimeout, match=r"worker\(s\) \[1\] never joined"):
        gang.run()
    assert_all_gone(gang.pids)


def test_overall_timeout(tmp_path):
    gang = Gang(spec_for(tmp_path, ["hang", "hang"], timeout=1.5))
    with pytest.raises(GangTimeout):
        gang.run()
    assert_all_gone(gang.pids)


def test_logs_of_earlier_attempts_are_kept(tmp_path):
    Gang(spec_for(tmp_path, ["ok", "ok"])).run()
    with pytest.raises(GangError):
        Gang(spec_for(tmp_path, ["exit-2", "ok"])).run()
    text = (tmp_path / "logs" / "worker-0.log").read_text()
    assert text.count("=== attempt started") == 2 and "hello from exit-2" in text


LAUNCHER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tests.components.train.gang.test_launcher import spec_for
    from components.train.gang.launcher import Gang
    gang = Gang(spec_for(Path(sys.argv[1]), ["hang", "hang"], grace=1.0))
    gang.run()
""")


def _start_launcher(tmp_path: Path, sigint_ignored: bool = False) -> tuple[subprocess.Popen, list[int]]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    disposition = signal.SIG_IGN if sigint_ignored else signal.SIG_DFL
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"w{i}.ready").exists() for i in range(2)):
        assert time.monotonic() < deadline and launcher.poll() is None, launcher.stderr.read()
        time.sleep(0.1)
    workers = [p.pid for p in psutil.Process(launcher.pid).children()]
    assert len(workers) == 2
    return launcher, workers


def _wait_gone(pids: list[int], seconds: float) -> None:
    """Assert the pids end within `seconds`; kill leftovers either way so a failure leaks nothing."""
    deadline = time.monotonic() + seconds
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in pids if psutil.pid_exists(p)
                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"workers outlived the launcher: {alive}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_the_launcher_stops_every_worker(tmp_path, sig):
    """SIGTERM (an orchestrator), SIGHUP (a closed terminal), SIGINT (Ctrl-C, even when the
    launcher was started with SIGINT ignored, as background jobs are): the workers, which
    ignore SIGTERM, are stopped all the same."""
    launcher, workers = _start_launcher(tmp_path, sigint_ignored=sig == signal.SIGINT)
    for pid in workers:     # same process group as the launcher: an orchestrator's killpg reaches them
        assert os.getpgid(pid) == os.getpgid(launcher.pid)
        if namespaces_allowed():       # ...and in the gang's own network: no wrapper between them
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    launcher.send_signal(sig)
    assert launcher.wait(timeout=15) != 0
    assert f"LauncherTerminated: launcher received {sig.name}".encode() in launcher.stderr.read()
    _wait_gone(workers, 5)


def test_sigkill_to_launcher_kills_workers_via_pdeathsig(tmp_path):
    launcher, workers = _start_launcher(tmp_path)
    launcher.kill()
    launcher.wait(timeout=5)
    _wait_gone(workers, 5)


def test_ports_and_cpu_sets():
    ports = free_ports(4)
    assert len(set(ports)) == 4
    sets = cpu_sets(2)
    assert len(sets) == 2 and all(sets)
    if len(os.sched_getaffinity(0)) >= 2:
        assert not sets[0] & sets[1]



BEATING = textwrap.dedent("""
    import signal, sys, time
    from components.train.gang.heartbeat import HeartbeatWriter
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    beat, behaviour = HeartbeatWriter(sys.argv[1], every_s=0.2), sys.argv[2]
    stop_at = int(behaviour.split("-")[1]) if behaviour.startswith("blocks-") else None
    for step in range(100_000):
        if step == stop_at:
            time.sleep(600)                 # alive (the heartbeat thread runs), no progress
        beat.step()
        time.sleep(0.02)
""")


def beating_spec(tmp_path: Path, behaviours: list[str], progress_timeout_s: float) -> GangSpec:
    spec = spec_for(tmp_path, behaviours)
    spec.commands = [[sys.executable, "-c", BEATING, str(r), b] for r, b in zip(spec.ready_files, behaviours)]
    spec.envs = [{**os.environ, "PYTHONPATH": str(PROJECT_ROOT)} for _ in behaviours]
    spec.progress_timeout_s = progress_timeout_s
    return spec


def test_a_frozen_worker_is_named_and_the_gang_stopped(tmp_path):
    """SIGSTOP: the process exists but runs nothing, so its heartbeat goes stale."""
    from components.train.gang.launcher import GangStalled

    gang = Gang(beating_spec(tmp_path, ["steps", "steps", "steps"], progress_timeout_s=2.0))

    def freeze_worker_1():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp_path / "w1.ready").exists():
            time.sleep(0.05)
        time.sleep(0.5)
        os.kill(gang.pids[1], signal.SIGSTOP)

    threading.Thread(target=freeze_worker_1, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(GangStalled) as err:
        gang.run()
    assert err.value.worker == 1 and "worker-1 is not running: no heartbeat" in str(err.value)
    assert time.monotonic() - start < 20
    assert_all_gone(gang.pids)          # SIGKILL reaches a stopped process


def test_a_hung_worker_stops_the_gang_at_the_progress_deadline(tmp_path):
    """Worker 0 hangs at step 20, alive; its peer then blocks in the same step's collective, as
    in a synchronous gang. Both still beat, the step counts stop: the gang is stopped, and the
    message says it is stuck rather than blaming an arbitrary worker."""
    from components.train.gang.launcher import GangStalled

    gang = Gang(beating_spec(tmp_path, ["blocks-20", "blocks-20"], progress_timeout_s=2.0))
    start = time.monotonic()
    with pytest.raises(GangStalled) as err:
        gang.run()
    assert err.value.worker is None, str(err.value)
    assert "no training progress for" in str(err.value) and "every worker stopped at step 20" in str(err.value)
    assert 2.0 < time.monotonic() - start < 20
    assert_all_gone(gang.pids)

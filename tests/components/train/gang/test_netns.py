"""The gang's private network (netns.py): its workers reach each other over the loopback, nothing
outside reaches them, they keep their files and their user, and where this host allows no
namespace the gang runs on the host's network after exactly one warning, and only then.

Stand-in workers (no TensorFlow) that do what matters of TF's gRPC server: listen on 0.0.0.0
and talk to a peer through "localhost". The real TF gang: test_real_gang.py.
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from components.train.gang import netns
from components.train.gang.launcher import Gang, GangSpec, free_ports
from tests.components.train.gang.sockets import listening, namespaces_allowed

PEERS = textwrap.dedent("""
    import socket, sys, time
    from pathlib import Path
    ready, role, port, done = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    if role == "server":                        # TF's gRPC server: every interface
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(8)
        conn, _ = s.accept()
        assert conn.recv(4) == b"ping"
        conn.sendall(b"pong")
    else:                                       # its peer, through TF_CONFIG's "localhost"
        deadline = time.monotonic() + 30
        while True:
            try:
                c = socket.create_connection(("localhost", port), timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        c.sendall(b"ping")
        assert c.recv(4) == b"pong"
    open(ready, "w").write("up")                # the shared filesystem, as heartbeats use it
    while not done.exists():
        time.sleep(0.05)
""")


def peers_spec(tmp_path: Path, port: int, private_network: bool = True) -> GangSpec:
    ready = [tmp_path / f"w{i}.ready" for i in range(2)]
    return GangSpec(
        commands=[[sys.executable, "-c", PEERS, str(r), role, str(port), str(tmp_path / "done")]
                  for r, role in zip(ready, ("server", "client"))],
        envs=[dict(os.environ) for _ in ready], logs_dir=tmp_path / "logs", ready_files=ready,
        startup_timeout_s=30.0, timeout_s=60.0, kill_grace_s=1.0, private_network=private_network)


def run_in_background(gang: Gang, tmp_path: Path) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def target():
        try:
            gang.run()
        except BaseException as err:        # noqa: BLE001 - handed to the test
            outcome["error"] = err
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not all(r.exists() for r in gang.spec.ready_files):
        assert time.monotonic() < deadline and thread.is_alive(), outcome
        time.sleep(0.05)
    return thread, outcome


def finish(thread: threading.Thread, outcome: dict, tmp_path: Path) -> None:
    (tmp_path / "done").write_text("")
    thread.join(timeout=30)
    assert not thread.is_alive() and "error" not in outcome, outcome


def own_netns(pid: int | str = "self") -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def test_the_fallback_is_taken_only_where_namespaces_are_unavailable(caplog):
    allowed = namespaces_allowed()
    if allowed is None:
        pytest.skip("util-linux unshare is not installed: no independent check")
    caplog.set_level(logging.WARNING, logger="components.train.gang.netns")
    network = netns.private_network()
    try:
        assert (network is not None) == allowed
        warnings = [r for r in caplog.records if r.name == "components.train.gang.netns"]
        assert len(warnings) == (0 if network is not None else 1), [r.getMessage() for r in warnings]
        if network is not None:
            assert network.name.startswith("net:[") and network.name != own_netns()
            assert network.kind == ("net" if os.geteuid() == 0 else "user+net")
    finally:
        if network is not None:
            network.close()


def test_a_host_that_forbids_namespaces_gets_one_warning_saying_so(monkeypatch, caplog):
    """What a seccomp profile without unshare (Docker's default for non-root) looks like to the helper."""
    monkeypatch.setattr(netns, "HELPER", "import sys; sys.exit('unshare(CLONE_NEWNET): Operation not permitted; "
                                         "unshare(CLONE_NEWUSER|CLONE_NEWNET): Operation not permitted')")
    caplog.set_level(logging.WARNING, logger="components.train.gang.netns")
    assert netns.private_network() is None
    (record,) = [r for r in caplog.records if r.name == "components.train.gang.netns"]
    message = record.getMessage()
    assert "no private network namespace here (unshare(CLONE_NEWNET): Operation not permitted;" in message
    assert "listens unauthenticated on every interface" in message


@pytest.mark.integration
def test_the_gang_reaches_itself_over_its_loopback_and_nothing_outside_reaches_it(tmp_path):
    if not namespaces_allowed():
        pytest.skip("this host allows no network namespace (the fallback is tested below)")
    (port,) = free_ports(1)
    gang = Gang(peers_spec(tmp_path, port))
    thread, outcome = run_in_background(gang, tmp_path)
    try:
        server, client = gang.pids
        assert own_netns(server) == own_netns(client) != own_netns()       # one namespace, not ours
        assert ("0.0.0.0", port) in listening(f"/proc/{server}/net")         # bound to every interface...
        assert port not in {p for _, p in listening("/proc/self/net")}       # ...of a network we are not in
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
        host_ip = _non_loopback_address()
        if host_ip:
            with pytest.raises(OSError):
                socket.create_connection((host_ip, port), timeout=5)
    finally:
        finish(thread, outcome, tmp_path)
    assert gang.network is not None and all(p.returncode == 0 for p in (w.proc for w in gang.workers))


@pytest.mark.integration
def test_where_namespaces_are_unavailable_the_gang_runs_on_the_host_network(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(netns, "HELPER", "import sys; sys.exit('unshare(CLONE_NEWNET): Operation not permitted')")
    caplog.set_level(logging.WARNING, logger="components.train.gang.netns")
    (port,) = free_ports(1)
    gang = Gang(peers_spec(tmp_path, port))
    thread, outcome = run_in_background(gang, tmp_path)
    try:
        assert own_netns(gang.pids[0]) == own_netns(gang.pids[1]) == own_netns()
    finally:
        finish(thread, outcome, tmp_path)
    assert gang.network is None
    assert len([r for r in caplog.records if r.name == "components.train.gang.netns"]) == 1


UNPRIVILEGED = textwrap.dedent("""
    import importlib.util, os, socket, subprocess, sys
    spec = importlib.util.spec_from_file_location("netns", sys.argv[1])
    netns = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(netns)
    network = netns.create()
    server = subprocess.Popen([sys.executable, "-c", sys.argv[2], "server"], preexec_fn=network.join,
                              stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    client = subprocess.run([sys.executable, "-c", sys.argv[2], "client", str(port)], preexec_fn=network.join,
                            capture_output=True, text=True)
    server.wait(timeout=30)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5)
        outside = "reached"
    except OSError as err:
        outside = type(err).__name__
    print(network.kind, os.getuid(), client.stdout.strip(), server.stdout.read().strip(), outside)
""")
PEER = textwrap.dedent("""
    import os, socket, sys
    if sys.argv[1] == "server":
        s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(1)
        print(s.getsockname()[1], flush=True)
        conn, _ = s.accept(); conn.sendall(b"pong")
        print("uid", os.getuid())
    else:
        print(socket.create_connection(("localhost", int(sys.argv[2])), timeout=5).recv(4).decode())
""")


def test_an_unprivileged_user_gets_a_namespace_of_its_own_and_keeps_its_uid():
    """CI runs as root (the CAP_SYS_ADMIN path); the unprivileged path, where user namespaces are
    allowed, is run here as `nobody`. netns.py is loaded by path: it needs nothing but the stdlib."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("run as root with util-linux setpriv: an unprivileged user runs this path in every gang")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i", "PATH=/usr/bin:/bin"]
    python = next((p for p in (os.path.realpath(sys.executable), "/usr/bin/python3")
                   if subprocess.run([*nobody, p, "-c", "pass"], capture_output=True, cwd="/").returncode == 0), None)
    if python is None:
        pytest.skip("no Python that user nobody may run")
    if subprocess.run([*nobody, "unshare", "--user", "--map-root-user", "--net", "true"], capture_output=True,
                      cwd="/").returncode != 0:
        pytest.skip("unprivileged user namespaces are not allowed here")
    done = subprocess.run([*nobody, python, "-c", UNPRIVILEGED, netns.__file__, PEER], capture_output=True,
                          text=True, cwd="/", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["user+net", "65534", "pong", "uid", "65534", "ConnectionRefusedError"]


def _non_loopback_address() -> str | None:
    """This host's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))             # TEST-NET-1: routing only
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address

"""A private network for a local gang: its workers share one network namespace whose only
interface is a loopback, so their gRPC servers are reachable from the gang and nothing else.

Why: TensorFlow's gRPC server (grpc_server_lib.cc, `GrpcServer::Init`) listens on
`"0.0.0.0:" + port` with insecure credentials whatever host TF_CONFIG names; TF has no option
for the bind address (TF 2.21's libtensorflow_cc holds the literal "0.0.0.0:" and only
`TF_GRPC_REUSE_PORT` beside it). Measured with `ss -ltnp` during a 2-worker gang: `*:<port>`
for each worker, an unauthenticated worker service open to the network for the whole run.

How: a short helper process (HELPER) unshares a network namespace and brings its loopback up,
then waits; the launcher opens `/proc/<helper>/ns/net` (a namespace lives as long as a file
descriptor refers to it), lets the helper exit, and each worker joins the namespace with
setns(2) between fork and exec (launcher.py). So the worker is the very process the launcher
started (same pid, signals, exit code): no wrapper such as `nsenter` in between. Files are
untouched (a network namespace changes no mount), so shards, logs, heartbeats, backups and the
export are where they were.

- With CAP_SYS_ADMIN (root, CI) the namespace is a plain network namespace: the workers keep
  their user and capabilities.
- Without it (an unprivileged user), a user namespace that maps only the caller's own uid and
  gid owns the network namespace (`unshare --user --net --map-current-user`): the workers keep
  their uid (files they write are the user's), and gain no privilege outside it.
- Where neither is allowed (a container whose seccomp profile forbids unshare, user
  namespaces disabled) the gang runs on the host's network, with one warning saying so.

Nothing of a worker talks to the network but its peers: the object store (`data.artifact_store`)
is mirrored by the task process around the whole step (pipeline/storage.py), never by workers.
Pure Python (no TensorFlow); Linux only.
"""
from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys

log = logging.getLogger(__name__)

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
HELPER_TIMEOUT_S = 30.0

# Run as `python -I -S -c HELPER`: prints the namespaces it made ("net" or "user+net") once its
# loopback is up, then waits for the launcher to close its stdin. Errors: exit 1 with the reason.
HELPER = r'''
import ctypes, fcntl, os, socket, struct, sys
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP, IFREQ = 0x8913, 0x8914, 0x1, "16sh22x"
libc = ctypes.CDLL(None, use_errno=True)

def unshare(flags):
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))

def write(path, text):
    with open(path, "w") as f:
        f.write(text)

uid, gid = os.geteuid(), os.getegid()
try:
    unshare(CLONE_NEWNET)                       # CAP_SYS_ADMIN: the workers keep their credentials
    kind = "net"
except PermissionError as first:
    try:
        unshare(CLONE_NEWUSER | CLONE_NEWNET)   # unprivileged: a user namespace of our own ids only
        write("/proc/self/setgroups", "deny")
        write("/proc/self/uid_map", f"{uid} {uid} 1")
        write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as second:
        sys.exit(f"unshare(CLONE_NEWNET): {first.strerror}; "
                 f"unshare(CLONE_NEWUSER|CLONE_NEWNET): {second.strerror}")
    kind = "user+net"
try:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
except OSError as err:
    sys.exit(f"bringing the namespace's loopback up: {err}")
sys.stdout.write(kind + "\n")                 # the parent reads the kind, then waits
sys.stdout.flush()
sys.stdin.read()
'''

# Run in the namespace by the probe: a connection over its loopback must work.
PROBE = ("import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1); "
         "socket.create_connection(s.getsockname(), timeout=5).close()")


class Unavailable(RuntimeError):
    """No private network namespace can be made or joined here."""


class PrivateNetwork:
    """Open descriptors on a network namespace with only an up loopback (and on the user
    namespace owning it, when one was needed). `join()` runs in a child between fork and exec."""

    def __init__(self, fds: list[tuple[int, int]], kind: str):
        self._fds, self.kind = fds, kind
        self._libc = ctypes.CDLL(None, use_errno=True)     # loaded here, not in the forked child

    @property
    def name(self) -> str:
        """`net:[inode]`, as /proc/<pid>/ns/net of a worker reads."""
        return os.readlink(f"/proc/self/fd/{self._fds[-1][0]}")

    def join(self) -> None:
        """Move the calling (single-threaded, just forked) process into the namespace(s)."""
        for fd, nstype in self._fds:        # the user namespace first: it owns the network one
            if self._libc.setns(fd, nstype) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns: {os.strerror(err)}")

    def close(self) -> None:
        """Drop the launcher's hold: the namespace ends with the last worker in it."""
        for fd, _ in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []


def private_network() -> PrivateNetwork | None:
    """A new private network for a gang, or None, after one warning saying why and what that
    means, where this host allows no network namespace."""
    try:
        return create()
    except (Unavailable, OSError, subprocess.SubprocessError) as err:
        log.warning("training workers on the host's network: no private network namespace here (%s); "
                    "TensorFlow's gRPC server of each worker listens unauthenticated on every interface "
                    "of this host while the gang runs (Kubernetes: the NetworkPolicy)", err)
        return None


def create() -> PrivateNetwork:
    """Make the namespace (HELPER), hold it by descriptor, and check a process can join it and
    connect over its loopback. Raises Unavailable (or OSError) when any of it is not allowed."""
    helper = subprocess.Popen([sys.executable, "-I", "-S", "-c", HELPER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    fds: list[tuple[int, int]] = []
    try:
        kind = helper.stdout.readline().strip()
        if kind not in ("net", "user+net"):
            helper.stdin.close()
            error = helper.stderr.read().strip().splitlines()
            raise Unavailable(error[-1] if error else f"namespace helper exited with {helper.wait()}")
        if kind == "user+net":
            fds.append((os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC), CLONE_NEWUSER))
        fds.append((os.open(f"/proc/{helper.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC), CLONE_NEWNET))
    except BaseException:
        for fd, _ in fds:
            os.close(fd)
        raise
    finally:
        _end(helper)
    network = PrivateNetwork(fds, kind)
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE], preexec_fn=network.join,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HELPER_TIMEOUT_S)
        if probe.returncode != 0:
            raise Unavailable(f"a process in the namespace cannot use its loopback: "
                              f"{(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    except BaseException:
        network.close()
        raise
    return network


def _end(helper: subprocess.Popen) -> None:
    for stream in (helper.stdin, helper.stdout, helper.stderr):
        try:
            stream.close()
        except OSError:
            pass
    try:
        helper.wait(timeout=HELPER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()

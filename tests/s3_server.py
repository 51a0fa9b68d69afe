"""A real S3 server for the artifact-store tests: OpenStack Swift's proxy with its s3api middleware.

Swift (Debian's `swift`, `swift-proxy`, `swift-account`, `swift-container`, `swift-object`;
scripts/install_stack.sh installs them) is a production object store, and s3api is the S3
gateway production Swift clusters run: SigV4 signatures are checked against the account's key,
multipart uploads are assembled into a static large object, listings come from the container
server. The fixture writes a one-node, one-replica cluster into a temp folder (rings, a device
folder, four server configs), starts the account, container, object and proxy servers on free
127.0.0.1 ports, each one process (`workers = 0`), waits until the bucket can be created
through the S3 API, and stops each server by its PID.

The S3 identity is tempauth's user `test:tester`: the access key is `test:tester`, the secret
the user's key. Swift needs a memcache client for tempauth; no memcached runs, so the client
points at a port this process holds bound but not listening (every connect is refused at once;
Swift then works without its cache).
"""
from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SWIFT_PYTHON = "/usr/bin/python3"        # Debian's Swift is a package of the system Python
SERVERS = ("account", "container", "object", "proxy")
SWIFT_CONF = Path("/etc/swift/swift.conf")      # Swift reads its hash prefix from this fixed path
REGION = "us-east-1"                    # s3api's default `location`

_RINGS = """
import sys
from swift.common.ring import RingBuilder
for name, port in zip(("account", "container", "object"), sys.argv[2:5]):
    builder = RingBuilder(4, 1, 1)     # 16 partitions, one replica, min_part_hours 1
    builder.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port),
                     "device": "d1", "weight": 100})
    builder.rebalance()
    builder.get_ring().save(f"{sys.argv[1]}/{name}.ring.gz")
"""

_COMMON = """[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
workers = 0
user = {user}
swift_dir = {swift_dir}
devices = {devices}
mount_check = false
log_level = {log_level}
"""

_BACKEND = """
[pipeline:main]
pipeline = {name}-server

[app:{name}-server]
use = egg:swift#{name}
"""

_PROXY = """
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo
    proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:s3api]
use = egg:swift#s3api
location = {region}

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = {secret} .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:{memcache_port}

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo
"""


@dataclass
class S3Server:
    """A running Swift + s3api: where it listens, its bucket and its one identity."""

    endpoint: str
    bucket: str
    key: str
    secret: str
    root: Path
    pids: dict[str, int] = field(default_factory=dict)
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)
    _held: list[socket.socket] = field(default_factory=list, repr=False)

    def fsspec_env(self, secret: str | None = None) -> dict[str, str]:
        """The store's endpoint and identity the way a deployment passes them to fsspec/s3fs."""
        return {"FSSPEC_S3_ENDPOINT_URL": self.endpoint, "FSSPEC_S3_KEY": self.key,
                "FSSPEC_S3_SECRET": self.secret if secret is None else secret}

    def aws_env(self) -> dict[str, str]:
        """The same through botocore's own variables (what AWS tools and SDKs read)."""
        return {"AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ACCESS_KEY_ID": self.key,
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_DEFAULT_REGION": REGION}

    def client(self, secret: str | None = None, attempts: int = 3):
        """A botocore S3 client of its own (no fsspec caches), for checks the store layer does not make."""
        import botocore.config
        import botocore.session

        return botocore.session.get_session().create_client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=self.key,
            aws_secret_access_key=self.secret if secret is None else secret,
            config=botocore.config.Config(retries={"total_max_attempts": attempts}, connect_timeout=5))

    def log(self, name: str) -> str:
        path = self.root / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def available() -> str | None:
    """Why this machine cannot run the server (None: it can)."""
    missing = [f"swift-{name}-server" for name in SERVERS if not shutil.which(f"swift-{name}-server")]
    if missing or not SWIFT_CONF.exists():
        return (f"OpenStack Swift is not installed ({', '.join(missing) or SWIFT_CONF}): `make setup` "
                "installs it (scripts/install_stack.sh)")
    return None


def _hold_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def _free_port() -> int:
    with contextlib.closing(_hold_port()) as sock:
        return sock.getsockname()[1]


def start(root: Path, bucket: str = "reco", timeout_s: float = 30.0, log_level: str = "INFO") -> S3Server:
    """Write a one-node Swift cluster under `root`, start it on 127.0.0.1 and create `bucket`."""
    why = available()
    if why:
        raise RuntimeError(why)
    etc, devices, logs = root / "etc", root / "srv", root / "logs"
    for folder in (etc, devices / "d1", logs):
        folder.mkdir(parents=True, exist_ok=True)
    ports = {name: _free_port() for name in SERVERS}
    memcache = _hold_port()                # bound, never listening: Swift's cache client is refused
    server = S3Server(endpoint=f"http://127.0.0.1:{ports['proxy']}", bucket=bucket, key="test:tester",
                      secret=secrets.token_hex(16), root=root, _held=[memcache])
    subprocess.run([SWIFT_PYTHON, "-c", _RINGS, str(etc), *(str(ports[n]) for n in SERVERS[:3])],
                   check=True, capture_output=True, text=True, timeout=60)
    for name in SERVERS:
        text = _COMMON.format(port=ports[name], user=getpass.getuser(), swift_dir=etc, devices=devices,
                              log_level=log_level)
        text += (_PROXY.format(region=REGION, secret=server.secret, memcache_port=memcache.getsockname()[1])
                 if name == "proxy" else _BACKEND.format(name=name))
        (etc / f"{name}-server.conf").write_text(text)
    try:
        for name in SERVERS:
            with open(logs / f"{name}.log", "wb") as out:
                # -v: log to the console (this file) too; Swift's default is only syslog
                proc = subprocess.Popen([f"swift-{name}-server", str(etc / f"{name}-server.conf"), "-v"],
                                        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            server._procs[name], server.pids[name] = proc, proc.pid
        _wait_ready(server, timeout_s)
    except BaseException:
        stop(server)
        raise
    return server


def _wait_ready(server: S3Server, timeout_s: float) -> None:
    """Until the bucket is created through the S3 API: every server answers by then."""
    deadline = time.monotonic() + timeout_s
    client = server.client(attempts=1)          # this loop retries, without botocore's backoff
    last: Exception | None = None
    while time.monotonic() < deadline:
        dead = {n: p.returncode for n, p in server._procs.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"swift server(s) exited {dead}: "
                               + " | ".join(f"{n}: {server.log(n)[-2000:]}" for n in dead))
        try:
            client.create_bucket(Bucket=server.bucket)
            return
        except Exception as err:       # connection refused, 503 while a backend starts
            last = err
            time.sleep(0.1)
    raise TimeoutError(f"swift s3api at {server.endpoint} not ready within {timeout_s} s: {last}; "
                       f"proxy log: {server.log('proxy')[-2000:]}")


def stop(server: S3Server, timeout_s: float = 10.0) -> None:
    """Stop every server by its PID: SIGTERM, then SIGKILL for one that lingers."""
    for proc in server._procs.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc in server._procs.values():
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout_s)
    for sock in server._held:
        sock.close()
    server._held.clear()


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """Swift + s3api on 127.0.0.1 with a bucket `reco` and one access key, for a test module."""
    why = available()
    if why:
        pytest.fail(why)
    server = start(tmp_path_factory.mktemp("swift"))
    yield server
    stop(server)

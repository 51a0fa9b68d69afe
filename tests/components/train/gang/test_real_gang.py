"""A real 2-worker TensorFlow gang on this host that fails for a real reason (its shards were
never staged): its gRPC servers must not be reachable from outside the gang, and the error says
why it failed, not only that a worker exited 1.

Cheap (no tf.Transform, no training: the gang forms, then each worker finds no shard directory),
so one module-scoped run serves every test here. While it runs, a sampler reads the listening
sockets of this process's network namespace (the host's) and of each worker's (/proc/<pid>/net),
the way `ss -ltn` would in each.
"""
from __future__ import annotations

import json
import os
import threading
import time

import psutil
import pytest

from components.train.gang.launcher import GangError
from components.train.gang.local import run_gang
from pipeline.alerts import failure_line
from pipeline.paths import RunPaths
from tests.components.train.conftest import worker_processes
from tests.components.train.gang.sockets import is_loopback, listening
from tests.conftest import make_tiny_config

pytestmark = pytest.mark.integration


def _sample(stop: threading.Event, seen: dict) -> None:
    """Until `stop`: each worker's ports (from its TF_CONFIG), what listens on them in its own
    namespace and in ours, and which network namespace it is in."""
    while not stop.is_set():
        for proc in worker_processes():
            try:
                task = json.loads(proc.environ()["TF_CONFIG"])
                ports = {int(h.rsplit(":", 1)[1]) for h in task["cluster"]["worker"]}
                seen["ports"] |= ports
                seen["netns"].add(os.readlink(f"/proc/{proc.pid}/ns/net"))
                seen["in_worker_ns"] |= {a for a in listening(f"/proc/{proc.pid}/net") if a[1] in ports}
            except (psutil.Error, OSError, KeyError):
                continue
        seen["in_host_ns"] |= {a for a in listening("/proc/self/net") if a[1] in seen["ports"]}
        time.sleep(0.02)


@pytest.fixture(scope="module")
def failed_gang(tmp_path_factory):
    root = tmp_path_factory.mktemp("real-gang")
    config = make_tiny_config(root, **{"train.workers": 2, "train.kill_grace_s": 2.0,
                                       "train.startup_timeout_s": 120.0, "train.timeout_s": 300.0})
    paths = RunPaths.for_run(config, "2026-11-04", "real-gang")
    paths.train_dir.mkdir(parents=True)
    config_json = paths.train_dir / "config.json"
    config_json.write_text(json.dumps(config.to_dict()))
    seen = {"ports": set(), "netns": set(), "in_worker_ns": set(), "in_host_ns": set()}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(stop, seen), daemon=True)
    sampler.start()
    try:
        with pytest.raises(GangError) as err:
            run_gang(config, paths, config_json, root / "never-staged")
    finally:
        stop.set()
        sampler.join()
    return err.value, seen, paths, root


def test_the_gangs_grpc_ports_are_not_reachable_from_the_host_network(failed_gang):
    """TensorFlow binds 0.0.0.0 whatever TF_CONFIG says: the gang's own namespace holds only a
    loopback, so from the host's namespace no worker port listens on a non-loopback address
    (here: none listens at all)."""
    _, seen, _, _ = failed_gang
    assert len(seen["ports"]) == 2, seen
    assert {port for _, port in seen["in_worker_ns"]} == seen["ports"], seen   # the servers were up
    exposed = {(a, p) for a, p in seen["in_host_ns"] if not is_loopback(a)}
    assert not exposed, f"worker ports listening on the host's network: {sorted(exposed)}"
    assert os.readlink("/proc/self/ns/net") not in seen["netns"]
    assert len(seen["netns"]) == 1, seen          # one namespace for the whole gang


def test_the_error_and_the_on_call_line_say_why_the_worker_failed(failed_gang):
    err, _, _, root = failed_gang
    first_line = str(err).splitlines()[0]
    assert err.worker in (0, 1) and err.exit_code == 1
    assert f"exited with code 1: FileNotFoundError: no shard directory {root / 'never-staged' / 'train'}" \
        in first_line, first_line
    line = failure_line("recommender_nightly", "r", "train", 1, True, err)
    assert f"worker-{err.worker} (pid" in line and "FileNotFoundError: no shard directory" in line, line

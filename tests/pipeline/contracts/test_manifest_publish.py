"""A preprocess publish SIGKILLed between any two of its renames: readers recover the last
complete (examples, transform) pair, never a mix, and the next publish succeeds."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from pipeline.config import PROJECT_ROOT
from pipeline.contracts import manifest as M


def make_pair(examples, transform, tag: str) -> None:
    (transform / "transform_fn").mkdir(parents=True)
    (transform / "transform_fn" / "saved_model.pb").write_text(f"graph {tag}")
    examples.mkdir(parents=True)
    (examples / M.MANIFEST).write_text(json.dumps({"format": M.FORMAT, "tag": tag,
                                                   "transform_fingerprint": M.transform_fingerprint(transform)}))


def served_pair(examples, transform) -> str:
    """The tag of the pair a reader sees after `recover`; fails on a mix."""
    M.recover(examples, transform)
    tag = M.read(examples)["tag"]
    assert (transform / "transform_fn" / "saved_model.pb").read_text() == f"graph {tag}", "a mixed pair"
    return tag


KILLED_PUBLISH = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pipeline.contracts import manifest as M
    root, kill_after = Path(sys.argv[1]), int(sys.argv[2])
    real, done = os.rename, []
    def rename(src, dst):
        real(src, dst)
        done.append(dst)
        if len(done) == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
    os.rename = rename
    M.publish(root / "new-examples", root / "new-transform", root / "examples", root / "transform")
""")


@pytest.mark.parametrize("kill_after", [1, 2, 3])
def test_a_publish_killed_between_renames_leaves_the_old_pair_recoverable(tmp_path, kill_after):
    examples, transform = tmp_path / "examples", tmp_path / "transform"
    make_pair(examples, transform, "old")
    make_pair(tmp_path / "new-examples", tmp_path / "new-transform", "new")
    done = subprocess.run([sys.executable, "-c", KILLED_PUBLISH, str(tmp_path), str(kill_after)],
                          env={"PYTHONPATH": str(PROJECT_ROOT)}, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not examples.exists()         # examples are moved aside first: "no output", never a mix
    assert served_pair(examples, transform) == "old"

    rerun = tmp_path / "rerun"
    make_pair(rerun / "examples", rerun / "transform", "newer")
    M.publish(rerun / "examples", rerun / "transform", examples, transform)
    assert served_pair(examples, transform) == "newer"

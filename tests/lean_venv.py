"""The scheduler image's environment for the packaging tier: a venv with only `.[airflow]`.

Its dependencies can change only with setup.py or constraints.txt, so the venv with them is
built once per hash of those two files and kept under ~/.cache (a fresh clone on the same
machine reuses it); the project itself is reinstalled into it (`--no-deps`) on every run, so
what is tested is always this checkout's package, built from its own setup.py.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pipeline.config import PROJECT_ROOT

CACHE = Path(os.environ.get("RECO_TEST_CACHE", Path.home() / ".cache" / "reco-tests"))


def deps_hash() -> str:
    digest = hashlib.sha256()
    for name in ("setup.py", "constraints.txt"):
        digest.update((PROJECT_ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(PROJECT_ROOT / "constraints.txt"),
                           *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


def lean_python() -> Path:
    """The lean venv's python, with this checkout's package freshly installed in it.

    Built in place (a venv's scripts name their own path in their shebang, so a venv cannot be
    built elsewhere and renamed) under a lock, so two runs on one machine never build it at once;
    the `.complete` marker is written last, so a build that died is rebuilt from scratch.
    """
    venv = CACHE / f"lean-venv-v2-{deps_hash()}"        # v2: built in place (v1 venvs were renamed)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
            _pip(venv / "bin" / "python", f"{PROJECT_ROOT}[airflow]")
            (venv / ".complete").touch()
        python = venv / "bin" / "python"
        _pip(python, "--no-deps", "--force-reinstall", str(PROJECT_ROOT))
    return python

"""What the environment must provide for the commands the project prints to work."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_tensorboard_command_the_demo_prints_exists():
    tensorboard = Path(sys.executable).with_name("tensorboard")
    assert tensorboard.exists(), "tensorboard is not installed in the project environment (setup.py)"
    out = subprocess.run([str(tensorboard), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().startswith("2.")

"""The evaluate CLI's own refusals are one line and exit 2, never a traceback."""
from __future__ import annotations

import subprocess
import sys

from pipeline.config_sections import PROJECT_ROOT
from tests.conftest import tiny_overrides


def test_no_candidate_model_is_one_line_and_exit_2(tmp_path):
    sets = [f"--set={k}={v}" for k, v in tiny_overrides(tmp_path).items() if k.startswith("data.")]
    done = subprocess.run([sys.executable, "-m", "components.evaluate", "--date", "2026-11-04", *sets],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(lines) == 1 and "evaluate refused: EvalError: no candidate SavedModel at" in lines[0], done.stderr

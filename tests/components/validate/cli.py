"""The validate CLI as on-call runs it, on a test's config."""
from __future__ import annotations

import datetime as dt
import subprocess
import sys

import yaml

from pipeline.config_sections import PROJECT_ROOT


def validate_cli(tmp_path, config, day: dt.date) -> subprocess.CompletedProcess:
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(config.to_dict()))
    return subprocess.run([sys.executable, "-m", "components.validate", "--config", str(params),
                           "--date", day.isoformat()], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=300)

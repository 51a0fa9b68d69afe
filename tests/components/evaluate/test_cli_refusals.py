"""The evaluate CLI's own refusals are one line and exit 2, never a traceback."""
from __future__ import annotations

import datetime as dt
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


def test_evaluate_alone_refuses_an_eval_day_re_exported_from_the_window(runs, tmp_path):
    """A backfill or rerun of evaluate, without validate: the eval day replaced by a copy of the
    last training day would be judged on the model's own training rows; it is refused instead."""
    import shutil

    import yaml

    from tests.components.evaluate.fixtures import CLEAN_DAY

    raw = tmp_path / "raw"
    shutil.copytree(runs.raw, raw)
    day_before = CLEAN_DAY - dt.timedelta(days=1)
    shutil.rmtree(raw / "events" / f"ds={CLEAN_DAY}")
    shutil.copytree(raw / "events" / f"ds={day_before}", raw / "events" / f"ds={CLEAN_DAY}")
    config, paths = runs.make(CLEAN_DAY, **{"data.raw_root": str(raw), "window.train_days": 2})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(config.to_dict()))
    done = subprocess.run([sys.executable, "-m", "components.evaluate", "--config", str(tmp_path / "params.yaml"),
                           "--date", CLEAN_DAY.isoformat(), "--run-id", paths.run_id],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"events partitions ds={day_before} and ds={CLEAN_DAY} hold the same event ids" in lines[0]
    assert f"are also in training partition(s) ds={day_before}" in lines[0]
    assert not (paths.eval_dir / "BLESSED").exists()

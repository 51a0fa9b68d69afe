"""The evaluate CLI's own refusals are one line and exit 2, never a traceback."""
from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest

from pipeline.config_sections import PROJECT_ROOT
from tests.conftest import tiny_overrides

pytestmark = pytest.mark.integration      # the step's CLI in a child process loads TensorFlow (tests/tiers.py)


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

    from tests.components.evaluate.fixtures import CLEAN_DAY

    raw = tmp_path / "raw"
    shutil.copytree(runs.raw, raw)
    day_before = CLEAN_DAY - dt.timedelta(days=1)
    shutil.rmtree(raw / "events" / f"ds={CLEAN_DAY}")
    shutil.copytree(raw / "events" / f"ds={day_before}", raw / "events" / f"ds={CLEAN_DAY}")
    config, paths = runs.make(CLEAN_DAY, **{"data.raw_root": str(raw), "window.train_days": 2})
    lines = _refused_lines(tmp_path, config, paths)
    assert f"events partitions ds={day_before} and ds={CLEAN_DAY} hold the same event ids" in lines[0]
    assert f"are also in training partition(s) ds={day_before}" in lines[0]
    assert not (paths.eval_dir / "BLESSED").exists()


def test_evaluate_refuses_an_eval_day_below_min_rows_alone_and_in_process(runs, tmp_path):
    """Five rows (both label classes): the bootstrap interval spans [-1, 1], yet the gate scored
    them and gave a verdict (BLESSED whenever the five happened to rank above eval.min_auc).
    Refused instead, as the CLI's one line and exit 2, and as the ValidationError the DAG's task
    fails on without retries."""
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import pytest

    from components.evaluate import run
    from pipeline.contracts import features as F
    from pipeline.contracts.inputs import ValidationError
    from tests.components.evaluate.fixtures import CLEAN_DAY

    raw = tmp_path / "raw"
    shutil.copytree(runs.raw, raw)
    folder = raw / "events" / f"ds={CLEAN_DAY}"
    table = pq.read_table(sorted(folder.glob("*.parquet")))
    for part in folder.glob("*.parquet"):
        part.unlink()
    clicked = pc.indices_nonzero(pc.equal(table.column(F.LABEL), 1)).to_pylist()[:2]
    shown = pc.indices_nonzero(pc.equal(table.column(F.LABEL), 0)).to_pylist()[:3]
    pq.write_table(table.take(sorted(clicked + shown)), folder / "part-00000.parquet")
    config, paths = runs.make(CLEAN_DAY, **{"data.raw_root": str(raw), "window.train_days": 2})
    lines = _refused_lines(tmp_path, config, paths)
    assert (f"evaluate refused: ValidationError: evaluate: eval day ds={CLEAN_DAY}: 5 usable rows (of 5 read), "
            f"below eval.min_rows=200: too few to judge a model") in lines[0]
    assert not (paths.eval_dir / "BLESSED").exists() and not (paths.eval_dir / "NOT_BLESSED").exists()
    with pytest.raises(ValidationError, match=r"5 usable rows \(of 5 read\), below eval.min_rows=200"):
        run(config, paths)
    low = config.with_overrides({"eval.min_rows": 5})            # a team that means it can say so
    assert run(low, paths).examples == 5


def _refused_lines(tmp_path, config, paths) -> list[str]:
    """The evaluate CLI on `config`'s run: exit 2, one refusal line, no traceback."""
    import yaml

    from tests.components.evaluate.fixtures import CLEAN_DAY

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(config.to_dict()))
    done = subprocess.run([sys.executable, "-m", "components.evaluate", "--config", str(tmp_path / "params.yaml"),
                           "--date", CLEAN_DAY.isoformat(), "--run-id", paths.run_id],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return lines

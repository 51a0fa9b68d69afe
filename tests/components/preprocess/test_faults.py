"""Each planted generator fault gives its documented outcome in the preprocess step.

- malformed rows: rejected with a reason (rejected.jsonl + counts in rows.json); the run fails
  above preprocess.max_rejected_fraction and publishes nothing; long histories are truncated
  and counted, not rejected;
- missing_column / renamed_column / wrong_type: fail before Beam starts, naming table,
  partition and column;
- a missing partition: fail listing every missing date.
(shuffled_labels passes preprocess by design; see tests/components/validate.)
"""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from components.validate import ValidationError
from tests.components.preprocess.helpers import FIRST_DAY, RUN_DATE, generate_raw, read_split
from tests.conftest import make_tiny_config

pytestmark = pytest.mark.integration
ITEM_REASONS = {"image_not_finite", "image_wrong_length", "empty_title"}
EVENT_REASONS = {"unknown_item", "null_label"}


@pytest.fixture(scope="module")
def malformed(tmp_path_factory):
    """Malformed rows planted on the eval day D, whose items snapshot is the one used."""
    config = make_tiny_config(tmp_path_factory.mktemp("malformed"))
    generate_raw(config, faults={RUN_DATE: ["malformed:0.2"]})
    return config


def _paths(config, run_id):
    from pipeline.paths import RunPaths

    return RunPaths.for_run(config, RUN_DATE, run_id)


def test_malformed_rows_over_threshold_fail_and_publish_nothing(malformed):
    from components.preprocess import run

    paths = _paths(malformed, "strict")
    with pytest.raises(ValidationError, match="rejected.*above preprocess.max_rejected_fraction"):
        run(malformed, paths)
    assert not paths.examples_dir.exists() and not paths.transform_dir.exists()
    assert not [p for p in paths.run_dir.iterdir() if p.name.startswith(".")]
    report = json.loads((paths.validation_dir / "rows.json").read_text())
    assert not report["passed"] and report["problems"]
    rejected = (paths.validation_dir / "rejected" / "rejected.jsonl").read_text().splitlines()
    assert len(rejected) == sum(report["rejected"]["events"].values()) + sum(report["rejected"]["items"].values())


def test_malformed_rows_under_threshold_are_rejected_with_reasons(malformed):
    from components.preprocess import run

    config = malformed.with_overrides({"preprocess.max_rejected_fraction": 0.5})
    paths = _paths(config, "lenient")
    result = run(config, paths)
    report = json.loads(Path(result.report_path).read_text())
    rows = [json.loads(line) for line in
            (paths.validation_dir / "rejected" / "rejected.jsonl").read_text().splitlines()]
    by_reason = Counter((r["table"], r.get("split"), r["reason"]) for r in rows)
    assert {r for (t, _, r) in by_reason if t == "items"} == ITEM_REASONS
    assert {r for (t, s, r) in by_reason if t == "events" and s == "eval"} >= EVENT_REASONS | ITEM_REASONS
    # Events of a bad item are rejected with the item's reason in both splits (same snapshot).
    assert {r for (t, s, r) in by_reason if t == "events" and s == "train"} <= ITEM_REASONS
    for split in ("train", "eval"):
        counts = report["splits"][split]
        assert counts["rejected"] == {r: n for (t, s, r), n in by_reason.items() if t == "events" and s == split}
        assert counts["kept"] + sum(counts["rejected"].values()) == counts["rows"]
    assert report["splits"]["eval"]["history_truncated"] > 0       # kept, truncated to the newest 50
    assert result.eval_examples == report["splits"]["eval"]["kept"]
    assert result.rejected == sum(report["rejected"]["events"].values())
    assert len(read_split(paths.examples_dir, "eval", config.model)["label"]) == result.eval_examples


@pytest.fixture(scope="module")
def schema_faults(tmp_path_factory):
    config = make_tiny_config(tmp_path_factory.mktemp("schema"), **{"generator.events_per_day": 200})
    days = [FIRST_DAY.replace(day=d) for d in (1, 2, 3)]
    generate_raw(config, faults={days[0]: ["missing_column"], days[1]: ["renamed_column"],
                                 days[2]: ["wrong_type"]})
    return config


def test_schema_faults_fail_before_beam_naming_each_column(schema_faults):
    from components.preprocess import run

    paths = _paths(schema_faults, "schema")
    with pytest.raises(ValidationError) as err:
        run(schema_faults, paths)
    text = str(err.value)
    assert "events partition ds=2026-11-01 (part-00000.parquet): column 'platform' is missing" in text
    assert "ds=2026-11-02" in text and "'history_item_ids' is missing" in text and "history_items" in text
    assert "ds=2026-11-03" in text and "column 'label' has type double, expected int64" in text
    assert not paths.run_dir.exists() or not any(paths.run_dir.iterdir())


def test_missing_partitions_are_all_listed(schema_faults, tmp_path):
    from components.preprocess import run
    from pipeline.paths import RunPaths

    config = schema_faults.with_overrides({"data.raw_root": str(tmp_path / "raw")})
    shutil.copytree(schema_faults.data.raw_root, tmp_path / "raw")
    for day in ("2026-11-02", "2026-11-04"):
        shutil.rmtree(tmp_path / "raw" / "events" / f"ds={day}")
    with pytest.raises(ValidationError, match="missing dates: 2026-11-02, 2026-11-04"):
        run(config, RunPaths.for_run(config, RUN_DATE, "missing"))


def test_repeated_misdated_and_userless_rows_are_rejected_with_their_own_reasons(tmp_path):
    """A re-delivered file (written in small row groups, so repeats span Beam's read units),
    rows shifted by a time-zone bug, rows without a user: each counted under its reason, the
    first copy of a repeated event trained once."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from components.preprocess import run
    from pipeline.contracts import features as F

    config = make_tiny_config(tmp_path)
    generate_raw(config)
    day = FIRST_DAY + dt.timedelta(days=1)
    folder = config.data.raw_root / "events" / f"ds={day}"
    original = sorted(folder.glob("*.parquet"))[0]
    table = pq.read_table(original)
    ts = table.column(F.EVENT_TS).to_pylist()
    users = table.column(F.USER_ID).to_pylist()
    table = table.set_column(table.schema.get_field_index(F.EVENT_TS), F.EVENT_TS, pa.array(
        [t + dt.timedelta(days=1) if i < 10 else t for i, t in enumerate(ts)], table.schema.field(F.EVENT_TS).type))
    table = table.set_column(table.schema.get_field_index(F.USER_ID), F.USER_ID, pa.array(
        [None if 10 <= i < 40 else u for i, u in enumerate(users)], pa.int64()))
    pq.write_table(table, original, row_group_size=64)
    pq.write_table(table.slice(100, 60), folder / "part-99999.parquet", row_group_size=16)   # re-delivered

    loose = config.with_overrides({"preprocess.max_rejected_fraction": 0.5})   # the bound: test above
    paths = _paths(loose, "loose")
    result = run(loose, paths)
    rejected = json.loads(Path(result.report_path).read_text())["splits"]["train"]["rejected"]
    assert rejected["duplicate_event_id"] == 60                 # the later copies only: the first is kept
    assert rejected["event_ts_outside_partition"] == 10 and rejected["invalid_user_id"] == 30
    kept = [json.loads(line) for line in
            (paths.validation_dir / "rejected" / "rejected.jsonl").read_text().splitlines()]
    repeats = {r["event_id"] for r in kept if r["reason"] == "duplicate_event_id"}
    assert repeats == set(table.column(F.EVENT_ID).slice(100, 60).to_pylist())


def test_a_full_artifact_volume_is_named_on_one_line_and_leaves_no_temp(tmp_path):
    """Too small to hold the examples at all: refused before Beam starts. Big enough for the
    check but not for the output: the write fails, named, and the temps are gone either way."""
    import subprocess
    import sys

    import yaml

    from components.preprocess.run import MIN_EXAMPLE_BYTES
    from pipeline.config import PROJECT_ROOT
    from pipeline.fsutil import DiskFullError
    from tests.small_disk import fill, small_disk

    config = make_tiny_config(tmp_path, **{"generator.events_per_day": 300})
    generate_raw(config)
    events = 4 * 300
    with small_disk(tmp_path / "artifacts", 256 * 1024) as disk:
        small = config.with_overrides({"data.artifact_root": str(disk)})
        params = tmp_path / "params.yaml"
        params.write_text(yaml.safe_dump(small.to_dict()))
        fill(disk)
        done = subprocess.run([sys.executable, "-m", "components.preprocess", "--config", str(params),
                               "--date", RUN_DATE.isoformat(), "--run-id", "full"],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        (line,) = [x for x in done.stderr.splitlines() if "needs" in x]
        assert "writing the examples and transform of run full needs" in line and "retry" in line
        paths = _paths(small, "full")
        assert not [p for p in paths.run_dir.iterdir() if p.name.startswith(".")]

    with small_disk(tmp_path / "artifacts2", events * MIN_EXAMPLE_BYTES + 128 * 1024) as disk:
        small = config.with_overrides({"data.artifact_root": str(disk)})
        paths = _paths(small, "midway")
        with pytest.raises(DiskFullError, match="disk full while writing the examples and transform of run midway"):
            from components.preprocess import run

            run(small, paths)
        assert not paths.examples_dir.exists() and not [p for p in paths.run_dir.iterdir() if p.name.startswith(".")]

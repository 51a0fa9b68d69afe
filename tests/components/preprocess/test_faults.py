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

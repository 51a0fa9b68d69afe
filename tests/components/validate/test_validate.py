"""Validate step (pyarrow only): partitions, schemas, daily stats, day-over-day drift, faults."""
from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest

from components.validate import ValidationError, run
from pipeline.paths import RunPaths
from tests.components.preprocess.helpers import FIRST_DAY, RUN_DATE, generate_raw
from tests.conftest import make_tiny_config

SMALL = {"generator.events_per_day": 400, "generator.items": 100, "generator.users": 150,
         # the production bounds, explicitly (the session's tiny config loosens them)
         "validate.warn_label_rate_drift": 0.2, "validate.max_label_rate_drift": 0.5,
         "validate.warn_row_count_drift": 0.3, "validate.max_row_count_drift": 0.8}


def _config(tmp_path, **extra):
    return make_tiny_config(tmp_path, **{**SMALL, **extra})


def test_clean_window_passes_and_records_history(tiny_config, raw_data):
    paths = RunPaths.for_run(tiny_config, RUN_DATE, "validate-clean")
    result = run(tiny_config, paths)
    assert result.train_dates == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert result.rows == {d: 1500 for d in ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"]}
    assert all(0.05 < r < 0.25 for r in result.label_rate.values())
    report = json.loads((paths.validation_dir / "report.json").read_text())
    assert report["passed"] and report["items"]["items"] == report["items"]["distinct_ids"]
    assert set(report["drift"]) == {"2026-11-02", "2026-11-03", "2026-11-04"}
    assert any("2026-11-01: no previous-day report" in w for w in result.warnings)
    assert json.loads((paths.validation_history_dir / "ds=2026-11-04.json").read_text())["rows"] == 1500


def test_missing_partitions_list_every_date(tmp_path):
    config = _config(tmp_path)
    generate_raw(config, days=2)                      # only 11-01 and 11-02 exist
    with pytest.raises(ValidationError, match="missing dates: 2026-11-03, 2026-11-04") as err:
        run(config, RunPaths.for_run(config, RUN_DATE, "r"))
    assert "events partition ds=2026-11-03 is missing" in str(err.value)
    report = json.loads((RunPaths.for_run(config, RUN_DATE, "r").validation_dir / "report.json").read_text())
    assert not report["passed"] and len(report["problems"]) == 3


def test_items_snapshot_falls_back_to_the_latest_earlier_one(tmp_path):
    config = _config(tmp_path)
    generate_raw(config)
    shutil.rmtree(config.data.raw_root / "items" / f"ds={RUN_DATE}")
    paths = RunPaths.for_run(config, RUN_DATE, "r")
    run(config, paths)
    assert json.loads((paths.validation_dir / "report.json").read_text())["items_snapshot"] == "2026-11-03"
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        shutil.rmtree(config.data.raw_root / "items" / f"ds={day}")
    with pytest.raises(ValidationError, match="no items snapshot at or before ds=2026-11-04"):
        run(config, paths)


def test_schema_faults_name_table_partition_and_column(tmp_path):
    config = _config(tmp_path)
    generate_raw(config, faults={FIRST_DAY: ["missing_column"], dt.date(2026, 11, 3): ["renamed_column"],
                                 RUN_DATE: ["wrong_type"]})
    with pytest.raises(ValidationError) as err:
        run(config, RunPaths.for_run(config, RUN_DATE, "r"))
    problems = err.value.problems
    assert "events partition ds=2026-11-01 (part-00000.parquet): column 'platform' is missing" in problems
    assert ("events partition ds=2026-11-03 (part-00000.parquet): column 'history_item_ids' is missing; "
            "found unexpected column(s) ['history_items'] (renamed?)") in problems
    assert ("events partition ds=2026-11-04 (part-00000.parquet): column 'label' has type double, "
            "expected int64") in problems
    assert len(problems) == 3


def test_shuffled_labels_pass_validation_by_design(tmp_path):
    """Same click rate, no signal: not detectable from stats; the evaluation gate catches it."""
    config = _config(tmp_path)
    generate_raw(config, faults={RUN_DATE: ["shuffled_labels"]})
    result = run(config, RunPaths.for_run(config, RUN_DATE, "r"))
    assert not any("label_rate" in w and "2026-11-04" in w for w in result.warnings)


def test_label_rate_drift_fails_and_is_not_recorded_as_baseline(tmp_path):
    config = _config(tmp_path)
    generate_raw(config, days=3)
    from pipeline.datagen import generate

    g = config.generator
    generate(config.data.raw_root, RUN_DATE, 1, users=g.users, items=g.items, events_per_day=g.events_per_day,
             ctr=0.45, seed=g.seed)
    paths = RunPaths.for_run(config, RUN_DATE, "r")
    with pytest.raises(ValidationError, match=r"ds=2026-11-04: label_rate .* exceeds the bound 50%"):
        run(config, paths)
    assert not (paths.validation_history_dir / "ds=2026-11-04.json").exists()
    loose = config.with_overrides({"validate.max_label_rate_drift": 5.0})
    result = run(loose, paths)
    assert any("2026-11-04: label_rate" in w and "warning level" in w for w in result.warnings)


def test_row_count_drift_against_the_previous_days_stored_report(tmp_path):
    config = _config(tmp_path)
    generate_raw(config)
    run(config, RunPaths.for_run(config, RUN_DATE, "day1"))          # stores history for 11-01..04
    from pipeline.datagen import generate

    g = config.generator
    nxt = RUN_DATE + dt.timedelta(days=1)
    generate(config.data.raw_root, nxt, 1, users=g.users, items=g.items, events_per_day=g.events_per_day * 3,
             ctr=g.ctr, seed=g.seed)
    one_day = config.with_overrides({"window.train_days": 1})
    with pytest.raises(ValidationError, match=r"ds=2026-11-05: rows 1200 vs 400 the day before \(drift 200.0%\)"):
        run(one_day, RunPaths.for_run(one_day, nxt, "day2"))


def test_each_parquet_footer_is_read_once(tiny_config, raw_data, monkeypatch):
    import pyarrow.parquet as pq

    from pipeline.contracts import inputs

    opened = []
    real = pq.ParquetFile
    monkeypatch.setattr(inputs.pq, "ParquetFile", lambda path, *a, **k: opened.append(path) or real(path, *a, **k))
    run(tiny_config, RunPaths.for_run(tiny_config, RUN_DATE, "validate-footers"))
    assert opened and len(opened) == len(set(opened))      # every file once, none twice


def _rewrite(path, transform):
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(transform(table), path)


def test_duplicate_item_ids_in_the_snapshot_fail_naming_the_partition(tmp_path):
    import pyarrow as pa

    config = _config(tmp_path)
    generate_raw(config)
    items = config.data.raw_root / "items" / f"ds={RUN_DATE}" / "items.parquet"
    _rewrite(items, lambda t: pa.concat_tables([t, t.slice(0, 5)]))
    with pytest.raises(ValidationError, match="items partition ds=2026-11-04: 5 duplicate item_id rows"):
        run(config, RunPaths.for_run(config, RUN_DATE, "r"))


def test_an_events_partition_with_zero_rows_fails(tmp_path):
    config = _config(tmp_path)
    generate_raw(config)
    for part in (config.data.raw_root / "events" / "ds=2026-11-03").glob("*.parquet"):
        _rewrite(part, lambda t: t.slice(0, 0))                  # same schema, no rows
    with pytest.raises(ValidationError) as err:
        run(config, RunPaths.for_run(config, RUN_DATE, "r"))
    assert "events partition ds=2026-11-03: no rows" in err.value.problems


def test_a_truncated_parquet_file_is_named_not_a_traceback(tmp_path):
    """A half-written file (a copy cut short), not a schema change: the CLI says which file."""
    import subprocess
    import sys

    import yaml

    config = _config(tmp_path)
    generate_raw(config)
    part = next((config.data.raw_root / "events" / "ds=2026-11-02").glob("*.parquet"))
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(config.to_dict()))
    done = subprocess.run([sys.executable, "-m", "components.validate", "--config", str(tmp_path / "params.yaml"),
                           "--date", RUN_DATE.isoformat()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{part}: not a readable Parquet file (truncated or corrupt?)" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_expected_share_of_users_in_a_shared_bucket_matches_real_hashing():
    import numpy as np
    import tensorflow as tf

    from components.validate.checks import users_sharing_buckets

    users, buckets = 3102, 10_000
    hashed = tf.strings.to_hash_bucket_fast(tf.strings.as_string(tf.range(1, users + 1, dtype=tf.int64)),
                                            buckets).numpy()
    _, inverse, counts = np.unique(hashed, return_inverse=True, return_counts=True)
    measured = float(np.mean(counts[inverse] > 1))
    assert users_sharing_buckets(users, buckets) == pytest.approx(0.267, abs=0.001)
    assert measured == pytest.approx(users_sharing_buckets(users, buckets), abs=0.02)
    assert users_sharing_buckets(1, buckets) == 0.0 and users_sharing_buckets(users, 0) == 0.0


def test_a_window_with_more_users_than_its_buckets_hold_warns_and_passes(tmp_path):
    """150 users hashed into 100 buckets: about three in four share one; validate says so and passes."""
    config = _config(tmp_path, **{"model.user_buckets": 100})
    generate_raw(config)
    result = run(config, RunPaths.for_run(config, RUN_DATE, "crowded"))
    report = json.loads((RunPaths.for_run(config, RUN_DATE, "crowded").validation_dir / "report.json").read_text())
    users = report["users"]
    assert users["buckets"] == 100 and 100 < users["distinct"] <= 150 and users["sharing_a_bucket"] > 0.6
    assert any("users for model.user_buckets=100" in w and "raise model.user_buckets" in w for w in result.warnings)
    roomy = _config(tmp_path / "roomy", **{"model.user_buckets": 100_000})
    generate_raw(roomy)
    assert not any("model.user_buckets" in w for w in run(roomy, RunPaths.for_run(roomy, RUN_DATE, "r")).warnings)

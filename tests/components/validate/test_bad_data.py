"""Bad data named where it enters: each fault written as real files the way an upstream export
breaks, then judged by the real validate step (in process, and one through its CLI).

- text that is not UTF-8 (titles, categories, platforms, event ids): a problem naming the
  partition, the file and the column, not a reader's traceback two steps later;
- an items partition marked complete (`_SUCCESS`) that holds no Parquet file;
- a catalog that shrank overnight beyond `validate.max_catalog_drop`, naming both sizes;
- falling back to an earlier items snapshot: a warning of the report (and its own field);
- platform values outside ios/android/web: counted per day, a warning naming the values;
- an eval day with fewer rows than `eval.min_rows`: refused before any training.
"""
from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.validate import ValidationError, run
from pipeline.contracts import features as F
from pipeline.paths import RunPaths
from tests.components.preprocess.helpers import RUN_DATE, generate_raw
from tests.components.validate.cli import validate_cli
from tests.conftest import make_tiny_config

SMALL = {"generator.events_per_day": 400, "generator.items": 100, "generator.users": 150}
D1 = RUN_DATE - dt.timedelta(days=1)
NOT_UTF8 = b"caf\xe9 "                      # Latin-1 'é': what a mis-encoded export writes


def _setup(tmp_path, **extra):
    config = make_tiny_config(tmp_path, **{**SMALL, **extra})
    generate_raw(config)
    return config


def _items_file(config, day=RUN_DATE):
    return config.data.raw_root / "items" / f"ds={day}" / "items.parquet"


def _events_file(config, day=RUN_DATE):
    return sorted((config.data.raw_root / "events" / f"ds={day}").glob("*.parquet"))[0]


def _report(config, run_id="r") -> dict:
    return json.loads((RunPaths.for_run(config, RUN_DATE, run_id).validation_dir / "report.json").read_text())


def _validate(config, run_id="r"):
    return run(config, RunPaths.for_run(config, RUN_DATE, run_id))


def _problems(config, run_id="r") -> list[str]:
    with pytest.raises(ValidationError) as err:
        _validate(config, run_id)
    assert _report(config, run_id)["problems"] == err.value.problems
    return err.value.problems


def _set_bytes(path, column, rows_):
    """Rewrite `path` with `rows_` of string `column` prefixed by bytes that are not UTF-8 (the
    column keeps its string type: the file's footer says string, the bytes say otherwise)."""
    table = pq.read_table(path)
    values = [None if v is None else v.encode() for v in table.column(column).to_pylist()]
    for i in rows_:
        values[i] = NOT_UTF8 + (values[i] or b"")
    broken = pa.array(values, pa.binary()).view(pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index(column), column, broken), path)


@pytest.mark.parametrize(("table", "column"), [("items", F.TITLE), ("items", F.CATEGORY),
                                               ("events", F.PLATFORM), ("events", F.EVENT_ID)])
def test_text_that_is_not_utf8_is_named_with_partition_file_and_column(tmp_path, table, column):
    config = _setup(tmp_path)
    path = _items_file(config) if table == "items" else _events_file(config)
    _set_bytes(path, column, [3, 17, 18])
    (problem,) = [p for p in _problems(config) if "UTF-8" in p]
    assert problem.startswith(f"{table} partition ds={RUN_DATE} ({path.name}): column {column!r} holds 3 "
                              f"values that are not UTF-8 text (first at row 3: b'caf\\xe9 "), problem


def test_a_non_utf8_title_is_one_line_and_exit_2_from_the_cli(tmp_path):
    """The fault that passed validate and then killed preprocess with ArrowInvalid (exit 1, retried)."""
    config = _setup(tmp_path)
    _set_bytes(_items_file(config), F.TITLE, [0])
    done = validate_cli(tmp_path, config, RUN_DATE)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if "refused" in x]
    assert f"items partition ds={RUN_DATE} (items.parquet): column 'title' holds 1 values that are not UTF-8" in line


def test_an_items_partition_marked_complete_without_a_parquet_file_fails_naming_it(tmp_path):
    config = _setup(tmp_path)
    _items_file(config).unlink()                  # the export wrote its marker, not its file
    folder = _items_file(config).parent
    assert (folder / "_SUCCESS").exists()
    problems = _problems(config)
    assert (f"items partition ds={RUN_DATE} is marked complete (_SUCCESS) but holds no Parquet file ({folder}): "
            f"the run would use ds={D1}'s catalog instead") in " ".join(problems), problems


def test_falling_back_to_an_earlier_items_snapshot_is_a_report_warning(tmp_path):
    config = _setup(tmp_path)
    folder = _items_file(config).parent
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()                                # no snapshot for D at all: yesterday's is used
    result = _validate(config)
    report = _report(config)
    expected = f"items: no snapshot for ds={RUN_DATE}: the run uses ds={D1}'s catalog (1 day older)"
    assert report["items_snapshot"] == str(D1)
    assert report["items_fallback"] == expected
    assert expected in report["warnings"] and expected in result.warnings


def test_a_snapshot_for_the_run_date_is_no_fallback(tmp_path):
    config = _setup(tmp_path)
    _validate(config)
    report = _report(config)
    assert report["items_fallback"] is None and not [w for w in report["warnings"] if w.startswith("items")]


def _keep_items(config, fraction):
    path = _items_file(config)
    table = pq.read_table(path)
    pq.write_table(table.slice(0, int(table.num_rows * fraction)), path)
    return table.num_rows, int(table.num_rows * fraction)


def test_a_catalog_that_shrank_overnight_fails_naming_both_sizes(tmp_path):
    config = _setup(tmp_path)
    before = pq.read_table(_items_file(config, D1), columns=[F.ITEM_ID]).num_rows
    _, after = _keep_items(config, 0.5)
    drop = 1 - after / before
    problem = (f"items partition ds={RUN_DATE}: {after} distinct item ids vs {before} in ds={D1}, the snapshot "
               f"before (drop {drop:.1%}), above validate.max_catalog_drop=30%")
    problems = _problems(config)
    assert any(p.startswith(problem) for p in problems), problems
    previous = _report(config)["items"]["previous"]
    assert previous == {"snapshot": str(D1), "distinct_ids": before, "drop": pytest.approx(drop)}
    _validate(config.with_overrides({"validate.max_catalog_drop": 0.6}), run_id="accepted")


def test_a_catalog_that_lost_a_few_items_passes(tmp_path):
    config = _setup(tmp_path)
    _keep_items(config, 0.9)
    _validate(config)
    assert 0.05 < _report(config)["items"]["previous"]["drop"] < 0.3


def test_unknown_platform_values_are_counted_and_named_per_day(tmp_path):
    config = _setup(tmp_path)
    path = _events_file(config)
    table = pq.read_table(path)
    platforms = table.column(F.PLATFORM).to_pylist()
    platforms[:30] = ["tv"] * 25 + ["IOS "] * 5        # "IOS " is ios as the model reads it (lower, strip)
    platforms[30:32] = [None, ""]                     # context left out, as a null hour_of_day
    pq.write_table(table.set_column(table.schema.get_field_index(F.PLATFORM), F.PLATFORM,
                                    pa.array(platforms, pa.string())), path)
    _validate(config)
    report = _report(config)
    assert report["days"][str(RUN_DATE)]["unknown_platforms"] == {"tv": 25}
    assert report["days"][str(D1)]["unknown_platforms"] == {}
    assert (f"events partition ds={RUN_DATE}: platform values 'tv' (25 rows) are not ios, android or web: "
            f"6.25% of 400 rows, kept with the platform unknown (unknown_platform)") in report["warnings"]


def test_an_eval_day_below_eval_min_rows_fails_before_any_training(tmp_path):
    config = _setup(tmp_path, **{"validate.max_row_count_drift": 1.0})
    path = _events_file(config)
    pq.write_table(pq.read_table(path).slice(0, 150), path)
    problems = _problems(config)
    assert (f"eval day ds={RUN_DATE}: 150 rows, below eval.min_rows=200: too few to judge a model "
            f"(evaluate would refuse it after training)") in problems
    assert len(problems) == 1
    _validate(config.with_overrides({"eval.min_rows": 100}), run_id="small-ok")


def test_the_eval_day_bound_reads_raw_rows_not_the_window(tmp_path):
    """A training day below eval.min_rows is no eval day: the bound is not a training-day rule."""
    config = _setup(tmp_path, **{"validate.max_row_count_drift": 5.0})
    path = _events_file(config, D1)
    pq.write_table(pq.read_table(path).slice(0, 150), path)
    _validate(config)

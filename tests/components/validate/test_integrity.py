"""Days that are not what they claim, written the way upstream jobs really break, through the
validate CLI: a re-exported day, an eval day holding training rows, a re-delivered file, a
time-zone bug, label values that are not 0/1."""
from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from pipeline.config_sections import PROJECT_ROOT
from pipeline.contracts import features as F
from pipeline.paths import RunPaths
from tests.components.preprocess.helpers import FIRST_DAY, RUN_DATE, generate_raw
from tests.components.validate.cli import validate_cli
from tests.conftest import make_tiny_config

SMALL = {"generator.events_per_day": 400, "generator.items": 100, "generator.users": 150}
D1 = RUN_DATE - dt.timedelta(days=1)


def _events_dir(config, day):
    return config.data.raw_root / "events" / f"ds={day}"


def _rewrite(config, day, transform):
    """Replace a day's rows by `transform(rows)`, as one file the way an upstream job would."""
    folder = _events_dir(config, day)
    table = pq.read_table(sorted(folder.glob("*.parquet")))
    for part in folder.glob("*.parquet"):
        part.unlink()
    pq.write_table(transform(table), folder / "part-00000.parquet")


def _validate(tmp_path, config, day=RUN_DATE, run_id="r") -> tuple[int, str, dict]:
    """(exit code, stderr, report) of `python -m components.validate`."""
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(config.to_dict()))
    done = subprocess.run([sys.executable, "-m", "components.validate", "--config", str(params),
                           "--date", day.isoformat(), "--run-id", run_id],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    report = json.loads((RunPaths.for_run(config, day, run_id).validation_dir / "report.json").read_text())
    return done.returncode, done.stderr, report


def _setup(tmp_path, **extra):
    config = make_tiny_config(tmp_path, **{**SMALL, **extra})
    generate_raw(config)
    return config


def test_a_clean_window_records_an_order_independent_digest_per_day(tmp_path):
    config = _setup(tmp_path)
    code, err, report = _validate(tmp_path, config)
    assert code == 0, err[-2000:]
    digests = {day: stats["digest"] for day, stats in report["days"].items()}
    assert len(set(digests.values())) == 4
    _rewrite(config, D1, lambda t: t.take(pc.sort_indices(t, [(F.USER_ID, "descending")])))   # same rows, reordered
    code, err, report = _validate(tmp_path, config, run_id="again")
    assert code == 0, err[-2000:]
    assert report["days"][str(D1)]["digest"] == digests[str(D1)]
    history = RunPaths.for_run(config, RUN_DATE, "r").validation_history_dir
    assert json.loads((history / f"ds={RUN_DATE}.json").read_text())["digest"] == digests[str(RUN_DATE)]


def test_an_eval_day_re_exported_from_the_day_before_is_refused_naming_both(tmp_path):
    config = _setup(tmp_path)
    shutil.rmtree(_events_dir(config, RUN_DATE))
    shutil.copytree(_events_dir(config, D1), _events_dir(config, RUN_DATE))
    code, err, report = _validate(tmp_path, config)
    assert code == 2 and not report["passed"]
    assert f"events partitions ds={D1} and ds={RUN_DATE} hold the same event ids" in err
    assert f"eval day ds={RUN_DATE}: 400 of its 400 event ids (100.0%) are also in training partition(s) " \
           f"ds={D1} (400)" in err


def test_an_eval_day_sharing_some_training_rows_is_refused_above_the_bound(tmp_path):
    config = _setup(tmp_path)
    train_rows = pq.read_table(sorted(_events_dir(config, D1).glob("*.parquet")))
    _rewrite(config, RUN_DATE, lambda t: pa.concat_tables([t.slice(20), train_rows.slice(0, 20)]))
    code, err, _ = _validate(tmp_path, config)
    assert code == 2
    assert f"eval day ds={RUN_DATE}: 20 of its 400 event ids (5.0%) are also in training partition(s) ds={D1}" in err
    loose = config.with_overrides({"validate.max_eval_overlap": 0.1, "validate.max_misdated_fraction": 0.1})
    code, err, _ = _validate(tmp_path, loose, run_id="loose")
    assert code == 0, err[-2000:]


def test_a_day_re_exported_from_an_earlier_validated_day_is_refused(tmp_path):
    config = _setup(tmp_path, **{"window.train_days": 1})
    generate_raw(config, days=5)
    for day in (RUN_DATE - dt.timedelta(days=2), D1, RUN_DATE):       # history holds 11-02 .. 11-04
        assert _validate(tmp_path, config, day, run_id=f"n{day}")[0] == 0
    nxt = RUN_DATE + dt.timedelta(days=1)
    shutil.rmtree(_events_dir(config, nxt))
    shutil.copytree(_events_dir(config, RUN_DATE - dt.timedelta(days=2)), _events_dir(config, nxt))
    code, err, _ = _validate(tmp_path, config, nxt, run_id="copy")
    assert code == 2
    assert f"events partitions ds={RUN_DATE - dt.timedelta(days=2)} and ds={nxt} hold the same event ids" in err


def test_a_re_delivered_file_fails_the_day_and_a_few_repeats_only_warn(tmp_path):
    config = _setup(tmp_path)
    folder = _events_dir(config, D1)
    original = sorted(folder.glob("*.parquet"))[0]
    pq.write_table(pq.read_table(original).slice(0, 120), folder / "part-99999.parquet")  # 30 % again
    code, err, report = _validate(tmp_path, config)
    assert code == 2
    assert (f"events partition ds={D1}: 120 rows repeat an earlier event_id (a re-delivered file?): 23.08% of "
            f"520 rows, above validate.max_duplicate_fraction=1.00%") in err
    assert report["days"][str(D1)]["duplicate_event_ids"] == 120
    pq.write_table(pq.read_table(original).slice(0, 2), folder / "part-99999.parquet")
    code, err, report = _validate(tmp_path, config, run_id="few")
    assert code == 0, err[-2000:]
    assert any(f"ds={D1}: 2 rows repeat an earlier event_id" in w and "rejected" in w for w in report["warnings"])


def test_rows_shifted_by_a_time_zone_bug_are_counted_and_fail_the_day(tmp_path):
    config = _setup(tmp_path)

    def shift(table):                      # every third row's event_ts 8 h early, hour_of_day untouched
        ts = table.column(F.EVENT_TS).to_pylist()
        ts = [t - dt.timedelta(hours=8) if i % 3 == 0 else t for i, t in enumerate(ts)]
        return table.set_column(table.schema.get_field_index(F.EVENT_TS), F.EVENT_TS,
                                pa.array(ts, table.schema.field(F.EVENT_TS).type))

    _rewrite(config, RUN_DATE, shift)
    code, err, report = _validate(tmp_path, config)
    day = report["days"][str(RUN_DATE)]
    assert code == 2
    assert day["event_ts_outside_partition"] > 0 and day["hour_mismatch"] > 0
    assert day["event_ts_outside_partition"] + day["hour_mismatch"] == 134
    assert (f"events partition ds={RUN_DATE}: {day['event_ts_outside_partition']} rows have event_ts outside the "
            f"day and {day['hour_mismatch']} an hour_of_day that is not event_ts's UTC hour") in err
    assert "above validate.max_misdated_fraction=1.00%" in err


def test_label_two_on_every_click_is_named_even_without_a_previous_day(tmp_path):
    config = _setup(tmp_path)
    _rewrite(config, FIRST_DAY, lambda t: t.set_column(         # the window's first day: no drift baseline
        t.schema.get_field_index(F.LABEL), F.LABEL, pc.multiply(t.column(F.LABEL), 2)))
    code, err, report = _validate(tmp_path, config)
    clicks = report["days"][str(FIRST_DAY)]["non_binary_labels"]["2"]
    assert code == 2 and clicks > 0
    assert f"ds={FIRST_DAY}: no previous-day report, drift not checked" in report["warnings"]
    assert (f"events partition ds={FIRST_DAY}: label values 2 ({clicks} rows) are not 0/1: "
            f"{clicks / 400:.2%} of 400 rows, above preprocess.max_rejected_fraction=1.00%") in err


def test_a_full_artifact_volume_is_one_line_from_the_validate_cli(tmp_path):
    from tests.small_disk import fill, small_disk

    with small_disk(tmp_path / "artifacts", 256 * 1024) as disk:
        config = _setup(tmp_path, **{"data.artifact_root": str(disk)})
        fill(disk)
        done = validate_cli(tmp_path, config, RUN_DATE)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        (line,) = [x for x in done.stderr.splitlines() if "disk full" in x]
        assert "No space left on device" in line and "free space there and retry" in line

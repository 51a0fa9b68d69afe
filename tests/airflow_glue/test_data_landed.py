"""The data-landed wait: the marker rule on real folders, and the real trigger polling them."""
import asyncio
import datetime as dt

import pytest

from pipeline import orchestration as orch
from pipeline.contracts.inputs import SUCCESS_MARKER, mark_landed, unlanded_partitions
from pipeline.datagen import generate
from pipeline.paths import events_partition, items_partition
from tests.dags.conftest import AIRFLOW_ENV  # noqa: F401  (AIRFLOW_HOME before airflow is imported)

D = dt.date(2026, 11, 4)


def spec_for(root, train_days=2, day=D) -> dict:
    overrides = {"data.raw_root": str(root), "window.train_days": train_days}
    return orch.RunSpec(day.isoformat(), "t", overrides).to_dict()


def paths_for(root, train_days=2):
    return orch.RunSpec.from_dict(spec_for(root, train_days)).load()[1]


def make_partitions(root, days, items_days=()):
    for day in days:
        events_partition(root, day).mkdir(parents=True)
    for day in items_days:
        items_partition(root, day).mkdir(parents=True)


def test_generator_marks_every_partition_it_writes(tmp_path):
    generate(tmp_path, D - dt.timedelta(days=2), 3, users=100, items=100, events_per_day=200, with_ceiling=False)
    assert unlanded_partitions(paths_for(tmp_path)) == []
    for day in (D, D - dt.timedelta(days=2)):
        assert (events_partition(tmp_path, day) / SUCCESS_MARKER).exists()
        assert (items_partition(tmp_path, day) / SUCCESS_MARKER).exists()


def test_unmarked_partitions_are_named_oldest_first(tmp_path):
    days = [D - dt.timedelta(days=2), D - dt.timedelta(days=1), D]
    make_partitions(tmp_path, days, items_days=[D])
    mark_landed(events_partition(tmp_path, days[1]))
    assert unlanded_partitions(paths_for(tmp_path)) == [
        "events ds=2026-11-02", "events ds=2026-11-04", "items ds=2026-11-04"]


def test_the_items_snapshot_waited_for_is_the_one_the_run_reads(tmp_path):
    """No snapshot for D: the latest earlier one with files (validate's rule) must be marked,
    not just any marked one: an unmarked D-1 is not skipped for a marked D-2."""
    days = [D - dt.timedelta(days=2), D - dt.timedelta(days=1), D]
    make_partitions(tmp_path, days)
    for day in days:
        mark_landed(events_partition(tmp_path, day))
    assert unlanded_partitions(paths_for(tmp_path)) == ["items ds<=2026-11-04"]
    for day in days[:2]:
        items_partition(tmp_path, day).mkdir(parents=True)
        (items_partition(tmp_path, day) / "items.parquet").write_bytes(b"")   # selection looks at names only
    mark_landed(items_partition(tmp_path, days[0]))
    assert unlanded_partitions(paths_for(tmp_path)) == ["items ds=2026-11-03"]
    mark_landed(items_partition(tmp_path, days[1]))
    assert unlanded_partitions(paths_for(tmp_path)) == []


async def _first_event(trigger):
    async for event in trigger.run():
        return event.payload


def test_trigger_fires_when_the_last_marker_is_written(tmp_path):
    from airflow_glue.data_landed import DataLandedTrigger

    days = [D - dt.timedelta(days=1), D]
    make_partitions(tmp_path, days, items_days=[D])
    for folder in (events_partition(tmp_path, days[0]), items_partition(tmp_path, D)):
        mark_landed(folder)
    deadline = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)).isoformat()
    trigger = DataLandedTrigger(spec_for(tmp_path, 1), 0.05, deadline)
    assert DataLandedTrigger(**trigger.serialize()[1]).serialize() == trigger.serialize()

    async def land_late():
        await asyncio.sleep(0.5)
        mark_landed(events_partition(tmp_path, D))

    async def both():
        _, event = await asyncio.gather(land_late(), _first_event(trigger))
        return event

    assert asyncio.run(both()) == {"status": "landed"}


def test_trigger_times_out_naming_the_missing_partitions_and_the_task_fails(tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_glue.data_landed import DataLandedTrigger, WaitForData

    make_partitions(tmp_path, [D - dt.timedelta(days=1), D], items_days=[D])
    deadline = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=0.3)).isoformat()
    event = asyncio.run(_first_event(DataLandedTrigger(spec_for(tmp_path, 1), 0.05, deadline)))
    assert event == {"status": "timeout",
                     "waiting": ["events ds=2026-11-03", "events ds=2026-11-04", "items ds=2026-11-04"]}
    op = WaitForData(task_id="wait", spec_task_id="resolve_run", wait_h=8, poke_s=0.05)
    with pytest.raises(AirflowFailException, match="no _SUCCESS marker for events ds=2026-11-03, events ds=2026-11-04"):
        op.execute_complete({}, event)


class _TI:
    def __init__(self, spec):
        self.spec = spec

    def xcom_pull(self, task_ids):
        return self.spec


def test_a_recent_day_defers_and_a_long_past_one_is_left_to_validate(tmp_path, caplog):
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_glue.data_landed import WaitForData, landing_deadline

    assert landing_deadline("2026-11-04", 8).isoformat() == "2026-11-05T08:00:00+00:00"
    op = WaitForData(task_id="wait", spec_task_id="resolve_run", wait_h=8, poke_s=60)
    today = dt.datetime.now(dt.UTC).date()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute({"ti": _TI(spec_for(tmp_path, 1, today))})
    assert deferred.value.trigger.deadline == landing_deadline(today.isoformat(), 8).isoformat()
    assert deferred.value.method_name == "execute_complete"
    with caplog.at_level("WARNING"):
        assert op.execute({"ti": _TI(spec_for(tmp_path, 1))}) is None       # 2026-11-04: long past
    assert "the landing deadline 2026-11-05T08:00:00+00:00 has passed" in caplog.text

"""Wait for a run's raw partitions to land: a deferrable operator and the trigger it defers to.

Why deferrable: the nightly run starts at 02:00 whether or not the upstream export finished;
a waiting task must hold no worker slot for hours, so the wait runs in the triggerer as one
coroutine (Airflow 3's idiom), and the task fails at the timeout naming every partition still
missing instead of failing later in validate. The rule of what "landed" means lives in
`pipeline.contracts.inputs.unlanded_partitions`; this module only waits on it.

How long: until `schedule.data_wait_h` hours after the data date ends (midnight UTC: the
partitions' days), not for a fixed time after the run starts. So the 02:00 nightly waits
until, say, 08:00 for the day that just ended, while a backfill or a late run of a long-past
date does not wait at all: its data is as complete as it will get (older data may predate the
markers), and validate judges the files themselves.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from airflow.triggers.base import BaseTrigger, TriggerEvent

log = logging.getLogger(__name__)


def _unlanded(spec: dict) -> list[str]:
    from pipeline.contracts.inputs import unlanded_partitions  # pyarrow: not at DAG parse time
    from pipeline.orchestration import RunSpec

    _, paths = RunSpec.from_dict(spec).load()
    return unlanded_partitions(paths)


def landing_deadline(run_date: str, wait_h: float) -> dt.datetime:
    """When a run stops waiting for its data: `wait_h` hours after the data date's partition
    closes (midnight UTC: partitions are UTC days whatever the schedule's zone)."""
    day_end = dt.datetime.combine(dt.date.fromisoformat(run_date) + dt.timedelta(days=1), dt.time(), dt.UTC)
    return day_end + dt.timedelta(hours=wait_h)


class DataLandedTrigger(BaseTrigger):
    """Polls the completion markers of one run's partitions until all are there or time is up."""

    def __init__(self, spec: dict, poke_s: float, deadline: str):
        super().__init__()
        self.spec, self.poke_s, self.deadline = spec, poke_s, deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.DataLandedTrigger",
                {"spec": self.spec, "poke_s": self.poke_s, "deadline": self.deadline})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = dt.datetime.fromisoformat(self.deadline)
        while True:
            waiting = await asyncio.to_thread(_unlanded, self.spec)
            if not waiting:
                yield TriggerEvent({"status": "landed"})
                return
            if dt.datetime.now(dt.UTC) >= deadline:
                yield TriggerEvent({"status": "timeout", "waiting": waiting})
                return
            self.log.info("waiting for %s", ", ".join(waiting))
            await asyncio.sleep(self.poke_s)


class WaitForData(BaseOperator):
    """Returns at once when the run's partitions are marked landed, else defers until they are;
    at the timeout it fails (no retry: a retry would only wait again) naming what is missing."""

    def __init__(self, *, spec_task_id: str, wait_h: float, poke_s: float, **kwargs):
        super().__init__(**kwargs)
        self.spec_task_id, self.wait_h, self.poke_s = spec_task_id, wait_h, poke_s

    def execute(self, context) -> None:
        spec = context["ti"].xcom_pull(task_ids=self.spec_task_id)
        waiting = _unlanded(spec)
        if not waiting:
            log.info("data date %s: every partition landed", spec["run_date"])
            return
        deadline = landing_deadline(spec["run_date"], self.wait_h)
        left = (deadline - dt.datetime.now(dt.UTC)).total_seconds()
        if left <= 0:
            log.warning("not waiting: the landing deadline %s has passed; validate checks the files. Unmarked: %s",
                        deadline.isoformat(), ", ".join(waiting))
            return
        log.info("data date %s: waiting until %s for %s", spec["run_date"], deadline.isoformat(), ", ".join(waiting))
        self.defer(trigger=DataLandedTrigger(spec, self.poke_s, deadline.isoformat()),
                   method_name="execute_complete", timeout=dt.timedelta(seconds=left + 10 * self.poke_s + 60))

    def execute_complete(self, context, event: dict) -> None:
        if event["status"] != "landed":
            raise AirflowFailException(
                f"data not landed by the deadline ({self.wait_h:g} h after the data date ended): no _SUCCESS "
                f"marker for {', '.join(event['waiting'])}")
        log.info("every partition landed")

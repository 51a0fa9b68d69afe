"""The nightly deadline alert: a warning when the night's model is not served by a set time.

Why an Airflow Deadline Alert (experimental in Airflow 3.3, hence off unless
`schedule.serve_deadline_minutes` is set): the scheduler itself tracks the deadline, so a run
stuck in a sensor, a queue or a hung gang is reported while it is still running, not when
someone looks in the morning. The callback runs in the triggerer; it logs one line on-call can
alert on and is the place to add a pager or chat notifier.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


async def serve_deadline_missed(minutes: int, context: dict | None = None, **_: object) -> None:
    dag_run = (context or {}).get("dag_run") or {}
    run_id = dag_run.get("run_id") if isinstance(dag_run, dict) else getattr(dag_run, "run_id", None)
    log.warning("RECO DEADLINE run=%s: the nightly model is not served %d minutes after the run was queued",
                run_id, minutes)

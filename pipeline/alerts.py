"""The lines on-call greps for: `RECO FAILED` on every failed try, `RECO RETRY` at the start of
every retry, `RECO DEADLINE` when the night's model is not served by a set time.

Why an Airflow Deadline Alert (experimental in Airflow 3.3, hence off unless
`schedule.serve_deadline_minutes` is set): the scheduler itself tracks the deadline, so a run
stuck in a sensor, a queue or a hung gang is reported while it is still running, not when
someone looks in the morning. The callback runs in the triggerer; it logs one line on-call can
alert on and is the place to add a pager or chat notifier.
"""
from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)
_NAMED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): ")


async def serve_deadline_missed(minutes: int, context: dict | None = None, **_: object) -> None:
    dag_run = (context or {}).get("dag_run") or {}
    run_id = dag_run.get("run_id") if isinstance(dag_run, dict) else getattr(dag_run, "run_id", None)
    log.warning("RECO DEADLINE run=%s: the nightly model is not served %d minutes after the run was queued",
                run_id, minutes)


def failure_line(dag_id: str, run_id: str, task_id: str, try_number: int, retrying: bool,
                 exception: BaseException | None) -> str:
    """One line with the first reason on it and how many more there are: `grep "RECO FAILED"`
    must show what broke, not a heading whose reasons are on the next lines."""
    lines = [line.strip().lstrip("- ").strip() for line in str(exception or "").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        first, more = ("no exception recorded: the task process died or was killed (a scheduler or "
                       "worker restart, the OOM killer); its log says how far it got"), 0
    elif lines[0].endswith(":") and len(lines) > 1:            # "input validation failed:" + reasons
        first, more = f"{lines[0]} {lines[1]}", len(lines) - 2
    else:
        first, more = lines[0], len(lines) - 1
    if exception is not None and not _NAMED.match(first):     # a wrapper's text names its cause already
        first = f"{type(exception).__name__}: {first}"
    extra = f" (+{more} more)" if more else ""
    return (f"RECO FAILED dag={dag_id} run={run_id} task={task_id} try={try_number}"
            f"{' (will retry)' if retrying else ''}: {first}{extra}")


def retry_line(dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
    """What a retry says about the try before it: a try whose process was killed (a scheduler or
    worker restart) left no RECO FAILED line of its own, so this is the only trace on-call greps."""
    return (f"RECO RETRY dag={dag_id} run={run_id} task={task_id} try={try_number}: try {try_number - 1} "
            f"did not succeed; its RECO FAILED line says why, and without one its process died or was "
            f"killed (a scheduler or worker restart, the OOM killer)")

"""The DAG's timetable, registered with Airflow as a plugin (setup.py's `airflow.plugins` entry
point, so every Airflow process that has the package installed knows it: scheduler, API server,
DAG processor, workers, pods).

Why a timetable of our own: on-call tells nights apart by their data date, and Airflow's runs list
shows the run id but not the conf or any note. Airflow names a scheduled run after the moment it
runs (`scheduled__2026-11-06T02:00:00+00:00`, which processes 11-05); this timetable puts the data
date first (`scheduled__data-2026-11-05__2026-11-06T02:00:00+00:00`), for scheduled runs and for
backfills, by the same rule the run's tasks use (`orchestration.data_date`). A manual run's data
date is its form's `run_date`, which Airflow does not pass when it names the run: a manual run
keeps Airflow's name, and its date shows in the list's conf column.
"""
from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from airflow.timetables.interval import CronDataIntervalTimetable
from airflow.utils.types import DagRunType

from pipeline.orchestration import last_complete_day


class NightlyTimetable(CronDataIntervalTimetable):
    """Airflow's cron data-interval timetable whose run ids start with the data date."""

    def generate_run_id(self, *, run_type: DagRunType, run_after, data_interval, **extra) -> str:
        if run_type == DagRunType.MANUAL or data_interval is None:
            return super().generate_run_id(run_type=run_type, run_after=run_after, data_interval=data_interval,
                                           **extra)
        return f"{run_type.value}__data-{last_complete_day(data_interval.end)}__{run_after.isoformat()}"


class RecommenderPlugin(AirflowPlugin):
    name = "recommender"
    timetables = [NightlyTimetable]

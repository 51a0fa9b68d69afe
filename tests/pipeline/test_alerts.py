"""The on-call line: the first reason on the RECO FAILED line itself, and how many more."""
from __future__ import annotations

from pipeline.alerts import failure_line
from pipeline.contracts.inputs import ValidationError


def test_the_failure_line_carries_the_first_reason_and_counts_the_rest():
    err = ValidationError(["events ds=2026-11-03: no Parquet files", "items: column price is string",
                           "label rate drift 106 %"])
    line = failure_line("recommender_nightly", "manual__1", "validate", 1, False, err)
    assert line == ("RECO FAILED dag=recommender_nightly run=manual__1 task=validate try=1: ValidationError: "
                    "input validation failed: events ds=2026-11-03: no Parquet files (+2 more)")
    assert "\n" not in line


def test_a_wrapped_refusal_keeps_its_inner_name_and_a_retry_says_so():
    from airflow.exceptions import AirflowFailException

    err = AirflowFailException("StageError: /ssd has 1.2 GB free, the run needs 3.4 GB")
    line = failure_line("d", "r", "stage", 2, True, err)
    assert line.endswith("try=2 (will retry): StageError: /ssd has 1.2 GB free, the run needs 3.4 GB")


def test_a_try_that_left_no_exception_says_the_process_died():
    line = failure_line("d", "r", "train", 1, True, None)
    assert "task=train try=1 (will retry): no exception recorded: the task process died" in line


def test_a_retry_names_the_try_it_replaces():
    from pipeline.alerts import retry_line

    line = retry_line("recommender_nightly", "manual__1", "train", 2)
    assert line.startswith("RECO RETRY dag=recommender_nightly run=manual__1 task=train try=2: try 1 did not succeed")
    assert "scheduler or worker restart" in line

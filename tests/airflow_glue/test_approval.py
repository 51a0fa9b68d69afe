"""Four eyes on a forced push, and every decision recorded with who, what, why and when.

In process: the operator's resume (`execute_complete`) as Airflow 3.3 calls it with the answer
an approver gave, on a two-task DAG (approval >> push). The live HITL round trips (Approve after
a refused self-approval, Reject) run in tests/dags/test_scheduler_e2e.py.
"""
from __future__ import annotations

import datetime as dt
import logging
import types
import uuid

import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException, DownstreamTasksSkipped, TaskAwaitingInput

from airflow_glue import approval as approval_module
from airflow_glue.approval import TIMED_OUT, ForcedPushApproval, decision, self_approval

AT = dt.datetime(2026, 11, 6, 7, 30, tzinfo=dt.UTC)
REFUSAL = "admin asked for this forced push and cannot approve it (four eyes)"


def _event(option: str, user: str | None, reason: str = "", timedout: bool = False) -> dict:
    return {"chosen_options": [option], "params_input": {"reason": reason}, "responded_at": AT,
            "responded_by_user": {"id": user, "name": user} if user else None, "timedout": timedout}


def test_the_requester_cannot_approve_his_own_forced_push():
    assert self_approval(_event("Approve", "admin"), requester="admin") == REFUSAL
    assert decision(_event("Approve", "admin"), "admin", REFUSAL) == {
        "decision": "refused", "by": "admin", "requested_by": "admin", "reason": REFUSAL, "at": AT.isoformat()}


def test_another_person_approves_or_rejects_with_a_reason():
    assert self_approval(_event("Approve", "approver", "INC-9 checked"), requester="admin") is None
    assert decision(_event("Approve", "approver", "INC-9 checked"), "admin")["by"] == "approver"
    rejected = _event("Reject", "admin", "  CTR looks wrong ")
    assert self_approval(rejected, requester="admin") is None      # withdrawing your own request is fine
    assert decision(rejected, "admin") == {"decision": "Reject", "by": "admin", "requested_by": "admin",
                                           "reason": "CTR looks wrong", "at": AT.isoformat()}
    assert decision(_event("Reject", None, timedout=True), "admin")["reason"] == TIMED_OUT


class _TI:
    """What the operator uses of Airflow's runtime task instance."""

    def __init__(self):
        self.id, self.map_index, self.xcom = uuid.uuid4(), -1, {}

    def xcom_push(self, key, value):
        self.xcom[key] = value


@pytest.fixture
def answered(monkeypatch):
    """(operator, context, ti, reopened requests): the approval task of a run `admin` forced."""
    with DAG("approval_test", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)):
        op = ForcedPushApproval(task_id="approve_forced_push", spec_task_id="resolve_run", eval_task_id="evaluate",
                                enabled=True, response_timeout=dt.timedelta(hours=4))
        op >> EmptyOperator(task_id="push")
    ti = _TI()
    context = {"ti": ti, "task_instance": ti, "task": op,
               "dag_run": types.SimpleNamespace(triggering_user_name="admin")}
    reopened = []
    monkeypatch.setattr(approval_module, "upsert_hitl_detail", lambda **kw: reopened.append(kw))
    return op, context, ti, reopened


def test_an_approve_is_logged_and_returned_for_the_summary(answered, caplog):
    op, context, ti, reopened = answered
    with caplog.at_level(logging.INFO, logger="airflow_glue.approval"):
        result = op.execute_complete(context, _event("Approve", "approver", "INC-9 checked"))
    assert result["chosen_options"] == ["Approve"] and not reopened
    assert result["decision"] == {"decision": "Approve", "by": "approver", "requested_by": "admin",
                                  "reason": "INC-9 checked", "at": AT.isoformat(), "refused": []}
    assert "FORCED PUSH APPROVED by approver (requested by admin): INC-9 checked" in caplog.text


def test_a_reject_skips_the_push_and_is_still_recorded(answered, caplog):
    """Airflow ends a Reject with DownstreamTasksSkipped, before any return value: the record is
    the task's XCom all the same, which the summary reads."""
    op, context, ti, _ = answered
    with caplog.at_level(logging.INFO, logger="airflow_glue.approval"), pytest.raises(DownstreamTasksSkipped) as skip:
        op.execute_complete(context, _event("Reject", "approver", "CTR looks wrong"))
    assert [getattr(t, "task_id", t) for t in skip.value.tasks] == ["push"]
    assert ti.xcom["return_value"]["decision"] == {"decision": "Reject", "by": "approver", "requested_by": "admin",
                                                   "reason": "CTR looks wrong", "at": AT.isoformat(), "refused": []}
    assert ti.xcom["return_value"]["chosen_options"] == ["Reject"]
    assert "FORCED PUSH REJECTED by approver: CTR looks wrong; the push is skipped" in caplog.text


def test_no_answer_in_time_is_a_recorded_reject(answered, caplog):
    op, context, ti, _ = answered
    with caplog.at_level(logging.INFO, logger="airflow_glue.approval"), pytest.raises(DownstreamTasksSkipped):
        op.execute_complete(context, _event("Reject", None, timedout=True))
    assert ti.xcom["return_value"]["decision"]["by"] is None
    assert ti.xcom["return_value"]["decision"]["reason"] == TIMED_OUT
    assert f"FORCED PUSH REJECTED: {TIMED_OUT}; the push is skipped" in caplog.text


def test_a_refused_self_approval_leaves_the_request_open_until_its_deadline_then_is_recorded(answered, caplog):
    """Without push.approvers anyone may answer; the requester's own Approve must not use the
    request up: it is refused, the request opened again (same deadline), and the next answer's
    record carries the refusal."""
    op, context, ti, reopened = answered
    deadline = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=3)).isoformat()
    with caplog.at_level(logging.INFO, logger="airflow_glue.approval"), pytest.raises(TaskAwaitingInput) as parked:
        op.execute_complete(context, _event("Approve", "admin", "trust me"), deadline=deadline)
    assert f"FORCED PUSH REFUSED: {REFUSAL}; the request stays open for someone else" in caplog.text
    assert len(reopened) == 1 and reopened[0]["ti_id"] == ti.id           # clears the answer
    assert parked.value.method_name == "execute_complete"
    assert dt.timedelta(hours=2, minutes=59) < parked.value.timeout <= dt.timedelta(hours=3)
    refusal = {"decision": "refused", "by": "admin", "requested_by": "admin", "reason": REFUSAL,
               "at": AT.isoformat()}
    assert parked.value.kwargs == {"deadline": deadline, "refused": [refusal]}
    assert "return_value" not in ti.xcom
    # Airflow resumes the task with the next answer and the parked kwargs.
    result = op.execute_complete(context, _event("Approve", "approver", "INC-9 checked"), **parked.value.kwargs)
    assert result["decision"]["decision"] == "Approve" and result["decision"]["refused"] == [refusal]


def test_the_request_goes_to_the_approvers_but_never_the_requester_and_carries_its_deadline(monkeypatch):
    """With push.approvers, Airflow refuses anyone not assigned (HTTP 403): the requester is left
    out even when listed. The parked task carries the deadline a reopened request keeps."""
    from airflow.providers.standard.operators import hitl

    requests = []
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **kw: requests.append(kw))
    op = ForcedPushApproval(task_id="approve_forced_push", spec_task_id="resolve_run", eval_task_id="evaluate",
                            enabled=True, approvers=("admin", "approver"), response_timeout=dt.timedelta(hours=4))
    evaluation = {"blessed": False, "reasons": ["AUC 0.61 < min_auc 0.99"], "metrics_path": "m",
                  "report_path": "r", "candidate_auc": 0.61, "baseline_auc": None, "baseline_version": None,
                  "examples": 100, "popularity_auc": 0.6}
    spec = {"run_date": "2026-11-05", "run_id": "manual__1", "force_push": True, "force_reason": "hotfix"}
    ti = _TI()
    ti.xcom_pull = lambda task_ids: {"resolve_run": spec, "evaluate": evaluation}[task_ids]
    before = dt.datetime.now(dt.UTC)
    with pytest.raises(TaskAwaitingInput) as parked:
        op.execute({"ti": ti, "task_instance": ti, "dag_run": types.SimpleNamespace(triggering_user_name="admin")})
    assert requests[0]["assigned_users"] == [{"id": "approver", "name": "approver"}]
    assert "Requested by: admin" in requests[0]["body"] and "AUC 0.61 < min_auc 0.99" in requests[0]["body"]
    deadline = dt.datetime.fromisoformat(parked.value.kwargs["deadline"])
    assert before + dt.timedelta(hours=4) <= deadline <= dt.datetime.now(dt.UTC) + dt.timedelta(hours=4)
    # push.approvers holding only the requester: no one may approve, the task fails saying so.
    alone = ForcedPushApproval(task_id="approve_alone", spec_task_id="resolve_run", eval_task_id="evaluate",
                               enabled=True, approvers=("admin",))
    with pytest.raises(AirflowFailException, match="holds no one but the requester 'admin'"):
        alone.execute({"ti": ti, "task_instance": ti, "dag_run": types.SimpleNamespace(triggering_user_name="admin")})

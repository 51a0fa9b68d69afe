"""A forced push waits for a person: Airflow's human-in-the-loop approval, only when it is needed.

Why: `force_push` serves a model the gate refused; the trigger form alone lets one click do it
at 2 a.m. The run therefore parks in Airflow's Required Actions (HITL, `awaiting_input`) showing
the gate's NOT_BLESSED reasons and the stated reason; Approve lets the push run, Reject or the
response timeout (whose default is Reject) skips it. A BLESSED run, a run without force_push, or
a deployment that turns `push.force_needs_approval` off (automation) passes straight through.

Four eyes: the person who triggered the forced run cannot approve it. `push.approvers` assigns
the request to named users other than the requester (Airflow then refuses anyone else's answer,
HTTP 403). Without `push.approvers` Airflow lets anyone answer and has no way to leave one user
out, so the requester's own Approve reaches the operator: it is refused (logged and recorded)
and the request is opened again, with its original deadline, for someone else to answer.
Airflow's HITL API would otherwise have consumed it (one answer per request, HTTP 409 after).

Every decision is logged on one line and recorded (`summary.json["approval"]`): who, what, why,
when, and any refused self-approval before it. On Reject Airflow's ApprovalOperator skips the
push by raising `DownstreamTasksSkipped`, which ends the task before it returns a value, so the
record is pushed as the task's XCom before that exception goes on.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Param
from airflow.sdk.exceptions import AirflowFailException, DownstreamTasksSkipped, TaskAwaitingInput
from airflow.sdk.execution_time.hitl import upsert_hitl_detail

from pipeline.results import EvalResult

log = logging.getLogger(__name__)

TIMED_OUT = "no answer within push.approval_timeout_s: Airflow applied the default, Reject"


def approval_body(spec: dict, evaluation: dict) -> str:
    """What the approver reads: the refusal, the candidate against the served model, the reason."""
    ev = EvalResult.from_dict(evaluation)
    baseline = f"{ev.baseline_auc:.4f} (version {ev.baseline_version})" if ev.baseline_auc is not None else "none"
    popularity = "none" if ev.popularity_auc is None else f"{ev.popularity_auc:.4f}"
    reasons = "\n".join(f"- {line}" for line in ev.reasons) or "- (none recorded)"
    return (f"**Forced push of the model trained for {spec['run_date']}** (run `{spec['run_id']}`)\n\n"
            f"The evaluation gate said **NOT_BLESSED**:\n{reasons}\n\n"
            f"Candidate AUC {ev.candidate_auc:.4f}; served model AUC {baseline}; "
            f"item popularity AUC {popularity}.\n\n"
            f"Reason given for forcing: *{spec.get('force_reason')}*\n\n"
            f"Report: `{ev.report_path}`")


def self_approval(event: dict[str, Any], requester: str | None) -> str | None:
    """Why this answer is refused (four eyes), or None: an Approve from the run's requester."""
    user = event.get("responded_by_user") or {}
    if requester and event.get("chosen_options") == [ApprovalOperator.APPROVE] \
            and requester in (user.get("name"), user.get("id")):
        return f"{requester} asked for this forced push and cannot approve it (four eyes)"
    return None


def _iso(when: Any) -> Any:
    return when.isoformat() if hasattr(when, "isoformat") else when


def decision(result: dict[str, Any], requester: str | None, refused: str | None = None) -> dict[str, Any]:
    """One answer as recorded: the decision, who gave it, who asked, why and when."""
    user = result.get("responded_by_user") or {}
    reason = ((result.get("params_input") or {}).get("reason") or "").strip() or None
    if result.get("timedout"):
        reason = TIMED_OUT
    return {"decision": "refused" if refused else result["chosen_options"][0],
            "by": user.get("name") or user.get("id"), "requested_by": requester,
            "reason": refused or reason, "at": _iso(result.get("responded_at"))}


def decision_line(record: dict[str, Any]) -> tuple[int, str]:
    """The one log line of an answer (level, text)."""
    if record["decision"] == "refused":
        return logging.WARNING, (f"FORCED PUSH REFUSED: {record['reason']}; the request stays open for "
                                 f"someone else")
    if record["decision"] == ApprovalOperator.APPROVE:
        return logging.INFO, (f"FORCED PUSH APPROVED by {record['by']} (requested by {record['requested_by']}): "
                              f"{record['reason'] or '(no reason given)'}")
    if record["by"] is None:
        return logging.WARNING, f"FORCED PUSH REJECTED: {record['reason']}; the push is skipped"
    return logging.WARNING, (f"FORCED PUSH REJECTED by {record['by']}: {record['reason'] or '(no reason given)'}"
                             f"; the push is skipped")


class ForcedPushApproval(ApprovalOperator):
    """Asks for approval only when the push is forced past a NOT_BLESSED gate."""

    def __init__(self, *, spec_task_id: str, eval_task_id: str, enabled: bool,
                 approvers: tuple[str, ...] = (), **kwargs):
        params = {**(kwargs.pop("params", None) or {}),
                  "reason": Param("", type="string", description="Why (recorded in the run's summary)")}
        super().__init__(subject="Serve a NOT_BLESSED recommender?", defaults="Reject", params=params, **kwargs)
        self.spec_task_id, self.eval_task_id, self.enabled = spec_task_id, eval_task_id, enabled
        self.approvers = tuple(approvers)

    def execute(self, context):
        spec = context["ti"].xcom_pull(task_ids=self.spec_task_id)
        evaluation = context["ti"].xcom_pull(task_ids=self.eval_task_id)
        if EvalResult.from_dict(evaluation).blessed or not spec.get("force_push"):
            log.info("no approval needed: the push is not forced past the gate")
            return None
        if not self.enabled:
            log.warning("forced push without approval (push.force_needs_approval is off): %s",
                        spec.get("force_reason"))
            return None
        requester = context["dag_run"].triggering_user_name
        others = [u for u in self.approvers if u != requester]
        if self.approvers and not others:
            raise AirflowFailException(f"four eyes: push.approvers {list(self.approvers)} holds no one but "
                                       f"the requester {requester!r}; the forced push is not pushed")
        self.assigned_users = [{"id": u, "name": u} for u in others] or None
        self.body = approval_body(spec, evaluation) + f"\n\nRequested by: {requester or 'unknown'}"
        try:
            return super().execute(context)
        except TaskAwaitingInput as parked:
            # The deadline travels with the parked task (its next_kwargs), so a request opened
            # again after a refused self-approval keeps it.
            parked.kwargs = {**(parked.kwargs or {}), "deadline": self.hitl_summary_extra.get("timeout_datetime")}
            raise

    @property
    def serialized_params(self) -> dict[str, dict[str, Any]]:
        """The approver's form holds the reason only: Airflow merges the run's form params into
        every task's params, and the HITL form would otherwise ask the approver for all of them."""
        return {"reason": self.params.get_param("reason").serialize()}

    def execute_complete(self, context, event: dict[str, Any], deadline: str | None = None,
                         refused: list[dict[str, Any]] | None = None) -> Any:
        requester = context["dag_run"].triggering_user_name
        refused = list(refused or [])
        if "error" not in event and (why := self_approval(event, requester)):
            self._reopen(context, decision(event, requester, why), deadline, refused)
        record = {**decision(event, requester), "refused": refused} if "error" not in event else None
        try:
            result = super().execute_complete(context=context, event=event)
        except DownstreamTasksSkipped:
            # Reject: Airflow skips the push by raising this before the task returns anything.
            context["ti"].xcom_push(key="return_value", value={**_answer(event), "decision": record})
            log.log(*decision_line(record))
            raise
        log.log(*decision_line(record))
        return {**result, "decision": record}

    def _reopen(self, context, record: dict[str, Any], deadline: str | None, refused: list[dict[str, Any]]):
        """Refuse the requester's own Approve and wait again for someone else's answer: upserting
        the request of an answered task instance clears its answer (Airflow's execution API), and
        parking again (until the original deadline) makes it answerable."""
        log.log(*decision_line(record))
        upsert_hitl_detail(ti_id=context["task_instance"].id, options=self.options, subject=self.subject,
                           body=self.body, defaults=self.defaults, multiple=self.multiple,
                           params=self.serialized_params, assigned_users=self.assigned_users)
        timeout = self.response_timeout
        if deadline:
            timeout = max(dt.datetime.fromisoformat(deadline) - dt.datetime.now(dt.UTC), dt.timedelta(seconds=1))
        raise TaskAwaitingInput(method_name="execute_complete", timeout=timeout,
                                kwargs={"deadline": deadline, "refused": [*refused, record]})


def _answer(event: dict[str, Any]) -> dict[str, Any]:
    return {k: event.get(k) for k in ("chosen_options", "params_input", "responded_at", "responded_by_user")}

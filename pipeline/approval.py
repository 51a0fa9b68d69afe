"""A forced push waits for a person: Airflow's human-in-the-loop approval, only when it is needed.

Why: `force_push` serves a model the gate refused; the trigger form alone lets one click do it
at 2 a.m. The run therefore parks in Airflow's Required Actions (HITL, `awaiting_input`) showing
the gate's NOT_BLESSED reasons and the stated reason; Approve lets the push run, Reject or the
response timeout (whose default is Reject) skips it. A BLESSED run, a run without force_push, or
a deployment that turns `push.force_needs_approval` off (automation) passes straight through.

Four eyes: the person who triggered the forced run cannot approve it. `push.approvers` assigns
the request to named users (Airflow then refuses anyone else's answer, HTTP 403); whoever
answers, an Approve from the requester counts as a Reject, logged as refused. Every decision is
logged with who and why and returned to the summary (`summary.json["approval"]`).
"""
from __future__ import annotations

import logging
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Param
from airflow.sdk.exceptions import AirflowFailException

from pipeline.results import EvalResult

log = logging.getLogger(__name__)


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


def four_eyes(event: dict[str, Any], requester: str | None) -> tuple[dict[str, Any], str | None]:
    """(the event to act on, why it was refused): an Approve from the run's requester is a Reject."""
    user = event.get("responded_by_user") or {}
    if requester and event.get("chosen_options") == [ApprovalOperator.APPROVE] and user.get("id") == requester:
        return ({**event, "chosen_options": [ApprovalOperator.REJECT]},
                f"{requester} asked for this forced push and cannot approve it (four eyes)")
    return event, None


def decision(result: dict[str, Any], requester: str | None, refused: str | None) -> dict[str, Any]:
    """What the summary records of the approval: the decision, who, when and why."""
    user = result.get("responded_by_user") or {}
    reason = ((result.get("params_input") or {}).get("reason") or "").strip() or None
    when = result.get("responded_at")
    return {"decision": "refused" if refused else result["chosen_options"][0], "by": user.get("name"),
            "requested_by": requester, "reason": refused or reason,
            "at": when.isoformat() if hasattr(when, "isoformat") else when}


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
        return super().execute(context)

    @property
    def serialized_params(self) -> dict[str, dict[str, Any]]:
        """The approver's form holds the reason only: Airflow merges the run's form params into
        every task's params, and the HITL form would otherwise ask the approver for all of them."""
        return {"reason": self.params.get_param("reason").serialize()}

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        requester = context["dag_run"].triggering_user_name
        event, refused = four_eyes(event, requester)
        result = super().execute_complete(context=context, event=event)
        record = decision(result, requester, refused)
        if refused:
            log.error("FORCED PUSH REFUSED: %s; the push is skipped", refused)
        elif record["decision"] == self.REJECT:
            log.warning("FORCED PUSH REJECTED by %s: %s", record["by"], record["reason"] or "(no reason given)")
        else:
            log.info("forced push approved by %s (requested by %s)", record["by"], requester)
        return {**result, "decision": record}

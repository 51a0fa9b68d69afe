"""A forced push waits for a person: Airflow's human-in-the-loop approval, only when it is needed.

Why: `force_push` serves a model the gate refused; the trigger form alone lets one click do it
at 2 a.m. The run therefore parks in Airflow's Required Actions (HITL, `awaiting_input`) showing
the gate's NOT_BLESSED reasons and the stated reason; Approve lets the push run, Reject or the
response timeout (whose default is Reject) skips it. A BLESSED run, a run without force_push, or
a deployment that turns `push.force_needs_approval` off (automation) passes straight through.
"""
from __future__ import annotations

import logging

from airflow.providers.standard.operators.hitl import ApprovalOperator

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


class ForcedPushApproval(ApprovalOperator):
    """Asks for approval only when the push is forced past a NOT_BLESSED gate."""

    def __init__(self, *, spec_task_id: str, eval_task_id: str, enabled: bool, **kwargs):
        super().__init__(subject="Serve a NOT_BLESSED recommender?", defaults="Reject", **kwargs)
        self.spec_task_id, self.eval_task_id, self.enabled = spec_task_id, eval_task_id, enabled

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
        self.body = approval_body(spec, evaluation)
        return super().execute(context)

"""Four eyes on a forced push: the requester's own Approve is a Reject, and every decision is
recorded with who, when and why (the live HITL round trip: tests/dags/test_scheduler_e2e.py)."""
from __future__ import annotations

import datetime as dt

from pipeline.approval import decision, four_eyes

AT = dt.datetime(2026, 11, 6, 7, 30, tzinfo=dt.UTC)


def _event(option: str, user: str, reason: str = "") -> dict:
    return {"chosen_options": [option], "params_input": {"reason": reason}, "responded_at": AT,
            "responded_by_user": {"id": user, "name": user}}


def test_the_requester_cannot_approve_his_own_forced_push():
    event, refused = four_eyes(_event("Approve", "admin"), requester="admin")
    assert event["chosen_options"] == ["Reject"]
    assert refused == "admin asked for this forced push and cannot approve it (four eyes)"
    record = decision(event, "admin", refused)
    assert record == {"decision": "refused", "by": "admin", "requested_by": "admin", "reason": refused,
                      "at": AT.isoformat()}


def test_another_person_approves_or_rejects_with_a_reason():
    event, refused = four_eyes(_event("Approve", "approver", "INC-9 checked"), requester="admin")
    assert refused is None and event["chosen_options"] == ["Approve"]
    assert decision(event, "admin", None)["by"] == "approver"
    rejected, refused = four_eyes(_event("Reject", "admin", "  CTR looks wrong "), requester="admin")
    assert refused is None                                   # rejecting your own request is fine
    assert decision(rejected, "admin", None) == {"decision": "Reject", "by": "admin", "requested_by": "admin",
                                                 "reason": "CTR looks wrong", "at": AT.isoformat()}

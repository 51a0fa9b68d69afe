"""Which models a rollback took away, from the serving history alone (no TensorFlow)."""
from __future__ import annotations

from pipeline.contracts import serving


def _push(base, version, digest):
    serving.write_history(base, "m", "push", version, {"version": version, "model_digest": digest})


def _rollback(base, version, restored_digest, away_version, away_digest=None, **extra):
    record = {"version": version, "model_digest": restored_digest, "rolled_back_from": away_version,
              "restored_from": 1, "reason": "r", **extra}
    if away_digest:
        record["rolled_back_digest"] = away_digest
    serving.write_history(base, "m", "rollback", version, record)


def test_a_rollback_takes_a_model_away_until_another_rollback_restores_it(tmp_path):
    _push(tmp_path, 1, "aaa")
    _push(tmp_path, 2, "bbb")
    _rollback(tmp_path, 3, "aaa", 2, "bbb")                       # v3 = v1: bbb taken away
    assert set(serving.rolled_back_digests(tmp_path, "m")) == {"bbb"}
    _rollback(tmp_path, 4, "bbb", 3, "aaa")                       # back to v2's model: aaa taken away
    taken = serving.rolled_back_digests(tmp_path, "m")
    assert set(taken) == {"aaa"} and taken["aaa"]["version"] == 4


def test_older_records_name_the_version_and_the_push_history_gives_its_digest(tmp_path):
    _push(tmp_path, 1, "aaa")
    _push(tmp_path, 2, "bbb")
    _rollback(tmp_path, 3, "aaa", 2)                              # written before rolled_back_digest
    assert set(serving.rolled_back_digests(tmp_path, "m")) == {"bbb"}


def test_a_rollback_that_failed_verification_took_nothing_away(tmp_path):
    _push(tmp_path, 1, "aaa")
    _push(tmp_path, 2, "bbb")
    _rollback(tmp_path, 3, "aaa", 2, "bbb", unpublished=True)
    assert serving.rolled_back_digests(tmp_path, "m") == {}

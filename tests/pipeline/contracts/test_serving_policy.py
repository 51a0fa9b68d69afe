"""Which version serves, from models.config and the version dirs; what the history knows of that
is gone (no TensorFlow: tensorflow-serving-api's config proto only)."""
from __future__ import annotations

import pytest

from pipeline.contracts import serving


def _versions(base, *versions):
    for v in versions:
        (base / "m" / str(v)).mkdir(parents=True)


def _config(base, policy="", labels=""):
    (base / serving.MODELS_CONFIG).write_text(
        'model_config_list { config { name: "other" base_path: "/o" } '
        f'config {{ name: "m" base_path: "{base / "m"}" {policy} {labels} }} }}')


def test_latest_serves_the_highest_and_a_pin_by_hand_the_pinned_version(tmp_path):
    _versions(tmp_path, 1, 2, 3)
    assert serving.served_version(tmp_path / "m") == 3                   # no models.config
    _config(tmp_path, "model_version_policy { latest { num_versions: 1 } }")
    assert serving.served_version(tmp_path / "m") == 3
    _config(tmp_path, "model_version_policy { specific { versions: 1 } }")
    assert serving.version_policy(tmp_path, "m").pinned == (1,)
    assert serving.served_version(tmp_path / "m") == 1
    _config(tmp_path, "model_version_policy { specific { versions: 1 versions: 2 } }")
    assert serving.served_version(tmp_path / "m") == 2                   # an unversioned request: the highest
    _config(tmp_path, "model_version_policy { specific { versions: 7 } }")
    assert serving.served_version(tmp_path / "m") is None                # pinned to nothing on disk


def test_push_s_own_labelled_writes_are_no_pin(tmp_path):
    _versions(tmp_path, 1, 2)
    _config(tmp_path, "model_version_policy { specific { versions: 1 versions: 2 } }",
            'version_labels { key: "stable" value: 1 } version_labels { key: "canary" value: 2 }')
    assert serving.version_policy(tmp_path, "m").pinned == ()
    serving.write_history(tmp_path, "m", "canary", 2, {"version": 2})   # labels.py's canary record
    assert serving.served_version(tmp_path / "m") == 1


def test_a_models_config_that_does_not_parse_is_a_permanent_refusal_naming_it(tmp_path):
    from pipeline.orchestration import permanent_errors

    _versions(tmp_path, 1)
    (tmp_path / serving.MODELS_CONFIG).write_text('model_config_list { config { name: "m" ')
    with pytest.raises(serving.ServingDirError, match=f"{tmp_path / 'models.config'} is not a ModelServerConfig") \
            as refused:
        serving.served_version(tmp_path / "m")
    assert isinstance(refused.value, permanent_errors()) and "\n" not in str(refused.value)


def test_lost_versions_are_recorded_published_versions_that_are_gone(tmp_path):
    for v in (1, 2, 3):
        serving.write_history(tmp_path, "m", "push", v, {"version": v, "data_date": f"2026-11-0{v}"})
    serving.write_history(tmp_path, "m", "push", 4, {"version": 4, "unpublished": True, "data_date": "2026-11-09"})
    _versions(tmp_path, 3)                                               # 1, 2 went by retention
    assert serving.lost_versions(tmp_path, "m") == [1, 2]
    assert serving.newest_data_date(tmp_path, "m") == "2026-11-03"       # a withdrawn version dates nothing
    (tmp_path / "m" / "3").rmdir()
    assert serving.lost_versions(tmp_path, "m") == [1, 2, 3] and serving.served_version(tmp_path / "m") is None

from pathlib import Path

import pytest

from pipeline.config import PROJECT_ROOT, Config, ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_defaults_live_under_var():
    config = load_config(env={})
    assert config.data.raw_root == PROJECT_ROOT / "var" / "data"
    assert config.data.serving_base.is_relative_to(PROJECT_ROOT / "var")
    assert config.train.workers >= 1


def test_layers_file_then_env_then_overrides(tmp_path):
    path = write(tmp_path, "train:\n  workers: 3\n  epochs: 4\nwindow:\n  train_days: 5\n")
    env = {"RECO__TRAIN__EPOCHS": "6", "RECO__EVAL__MIN_AUC": "0.7", "UNRELATED": "x"}
    config = load_config(path, overrides={"window.train_days": 2}, env=env)
    assert config.train.workers == 3          # file
    assert config.train.epochs == 6           # env beats file
    assert config.eval.min_auc == 0.7         # env, typed from its YAML text
    assert config.window.train_days == 2      # override beats file


def test_relative_paths_resolve_against_checkout(tmp_path):
    config = load_config(write(tmp_path, "data:\n  raw_root: somewhere/raw\n"), env={})
    assert config.data.raw_root == PROJECT_ROOT / "somewhere" / "raw"


def test_round_trip_through_dict():
    config = load_config(env={}, overrides={"eval.slices": ["platform"], "train.workers": 3})
    assert Config().with_overrides({}) == Config()
    from pipeline.config import from_dict

    assert from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("yaml_text", "overrides", "fragments"),
    [
        ("train:\n  wrokers: 2\n", {}, ["unknown config key", "train.wrokers"]),
        ("trian:\n  workers: 2\n", {}, ["unknown config key", "trian"]),
        ("", {"train.workers": "two"}, ["train.workers", "'two'", "expected int"]),
        ("", {"train.workers": 0}, ["train.workers", "got 0", ">= 1"]),
        ("", {"window.train_days": 0}, ["window.train_days", ">= 1 (days)"]),
        ("", {"eval.min_auc": 1.5}, ["eval.min_auc", "1.5", "[0, 1]"]),
        ("", {"preprocess.max_rejected_fraction": -0.1}, ["preprocess.max_rejected_fraction", "[0, 1]"]),
        ("", {"train.mixed_precision": "yes"}, ["train.mixed_precision", "expected bool"]),
        ("", {"train.epochs": True}, ["train.epochs", "expected int"]),
        ("", {"eval.slices": "platform"}, ["eval.slices", "expected a list"]),
        ("", {"nope.key": 1}, ["unknown config key 'nope.key'"]),
        ("", {"push.warmup_batch_sizes": [1, 0]}, ["push.warmup_batch_sizes", "ints >= 1"]),
        ("", {"push.warmup_batch_sizes": []}, ["push.warmup_batch_sizes", "non-empty"]),
        ("train: 3\n", {}, ["train must be a mapping"]),
        ("- a\n- b\n", {}, ["expected a mapping"]),
        ("", {"data.artifact_root": "gs://bucket/reco"}, ["data.artifact_root", "'gs://bucket/reco' is a URL"]),
        ("data:\n  raw_root: s3://lake/events\n", {}, ["data.raw_root", "is a URL", "mounted path"]),
    ],
)
def test_errors_name_the_key_value_and_expectation(tmp_path, yaml_text, overrides, fragments):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, yaml_text), overrides=overrides, env={})
    for fragment in fragments:
        assert fragment in str(err.value)


def test_env_errors_say_they_came_from_the_environment():
    with pytest.raises(ConfigError, match="environment: unknown config key 'train.wrokers'"):
        load_config(env={"RECO__TRAIN__WROKERS": "2"})


def test_missing_explicit_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml", env={})


def test_ints_widen_to_floats_and_optional_accepts_null():
    config = load_config(env={}, overrides={"train.learning_rate": 1, "eval.max_auc_drop": None})
    assert config.train.learning_rate == 1.0 and isinstance(config.train.learning_rate, float)
    assert config.eval.max_auc_drop is None


def test_the_shipped_params_file_changes_no_default(tmp_path):
    """conf/params.yaml shows values; the dataclasses define them: a user's own RECO_CONFIG that
    omits a key must get what the docs say, so the shipped file may not differ from an empty one."""
    from pipeline.config import DEFAULT_CONFIG_FILE

    empty = write(tmp_path, "")
    assert load_config(DEFAULT_CONFIG_FILE, env={}) == load_config(empty, env={})


@pytest.mark.parametrize("old, new", [("train.backend", "execution.backend"),
                                      ("train.k8s_flavor", "execution.k8s_flavor"),
                                      ("preprocess.max_label_rate_drift", "validate.max_label_rate_drift"),
                                      ("train.seed", "train.data_order_seed")])
def test_a_moved_key_is_refused_naming_its_new_place(tmp_path, old, new):
    section, key = old.split(".")
    for load in (lambda: load_config(write(tmp_path, f"{section}:\n  {key}: 1\n"), env={}),
                 lambda: load_config(env={f"RECO__{section.upper()}__{key.upper()}": "1"}),
                 lambda: load_config(env={}, overrides={old: 1})):
        with pytest.raises(ConfigError, match=f"'{old}' moved: it is now '{new}'"):
            load()


@pytest.mark.parametrize("old, why", [("preprocess.side_input_max_items", "preprocess joins nothing"),
                                      ("model.content_units", "content memory is gone"),
                                      ("model.content_weight", "content memory is gone"),
                                      ("train.validations_per_epoch", "measured worse"),
                                      ("train.xla_optimizer", "measured slower"),
                                      ("train.export", "RECO_TRAIN_LAB"),
                                      ("train.pin_cpus", "RECO_TRAIN_LAB")])
def test_a_removed_key_is_refused_saying_why(tmp_path, old, why):
    section, key = old.split(".")
    for load in (lambda: load_config(write(tmp_path, f"{section}:\n  {key}: 1\n"), env={}),
                 lambda: load_config(env={f"RECO__{section.upper()}__{key.upper()}": "1"})):
        with pytest.raises(ConfigError, match=f"'{old}' was removed .*{why}.*: delete it"):
            load()


def test_the_config_table_is_current_and_every_key_says_what_it_is():
    """docs/config.md is generated from config_sections.py; a key added without a one-line
    comment, or a default changed without regenerating the table, fails here."""
    from pipeline import config_doc

    rows = config_doc.rows()
    assert len(rows) == len({key for key, _, _ in rows}) > 100
    assert [key for key, _, what in rows if not what] == []
    assert ("train.workers", "2", "gang size: MultiWorkerMirroredStrategy workers") in rows
    assert config_doc.main(["--check"]) == 0, "run: python -m pipeline config-doc"

"""Warm start from the served model: embedding rows follow their ids when the vocabulary changes."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from components.train.model.build import VocabSizes, build_model
from components.train.model.tower import layers
from components.train.worker.warm_start import initial_weights, refitted_days, remap_rows, served_variables, warm_start
from pipeline.contracts import features as F
from tests.components.train.model.test_din import DIN


def test_rows_move_with_their_ids():
    old = np.arange(6 * 2, dtype=np.float32).reshape(6, 2)      # padding, "a", "b", "c", OOV, spare
    new = np.full((7, 2), -1.0, dtype=np.float32)                # padding, "c", "d", "a", "b", OOV, spare
    out, copied = remap_rows(old, new, ["a", "b", "c"], ["c", "d", "a", "b"], oov_buckets=1)
    assert copied == 5                                            # c, a, b + padding + 1 OOV bucket
    np.testing.assert_array_equal(out[0], old[0])                 # padding
    np.testing.assert_array_equal(out[1], old[3])                 # "c": old row 3 -> new row 1
    np.testing.assert_array_equal(out[2], new[2])                 # "d" is new: fresh init
    np.testing.assert_array_equal(out[3], old[1])                 # "a"
    np.testing.assert_array_equal(out[4], old[2])                 # "b"
    np.testing.assert_array_equal(out[5], old[4])                 # the OOV bucket


def _save(model, root, item_vocab: list[str], title_vocab: list[str]):
    module = tf.Module()
    module.model_variables = list(model.variables)
    tf.saved_model.save(module, str(root))
    (root / "assets").mkdir(exist_ok=True)
    (root / "assets" / F.ITEM_VOCAB).write_text("\n".join(item_vocab) + "\n")
    (root / "assets" / F.TITLE_VOCAB).write_text("\n".join(title_vocab) + "\n")


def test_warm_start_from_a_served_export_after_the_catalog_changed(tmp_path):
    cfg = dataclasses.replace(DIN, oov_buckets=1)
    items_old, items_new = ["101", "102", "103"], ["103", "104", "101"]
    served = build_model(cfg, VocabSizes(title=4, items=len(items_old) + 2, users=cfg.user_buckets + 1))
    memory = layers(served)["user_memory"].table             # zeros until fitted: give rows values
    memory.assign(np.random.default_rng(0).normal(size=memory.shape).astype(np.float32))
    _save(served, tmp_path / "served", items_old, ["red", "shoe"])
    transform = tmp_path / "transform" / "transform_fn" / "assets"
    transform.mkdir(parents=True)
    (transform / F.ITEM_VOCAB).write_text("\n".join(items_new) + "\n")
    (transform / F.TITLE_VOCAB).write_text("shoe\nred\n")
    fresh = build_model(cfg, VocabSizes(title=4, items=len(items_new) + 2, users=cfg.user_buckets + 1))
    warmed = warm_start(fresh, tmp_path / "served", tmp_path / "transform", cfg.oov_buckets)
    assert sorted(warmed) == sorted(v.name for v in fresh.variables)
    old, new = layers(served)["item_embedding"].embeddings.numpy(), layers(fresh)["item_embedding"].embeddings
    np.testing.assert_array_equal(new[1], old[3])                 # item 103 moved from row 3 to row 1
    np.testing.assert_array_equal(new[3], old[1])                 # item 101 from row 1 to row 3
    # The user memory is indexed by hashed user, not by a vocabulary: copied as it is.
    np.testing.assert_array_equal(layers(fresh)["user_memory"].table, memory.numpy())
    title_old, title_new = layers(served)["title_embedding"].embeddings.numpy(), layers(fresh)["title_embedding"]
    np.testing.assert_array_equal(title_new.embeddings[1], title_old[2])      # "shoe"
    np.testing.assert_array_equal(layers(fresh)["hidden"].kernel, layers(served)["hidden"].kernel)
    assert warm_start(fresh, None, tmp_path / "transform", cfg.oov_buckets) == ()  # nothing served yet
    other = dataclasses.replace(cfg, hidden_units=cfg.hidden_units * 2)            # another size: skipped
    bigger = build_model(other, VocabSizes(title=4, items=5, users=cfg.user_buckets + 1))
    assert "hidden/kernel:0" not in initial_weights(bigger, tmp_path / "served", tmp_path / "transform", 1)


def test_vocabulary_lines_split_on_newlines_only(tmp_path):
    from components.train.worker.warm_start import read_vocabulary

    (tmp_path / "v").write_text("red\nsho\u2028e\nhat\n")
    assert read_vocabulary(tmp_path / "v") == ["red", "sho\u2028e", "hat"]


def test_a_window_overlapping_what_the_served_model_fitted_is_named():
    import datetime as dt

    window = [dt.date(2026, 11, 3), dt.date(2026, 11, 4), dt.date(2026, 11, 5)]
    served = {"data_date": "2026-11-05"}              # its window ended on 11-04
    assert refitted_days(served, window) == window[:2]
    assert refitted_days(served, window[2:]) == []    # the newest day only: nothing re-fitted
    assert refitted_days(None, window) == [] == refitted_days({"source": "hand"}, window)


def test_an_incremental_plan_whose_version_is_gone_is_refused_naming_it(tiny_config, tmp_path):
    """Its shards hold the new days only: training them from scratch would serve a model of one day."""
    from components.train.worker.main import _warm_start
    from pipeline.contracts.training_plan import INCREMENTAL, Plan
    from pipeline.paths import RunPaths

    config = tiny_config.with_overrides({"data.serving_base": str(tmp_path / "serving")})
    plan = Plan(INCREMENTAL, ("2026-11-03",), 1, 9, "continues version 9")
    with pytest.raises(FileNotFoundError, match="continues version 9"):
        _warm_start(None, config, RunPaths.for_run(config, "2026-11-04", "t"), plan)


def test_served_variables_read_what_loading_reads_under_any_checkpoint_key(tmp_path):
    model = build_model(DIN, VocabSizes(title=4, items=5, users=DIN.user_buckets + 1))
    module = tf.Module()
    module.first = model.variables[0]          # a shorter path: its checkpoint key is "first/...", not the list's
    module.model_variables = list(model.variables)
    tf.saved_model.save(module, str(tmp_path / "served"))
    loaded = {v.name: v.numpy() for v in tf.saved_model.load(str(tmp_path / "served")).model_variables}
    read = served_variables(tmp_path / "served")
    assert sorted(read) == sorted(loaded) and len(read) == len(model.variables)
    for name, value in loaded.items():
        np.testing.assert_array_equal(read[name], value)


def test_an_export_without_model_variables_is_refused_naming_it(tmp_path):
    module = tf.Module()
    module.weights = [tf.Variable([1.0])]
    tf.saved_model.save(module, str(tmp_path / "other"))
    with pytest.raises(ValueError, match="other lists no model_variables"):
        served_variables(tmp_path / "other")

"""preprocessing_fn on three hand-checked rows through real Beam + tf.Transform, and partial feeding."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from pipeline.config import ModelConfig
from pipeline.contracts import features as F

pytestmark = pytest.mark.integration

MODEL = ModelConfig(title_len=4, title_vocab_size=3, history_len=3, item_vocab_size=2, oov_buckets=1)
# The fourth item was never shown (weight 0): it must change no statistic, yet get a catalog row.
TITLES = [b"Red shoe, RED! big shoe", b"blue shoe", b"Green hat", b"Red unseen"]
WEIGHTS = np.array([3.0, 1.0, 2.0, 0.0], dtype=np.float32)
HISTORIES = [[5, 0, 7], [], [9, 7, 5, 9, 9], [11, 5]]
LABELS = [1, 0, 0, 0]
ITEMS = [5, 7, 9, 11]
USERS = [11, 12, 11, 13]
PLATFORMS = [b"ios", b" Web ", b"tv", b"web"]      # an unknown platform maps to 0
HOURS = [0, 23, 24, 5]                              # an out-of-range hour maps to 0


def _images() -> np.ndarray:
    base = np.array([1.0, 3.0, 5.0, 40.0], dtype=np.float32)[:, None]
    images = np.repeat(base, F.IMAGE_DIM, axis=1) * np.linspace(0.5, 2.0, F.IMAGE_DIM, dtype=np.float32)
    images[:, 1] = 4.0                       # a constant dimension: std 0 -> must map to 0, not NaN
    return images


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    """AnalyzeAndTransformDataset on the three rows; the transform graph written like production."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from tensorflow_transform.tf_metadata import dataset_metadata

    from components.preprocess.run import FN_API_RUNNER
    from components.preprocess.transform import IMPRESSIONS, RAW_FEATURE_SPEC, make_preprocessing_fn

    root = tmp_path_factory.mktemp("tft")
    images = _images()
    rows = [{F.TITLE: TITLES[i], F.IMAGE: images[i], F.HISTORY: np.array(HISTORIES[i], np.int64),
             F.LABEL: LABELS[i], F.ITEM_ID: ITEMS[i], F.USER_ID: USERS[i], F.PLATFORM: PLATFORMS[i],
             F.HOUR: HOURS[i], IMPRESSIONS: WEIGHTS[i]} for i in range(len(ITEMS))]
    metadata = dataset_metadata.DatasetMetadata.from_feature_spec(RAW_FEATURE_SPEC)
    with beam.Pipeline(options=PipelineOptions([f"--runner={FN_API_RUNNER}"])) as p:
        with tft_beam.Context(temp_dir=str(root / "tmp")):
            (data, _), transform_fn = ((p | beam.Create(rows), metadata)
                                       | tft_beam.AnalyzeAndTransformDataset(make_preprocessing_fn(MODEL)))
            _ = transform_fn | tft_beam.WriteTransformFn(str(root / "transform"))
            _ = data | beam.combiners.ToList() | beam.Map(_dump, str(root / "rows.pkl"))
    with open(root / "rows.pkl", "rb") as f:
        return str(root / "transform"), pickle.load(f)


def _dump(rows, path: str) -> None:
    with open(path, "wb") as f:
        pickle.dump(rows, f)


def test_preprocessing_fn_on_three_rows(analyzed):
    _, rows = analyzed
    got = {tuple(r[F.TITLE_IDS].tolist()): r for r in rows}
    # Impression-weighted token counts: shoe 3*2+1=7, red 6, big 3, green 2, hat 2, blue 1;
    # top 3 -> shoe=1, red=2, big=3 (0 = padding), one OOV bucket = 4. Unweighted, "big" would
    # lose the tie to "hat"/"green", so this also proves the weighting.
    # The unseen item's words count 0: "unseen" is OOV though the vocabulary has room left.
    assert set(got) == {(2, 1, 2, 3), (4, 1, 0, 0), (4, 4, 0, 0), (2, 4, 0, 0)}
    # Item vocabulary by impressions: 5 (3) -> 1, 9 (2) -> 2, 7 (1) -> OOV 3; 0 in a history is
    # padding and dropped; the LAST 3 ids are kept, right-padded with 0.
    assert got[(2, 1, 2, 3)][F.HISTORY_IDS].tolist() == [1, 3, 0]
    assert got[(4, 1, 0, 0)][F.HISTORY_IDS].tolist() == [0, 0, 0]
    assert got[(4, 4, 0, 0)][F.HISTORY_IDS].tolist() == [1, 2, 2]
    assert got[(2, 4, 0, 0)][F.HISTORY_IDS].tolist() == [3, 1, 0]            # 11: never shown, OOV
    order = [(2, 1, 2, 3), (4, 1, 0, 0), (4, 4, 0, 0), (2, 4, 0, 0)]
    assert [int(got[t][F.LABEL_KEY]) for t in order] == LABELS
    # The shown item in the history's id space: 5 -> 1, 7 -> OOV 3, 9 -> 2.
    assert [int(got[t][F.TARGET_ID]) for t in order] == [1, 3, 2, 3]
    assert [int(got[t][F.PLATFORM_ID]) for t in order] == [1, 3, 0, 3]     # ios, web (trimmed, lowercased), tv
    assert [int(got[t][F.HOUR_ID]) for t in order] == [1, 24, 0, 6]
    users = [int(got[t][F.USER_BUCKET]) for t in order]
    assert users[0] == users[2] != users[1] and all(1 <= u <= MODEL.user_buckets for u in users)
    # Catalog rows: every item its own row 1..4, shown or not, uncapped by item_vocab_size; the
    # history's rows are its items' rows (padding 0), and an unknown item gets row 5.
    row = {item: int(got[t][F.TARGET_ROW]) for item, t in zip(ITEMS, order)}
    assert sorted(row.values()) == [1, 2, 3, 4]
    assert got[order[0]][F.HISTORY_ROWS].tolist() == [row[5], row[7], 0]
    assert got[order[2]][F.HISTORY_ROWS].tolist() == [row[5], row[9], row[9]]
    assert got[order[3]][F.HISTORY_ROWS].tolist() == [row[11], row[5], 0]

    images, w = _images().astype(np.float64), WEIGHTS[:, None].astype(np.float64)
    mean = (w * images).sum(0) / w.sum()
    std = np.sqrt((w * images**2).sum(0) / w.sum() - mean**2)
    std[1] = 1.0
    expected = (images - mean) / std
    for i, key in enumerate([(2, 1, 2, 3), (4, 1, 0, 0), (4, 4, 0, 0)]):
        np.testing.assert_allclose(got[key][F.IMAGE_Z], expected[i], rtol=1e-4, atol=1e-5)
    assert all(got[k][F.IMAGE_Z][1] == 0 for k in got)


def test_module_level_preprocessing_fn_uses_default_sizes():
    from components.preprocess import transform

    assert callable(transform.preprocessing_fn)
    assert F.item_feature_spec(ModelConfig())[F.TITLE_IDS].shape == (20,)
    assert F.transformed_feature_spec(ModelConfig())[F.HISTORY_ROWS].shape == (50,)


def test_partial_feeding_serving_items_and_events(analyzed):
    """The saved graph answers any subset of raw features with exactly the outputs they determine."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from components.preprocess.steps import _loader
    from components.preprocess.transform import EVENT_INPUTS, EVENT_OUTPUTS, ITEM_INPUTS

    transform_dir, rows = analyzed
    output = tft.TFTransformOutput(transform_dir)
    titles = tf.constant(TITLES)
    images = tf.constant(_images())
    history = tf.ragged.constant(HISTORIES, dtype=tf.int64).to_sparse()
    labels = tf.constant(LABELS, dtype=tf.int64)

    context = {F.ITEM_ID: tf.constant(ITEMS, tf.int64), F.USER_ID: tf.constant(USERS, tf.int64),
               F.PLATFORM: tf.constant(PLATFORMS), F.HOUR: tf.constant(HOURS, tf.int64)}
    serving = output.transform_raw_features({F.TITLE: titles, F.IMAGE: images, F.HISTORY: history, **context},
                                            drop_unused_features=True)
    assert set(serving) == set(F.item_feature_spec(MODEL)) | set(F.example_input_names(MODEL))
    items = output.transform_raw_features({F.TITLE: titles, F.IMAGE: images}, drop_unused_features=True)
    assert set(items) == {F.TITLE_IDS, F.IMAGE_Z}
    unknown = output.transform_raw_features({F.ITEM_ID: tf.constant([404, 5], tf.int64)}, drop_unused_features=True)
    assert unknown[F.TARGET_ROW].numpy().tolist()[0] == len(ITEMS) + 1     # the catalog's OOV row
    events = output.transform_raw_features({F.HISTORY: history, F.LABEL: labels, **context},
                                           drop_unused_features=True)
    assert set(events) == set(EVENT_OUTPUTS)

    by_title = {tuple(r[F.TITLE_IDS].tolist()): r for r in rows}
    for i, title_ids in enumerate(serving[F.TITLE_IDS].numpy()):
        full = by_title[tuple(title_ids.tolist())]
        np.testing.assert_allclose(serving[F.IMAGE_Z].numpy()[i], full[F.IMAGE_Z], rtol=1e-6)
        assert serving[F.HISTORY_IDS].numpy()[i].tolist() == full[F.HISTORY_IDS].tolist()
        assert events[F.HISTORY_IDS].numpy()[i].tolist() == full[F.HISTORY_IDS].tolist()
        for name in EVENT_OUTPUTS:
            want = np.asarray(full[name]).tolist()
            assert events[name].numpy()[i].tolist() == want == serving.get(name, events[name]).numpy()[i].tolist()

    # The finalized loaders the pipeline uses give the same answers as the public API.
    item_loader = _loader(transform_dir, ITEM_INPUTS, (F.TITLE_IDS, F.IMAGE_Z))
    event_loader = _loader(transform_dir, EVENT_INPUTS, EVENT_OUTPUTS)
    fast_items = item_loader.apply_transform_model({F.TITLE: titles, F.IMAGE: images})
    fast_events = event_loader.apply_transform_model({F.HISTORY: history, F.LABEL: labels, **context})
    np.testing.assert_array_equal(fast_items[F.TITLE_IDS].numpy(), items[F.TITLE_IDS].numpy())
    np.testing.assert_allclose(fast_items[F.IMAGE_Z].numpy(), items[F.IMAGE_Z].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(fast_events[F.HISTORY_IDS].numpy(), events[F.HISTORY_IDS].numpy())
    np.testing.assert_array_equal(fast_events[F.LABEL_KEY].numpy(), events[F.LABEL_KEY].numpy())

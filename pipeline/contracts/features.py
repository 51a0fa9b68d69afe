"""Feature names and shapes: the data contract in code (see docs/data.md); no TensorFlow here.

Raw names are the Parquet columns; transformed names are what tf.Transform emits and
the model consumes. Every component refers to these constants, never to string literals,
so a rename is one edit.
"""
from __future__ import annotations

from typing import NamedTuple

# --- raw events table: events/ds=YYYY-MM-DD/part-*.parquet -------------------------
EVENT_ID = "event_id"
EVENT_TS = "event_ts"
USER_ID = "user_id"
ITEM_ID = "item_id"
HISTORY = "history_item_ids"
PLATFORM = "platform"
HOUR = "hour_of_day"
LABEL = "label"

# --- raw items table: items/ds=YYYY-MM-DD/items.parquet ----------------------------
TITLE = "title"
CATEGORY = "category"
PRICE = "price"
IMAGE = "image_embedding"

IMAGE_DIM = 2048          # a CNN's pooled output
MAX_HISTORY = 50          # longest behaviour sequence the contract allows
PLATFORMS = ("ios", "android", "web")

# Columns of each table in order; their Arrow types and accepted encodings: contracts/raw.py.
EVENT_COLUMNS = (EVENT_ID, EVENT_TS, USER_ID, ITEM_ID, HISTORY, PLATFORM, HOUR, LABEL)
ITEM_COLUMNS = (ITEM_ID, TITLE, CATEGORY, PRICE, IMAGE)

# --- transformed features (tf.Transform output) ------------------------------------
# Item-level: one row per catalog item, stored once per run in the item table (item_table.py).
TITLE_IDS = "title_ids"        # int64[title_len], 0 = padding
IMAGE_Z = "image"              # float32[2048], z-scored
# Event-level: what a training example holds. Items appear by reference only, twice each: the
# item-id vocabulary index (the model's shared id embedding; frequent items own a row, the tail
# shares OOV buckets) and the item table row (the item's content; every catalog item has one).
HISTORY_IDS = "history_ids"    # int64[history_len], 0 = padding, most recent last
HISTORY_ROWS = "history_rows"  # int64[history_len]: the same items' item-table rows, 0 = padding
TARGET_ID = "target_id"        # int64: the shown item in the history's id space (shared embedding)
TARGET_ROW = "target_row"      # int64: the shown item's item-table row
USER_BUCKET = "user_bucket"    # int64: hashed user id, 1..model.user_buckets
PLATFORM_ID = "platform_id"    # int64: 1 + index in PLATFORMS, 0 = unknown
HOUR_ID = "hour_id"            # int64: 1 + hour of day, 0 = unknown
LABEL_KEY = "label"            # int64 0/1
# The model's own inputs after the join (components/train/worker/input.py): the content of the
# batch's distinct items once each, and where each example's target and history items are in it.
TARGET_INDEX = "target_index"  # int64 [B]: position of the shown item among the batch's items
HISTORY_INDEX = "history_index"  # int64 [B, history_len]: same for the history (padding too)
# The shown item's training-window popularity (item table `shown`/`clicks`), as model features:
# smoothed click rate's log-odds over the window rate's, and log(1 + impressions).

# Raw features the serving signature takes (one request = one impression), and their dtypes.
RAW_SERVING_FEATURES = (TITLE, IMAGE, HISTORY, ITEM_ID, USER_ID, PLATFORM, HOUR)
RAW_SERVING_DTYPES = {TITLE: "string", IMAGE: "float32", HISTORY: "int64", ITEM_ID: "int64",
                      USER_ID: "int64", PLATFORM: "string", HOUR: "int64"}
# What the by-id signature takes: the raw features without the shown item's content, which it
# reads from the item table exported with the model.
BY_ID_SERVING_FEATURES = (ITEM_ID, HISTORY, USER_ID, PLATFORM, HOUR)
# The event-level raw features besides the history (one value per impression).
EVENT_CONTEXT = (ITEM_ID, USER_ID, PLATFORM, HOUR)
# Columns kept beside predictions for slicing in evaluation.
SLICE_COLUMNS = (CATEGORY, PLATFORM)


class FeatureShape(NamedTuple):
    """A fixed-length feature of the transformed examples: shape and dtype name (e.g. "int64")."""

    shape: tuple[int, ...]
    dtype: str


def transformed_feature_spec(model) -> dict[str, FeatureShape]:
    """What every transformed tf.Example holds, for the model sizes `model` (a ModelConfig).

    The writer (preprocess) records it in the manifest, the reader (train) builds its parse
    spec from it, so neither needs the other's code or tf.Transform to agree on the shards.
    """
    return {
        HISTORY_IDS: FeatureShape((model.history_len,), "int64"),
        HISTORY_ROWS: FeatureShape((model.history_len,), "int64"),
        TARGET_ID: FeatureShape((), "int64"),
        TARGET_ROW: FeatureShape((), "int64"),
        USER_BUCKET: FeatureShape((), "int64"),
        PLATFORM_ID: FeatureShape((), "int64"),
        HOUR_ID: FeatureShape((), "int64"),
        LABEL_KEY: FeatureShape((), "int64"),
    }


def item_feature_spec(model) -> dict[str, FeatureShape]:
    """What the item table holds of each item (transformed), for the model sizes `model`."""
    return {TITLE_IDS: FeatureShape((model.title_len,), "int64"),
            IMAGE_Z: FeatureShape((IMAGE_DIM,), "float32")}


def example_input_names(model) -> tuple[str, ...]:
    """Every example feature but the label, in spec order: what scoring by reference reads."""
    return tuple(name for name in transformed_feature_spec(model) if name != LABEL_KEY)


CONTEXT_IDS = (USER_BUCKET, PLATFORM_ID, HOUR_ID)


def model_input_spec(model) -> dict[str, FeatureShape]:
    """The model's inputs after the join: the batch's distinct items' content ([U, ...]), the
    examples' positions into them and their ids and context ([B, ...])."""
    spec = transformed_feature_spec(model)
    return {**item_feature_spec(model), TARGET_INDEX: FeatureShape((), "int64"),
            HISTORY_INDEX: FeatureShape((model.history_len,), "int64"),
            **{name: spec[name] for name in (HISTORY_IDS, TARGET_ID, *CONTEXT_IDS)}}


# Vocabulary files in the tf.Transform output: the export sizes its embedding tables from them.
TITLE_VOCAB = "title_tokens"
ITEM_VOCAB = "item_ids"
CATALOG_VOCAB = "catalog_items"    # every usable catalog item once: numbers the item table's rows

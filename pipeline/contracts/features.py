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

# --- transformed features (tf.Transform output, model input) -----------------------
TITLE_IDS = "title_ids"        # int64[title_len], 0 = padding
IMAGE_Z = "image"              # float32[2048], z-scored
HISTORY_IDS = "history_ids"    # int64[history_len], 0 = padding, most recent last
LABEL_KEY = "label"            # int64 0/1

# Raw features the serving signature takes (one request = one impression).
RAW_SERVING_FEATURES = (TITLE, IMAGE, HISTORY)
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
        TITLE_IDS: FeatureShape((model.title_len,), "int64"),
        IMAGE_Z: FeatureShape((IMAGE_DIM,), "float32"),
        HISTORY_IDS: FeatureShape((model.history_len,), "int64"),
        LABEL_KEY: FeatureShape((), "int64"),
    }


# Vocabulary files in the tf.Transform output: the export sizes its embedding tables from them.
TITLE_VOCAB = "title_tokens"
ITEM_VOCAB = "item_ids"

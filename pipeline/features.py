"""Feature names and shapes: the data contract in code (see docs/data.md).

Raw names are the Parquet columns; transformed names are what tf.Transform emits and
the model consumes. Every component refers to these constants, never to string literals,
so a rename is one edit.
"""
from __future__ import annotations

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

# Arrow type of every column, as `str(pyarrow type)`; validation compares against these.
EVENT_COLUMNS = {
    EVENT_ID: "string",
    EVENT_TS: "timestamp[us, tz=UTC]",
    USER_ID: "int64",
    ITEM_ID: "int64",
    HISTORY: "list<element: int64>",
    PLATFORM: "string",
    HOUR: "int32",
    LABEL: "int64",
}
ITEM_COLUMNS = {
    ITEM_ID: "int64",
    TITLE: "string",
    CATEGORY: "string",
    PRICE: "double",
    IMAGE: "list<element: float>",
}

# --- transformed features (tf.Transform output, model input) -----------------------
TITLE_IDS = "title_ids"        # int64[title_len], 0 = padding
IMAGE_Z = "image"              # float32[2048], z-scored
HISTORY_IDS = "history_ids"    # int64[history_len], 0 = padding, most recent last
LABEL_KEY = "label"            # int64 0/1

# Raw features the serving signature takes (one request = one impression).
RAW_SERVING_FEATURES = (TITLE, IMAGE, HISTORY)
# Columns kept beside predictions for slicing in evaluation.
SLICE_COLUMNS = (CATEGORY, PLATFORM)

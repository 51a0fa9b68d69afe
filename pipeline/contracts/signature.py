"""The serving signatures' names, the output name, and the request padding every client uses.

Training exports these names, evaluation and push call them, TF Serving clients send them: one
spelling for all. A request's history is a dense int64 [batch, width] right-padded with 0,
the padding id of the whole pipeline.
"""
from __future__ import annotations

import numpy as np

from pipeline.contracts import features as F

SERVING_DEFAULT = "serving_default"        # raw features -> probability (TF Serving's default)
SERVING_BY_ID = "serving_by_id"            # the shown item by id, its content from the exported table
SERVING_EXAMPLES = "serving_examples"      # serialized raw tf.Example -> probability
REGRESS = "regress"                        # TF Serving's Regress API
SERVING_TRANSFORMED = "serving_transformed"  # the model on transformed examples (ids, table rows)
CORE_BATCH1 = "core_batch1"                # a transformed request at batch 1, un-compiled: what TF Lite converts
REGRESS_METHOD = "tensorflow/serving/regress"
OUTPUT = "probability"


def pad_histories(histories) -> np.ndarray:
    """int64 [b, max(1, longest)] right-padded with 0: one dense request tensor, whether for
    scoring, a TF Serving REST body or a warmup request."""
    width = max(1, max((len(h) for h in histories), default=0))
    out = np.zeros((len(histories), width), dtype=np.int64)
    for i, h in enumerate(histories):
        out[i, : len(h)] = h
    return out


def request_arrays(rows: list[dict], names: tuple[str, ...] = F.RAW_SERVING_FEATURES) -> dict[str, np.ndarray]:
    """Rows holding the raw serving features -> one request's arrays of `names`, in the
    signature's dtypes (history right-padded): the same request whether scored, sent as REST or
    replayed as warmup. Only `names` are read, so rows of an older sample serve an older model."""
    out: dict[str, np.ndarray] = {}
    for name in names:
        values = [r[name] for r in rows]
        if name == F.HISTORY:
            out[name] = pad_histories(values)
        elif F.RAW_SERVING_DTYPES[name] == "string":
            out[name] = np.array([str(v) for v in values], dtype=object)
        else:
            out[name] = np.asarray(values, dtype=F.RAW_SERVING_DTYPES[name])
    return out

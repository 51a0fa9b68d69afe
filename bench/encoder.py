"""Encoding id-only examples (#25's layout: target row, history rows, context, label) two ways.

Candidates: the hand-written wire-format splicing preprocess uses (components/preprocess/
examples.py: vectorized varints, map entries glued per row) and tfx_bsl's C++
`RecordBatchToExamplesEncoder` (kept by the TFX team) on the same columns as an Arrow record
batch. The image, the reason the splicing was written, is gone from this layout, so the
question is whether the hand-written encoder still earns its keep. Both outputs are parsed back
and must agree before anything is timed.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from bench.common import median_time, write_result

EXAMPLES = 200_000
HISTORY = 50
SCALARS = ("target_row", "user_bucket", "platform_id", "hour_id", "label")


def columns(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Columns shaped like preprocess output: padded history rows (0 = padding), small scalars."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, HISTORY + 1, n)
    history = rng.integers(1, 50_000, (n, HISTORY))
    history[np.arange(HISTORY)[None, :] < (HISTORY - lengths)[:, None]] = 0     # most recent last
    return {"history_rows": history, "target_row": rng.integers(1, 50_000, n),
            "user_bucket": rng.integers(1, 100_000, n), "platform_id": rng.integers(0, 4, n),
            "hour_id": rng.integers(0, 25, n), "label": rng.integers(0, 2, n)}


def hand_written(cols: dict[str, np.ndarray]) -> list[bytes]:
    from components.preprocess import examples

    return examples.encode(cols)


def record_batch(cols: dict[str, np.ndarray]) -> pa.RecordBatch:
    def as_list(v: np.ndarray) -> pa.Array:
        v = v if v.ndim == 2 else v[:, None]
        offsets = np.arange(0, v.size + 1, v.shape[1], dtype=np.int64)
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(v.ravel()))

    return pa.RecordBatch.from_arrays([as_list(v) for v in cols.values()], list(cols))


def tfx_bsl_encoder(cols: dict[str, np.ndarray]) -> list[bytes]:
    from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

    return RecordBatchToExamplesEncoder().encode(record_batch(cols))


def parsed(serialized: list[bytes]) -> dict[str, np.ndarray]:
    import tensorflow as tf

    spec = {"history_rows": tf.io.FixedLenFeature([HISTORY], tf.int64),
            **{k: tf.io.FixedLenFeature([], tf.int64) for k in SCALARS}}
    return {k: v.numpy() for k, v in tf.io.parse_example(serialized, spec).items()}


def main() -> dict:
    cols = columns(EXAMPLES)
    hand, cpp = hand_written(cols), tfx_bsl_encoder(cols)
    small = {k: v[:50] for k, v in cols.items()}
    deterministic = {"hand_written": all(hand_written(small) == hand[:50] for _ in range(5)),
                     "tfx_bsl": all(tfx_bsl_encoder(small) == cpp[:50] for _ in range(5))}
    a, b = parsed(hand[:2000]), parsed(cpp[:2000])
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    hand_s = median_time(lambda: hand_written(cols), repeats=5)
    cpp_s = median_time(lambda: tfx_bsl_encoder(cols), repeats=5)
    figures = {
        "examples": EXAMPLES,
        "hand_written_examples_per_s": round(EXAMPLES / hand_s),
        "tfx_bsl_examples_per_s": round(EXAMPLES / cpp_s),
        "tfx_bsl_ratio_to_hand_written": round(hand_s / cpp_s, 3),
        "hand_written_bytes_per_example": round(sum(map(len, hand)) / EXAMPLES, 1),
        "tfx_bsl_bytes_per_example": round(sum(map(len, cpp)) / EXAMPLES, 1),
        "hand_written_deterministic": deterministic["hand_written"],
        "tfx_bsl_deterministic": deterministic["tfx_bsl"],
        "decision": "hand-written kept: tfx_bsl is faster but serializes Features (a protobuf map) "
                    "in hash order, so the same rows encode to different bytes from call to call "
                    "and a rerun would not reproduce its shards",
    }
    write_result("encoder", figures)
    return figures


if __name__ == "__main__":
    main()

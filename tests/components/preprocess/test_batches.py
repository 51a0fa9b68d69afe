"""Vectorized row validation: every reason on hand-built Arrow tables, truncation keeps the newest."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from components.preprocess import batches as B
from pipeline.contracts import features as F
from pipeline.contracts import rows

DAY = dt.date(2026, 11, 2)


def _items_table() -> pa.Table:
    good = np.ones(F.IMAGE_DIM, dtype=np.float32)
    nan, inf = good.copy(), good.copy()
    nan[3], inf[7] = np.nan, -np.inf
    images = [good, nan, inf, good[:-1], None, good, good]
    return pa.table({
        F.ITEM_ID: pa.array([1, 2, 3, 4, 5, 6, None], pa.int64()),
        F.TITLE: pa.array(["Red shoe", "a", "b", "c", "d", "   ", "e"]),
        F.IMAGE: pa.array([None if i is None else i.tolist() for i in images], pa.list_(pa.float32())),
    })


def test_validate_items_names_each_reason():
    good, bad_ids, reasons = B.validate_items(_items_table())
    assert good.item_ids.tolist() == [1]
    assert good.titles.tolist() == [b"Red shoe"] and good.images.shape == (1, F.IMAGE_DIM)
    assert dict(zip(bad_ids.tolist(), reasons.tolist())) == {
        2: "image_not_finite", 3: "image_not_finite", 4: "image_wrong_length", 5: "image_wrong_length",
        6: "empty_title", -1: "null_item_id"}


def _events_table() -> pa.Table:
    return pa.table({
        F.EVENT_ID: pa.array(["e0", "e1", "e2", "e3", None, "e5"]),
        F.ITEM_ID: pa.array([1, 2, 99, 1, 1, 1], pa.int64()),
        F.HISTORY: pa.array([list(range(1, 61)), [3], [], None, [1], [1, 0, 2]], pa.list_(pa.int64())),
        F.LABEL: pa.array([1, 0, 1, None, 0, 0], pa.int64()),
        F.USER_ID: pa.array([7, 8, 9, 10, None, 12], pa.int64()),
        F.PLATFORM: pa.array(["web", "ios", None, "android", "web", "tv"]),
        F.HOUR: pa.array([0, 23, 5, 6, 7, None], pa.int32()),
        F.EVENT_TS: pa.array([dt.datetime(2026, 11, 2, h, tzinfo=dt.UTC) for h in (0, 23, 5, 6, 7, 8)],
                             pa.timestamp("us", tz="UTC")),
    })


def _validate_events(split, catalog):
    table = _events_table()
    return B.validate_events(table, split, catalog, DAY, np.zeros(table.num_rows, dtype=bool))


def test_validate_events_rejects_and_truncates():
    catalog = rows.Catalog(np.array([1]), np.array([2]), np.array(["empty_title"], dtype=object))
    batch, counts, rejected = _validate_events("train", catalog)
    assert batch.event_ids.tolist() == ["e0", "e5"]
    assert {r["event_id"]: r["reason"] for r in rejected} == {
        "e1": "empty_title", "e2": "unknown_item", "e3": "null_label", None: "null_event_id"}
    assert counts == {"empty_title": 1, "unknown_item": 1, "null_label": 1, "null_event_id": 1,
                      rows.TRUNCATED: 1, "history_unknown_item": 1, "unknown_platform": 1}
    histories = np.split(batch.hist_values, batch.hist_offsets[1:-1])
    assert histories[0].tolist() == list(range(11, 61))       # the most recent 50 of 60
    assert histories[1].tolist() == [1, 0, 2]                 # 0s stay: the graph drops padding


def test_slices_and_analysis_rows_keep_lists_aligned():
    catalog = rows.Catalog(np.array([1, 2]), np.zeros(0, np.int64), np.zeros(0, object))
    batch, _, _ = _validate_events("eval", catalog)
    part = batch.slice(1, 3)
    assert part.event_ids.tolist() == ["e1", "e5"] and part.item_ids.tolist() == [2, 1]
    assert part.hist_offsets.tolist() == [0, 1, 4] and part.hist_values.tolist() == [3, 1, 0, 2]
    assert part.user_ids.tolist() == [8, 12] and part.platforms.tolist() == [b"ios", b"tv"]
    assert part.hours.tolist() == [23, -1]                    # null hour: -1, the transform maps it to 0
    good, _, _ = B.validate_items(_items_table())
    analysis = B.item_analysis_batch(good, np.array([4.0], dtype=np.float32))
    assert analysis.num_rows == 1 and analysis.column("impressions").to_pylist() == [[4.0]]
    unseen = B.item_analysis_batch(good, np.array([0.0], dtype=np.float32))     # still a row: weight 0
    assert unseen.num_rows == 1 and unseen.column("impressions").to_pylist() == [[0.0]]


def test_event_chunks_grouped_by_key_match_a_per_key_filter():
    from components.preprocess.steps import EventChunk

    rng = np.random.default_rng(0)
    group_by = rng.integers(0, 7, 500).astype(np.uint64)
    keys = rng.integers(0, 1 << 40, 500).astype(np.uint64)
    payloads = [f"p{i}".encode() for i in range(500)]
    got = {value: (chunk.keys.tolist(), chunk.payloads()) for value, chunk in
           EventChunk.grouped(group_by, keys, payloads)}
    want = {int(v): (keys[group_by == v].tolist(), [payloads[i] for i in np.flatnonzero(group_by == v)])
            for v in np.unique(group_by)}
    assert got == want and list(EventChunk.grouped(group_by[:0], keys[:0], [])) == []

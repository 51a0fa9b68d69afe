"""One row-rule set: preprocess and evaluate keep, reject and truncate exactly the same rows."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.evaluate.data import EvalData
from components.preprocess import batches as B
from pipeline.contracts import event_ids, rows
from pipeline.contracts import features as F
from pipeline.paths import RunPaths, events_partition, items_partition
from tests.conftest import make_tiny_config

DAY = dt.date(2026, 11, 2)


def _hand_made(raw_root) -> None:
    """Every reason on a few rows, written where both stages read the eval day."""
    good = np.ones(F.IMAGE_DIM, dtype=np.float32).tolist()
    nan = [float("nan"), *good[1:]]
    items = pa.table({
        F.ITEM_ID: pa.array([1, 2, 3, 4, 5, 5, 6], pa.int64()),
        F.TITLE: pa.array(["Red shoe", "\t  ", "Blue hat", "Cap", "Dup a", "Dup b", None]),
        F.CATEGORY: pa.array(["a"] * 7), F.PRICE: pa.array([1.0] * 7),
        F.IMAGE: pa.array([good, good, nan, good[:-1], good, good, good], pa.list_(pa.float32())),
    })
    at = dt.datetime(2026, 11, 2, 3, tzinfo=dt.UTC)
    # e10 repeats e0 (the first copy is kept); e11 is dated the day before (a time-zone bug),
    # e12 says hour 5 at 03:00; e13 has no user, e14 user 0.
    events = pa.table({
        F.EVENT_ID: pa.array(["e0", "e1", "e2", "e3", "e4", None, "e6", "e7", "e8", "e9",
                              "e0", "e11", "e12", "e13", "e14"]),
        F.EVENT_TS: pa.array([at] * 11 + [at - dt.timedelta(hours=8), at, at, at], pa.timestamp("us", tz="UTC")),
        F.USER_ID: pa.array([*range(1, 14), None, 0], pa.int64()),
        F.ITEM_ID: pa.array([1, 2, 3, 4, 5, 1, 1, 1, 99, 6, 1, 1, 1, 1, 1], pa.int64()),
        F.HISTORY: pa.array([list(range(1, 71)), [3], [], None, [1], [1], [2], [1, 2], [], [], [], [], [], [], []],
                            pa.list_(pa.int64())),
        F.PLATFORM: pa.array(["web"] * 15),
        F.HOUR: pa.array([3] * 11 + [19, 5, 3, 3], pa.int32()),
        F.LABEL: pa.array([1, 0, 1, 0, 1, 0, None, 2, 0, 1, 1, 0, 0, 0, 0], pa.int64()),
    })
    for folder, table, name in ((items_partition(raw_root, DAY), items, "items.parquet"),
                                (events_partition(raw_root, DAY), events, "part-0.parquet")):
        folder.mkdir(parents=True)
        pq.write_table(table, folder / name)


def _preprocess_view(raw_root, day) -> tuple[dict, dict, dict]:
    """(kept event id -> history, rejected event id -> reason, truncated count) as preprocess sees it."""
    items = pq.read_table(items_partition(raw_root, day), columns=list(rows.ITEM_COLUMNS))
    good, bad_ids, bad_reasons = B.validate_items(items)
    catalog = rows.Catalog.merge([rows.Catalog(np.sort(good.item_ids), bad_ids, bad_reasons)])
    files = sorted(events_partition(raw_root, day).glob("*.parquet"))
    repeats = event_ids.read_partition(day, files).repeats
    events = pq.read_table(files[0], columns=list(rows.MODEL_EVENT_COLUMNS))
    mask = event_ids.repeat_mask(repeats, files[0], 0, events.num_rows)
    batch, counts, rejected = B.validate_events(events, "eval", catalog, day, mask)
    histories = np.split(batch.hist_values, batch.hist_offsets[1:-1]) if len(batch) else []
    kept = {e: h.tolist() for e, h in zip(batch.event_ids.tolist(), histories)}
    return kept, {(r["event_id"], r["reason"]) for r in rejected}, counts[rows.TRUNCATED]


def _evaluate_view(config, day) -> tuple[dict, dict, int]:
    data = EvalData(RunPaths.for_run(config, day, "rules"), ("platform",), batch_size=4)
    kept = {e: h for batch in data for e, h in zip(batch.event_id.tolist(), batch.history)}
    return kept, dict(data.rejected), data.truncated


def _reason_counts(rejected: set) -> dict:
    out = {}
    for _, reason in rejected:
        out[reason] = out.get(reason, 0) + 1
    return out


def test_hand_made_rows_get_one_verdict_from_both_stages(tmp_path):
    config = make_tiny_config(tmp_path)
    _hand_made(config.data.raw_root)
    kept, rejected, truncated = _preprocess_view(config.data.raw_root, DAY)
    assert set(kept) == {"e0"} and kept["e0"] == list(range(21, 71))      # the most recent 50 of 70
    assert rejected == {("e1", "empty_title"), ("e2", "image_not_finite"), ("e3", "image_wrong_length"),
                        ("e4", "duplicate_item_id"), (None, "null_event_id"), ("e6", "null_label"),
                        ("e7", "label_not_binary"), ("e8", "unknown_item"), ("e9", "empty_title"),
                        ("e0", "duplicate_event_id"), ("e11", "event_ts_outside_partition"),
                        ("e12", "hour_mismatch"), ("e13", "invalid_user_id"), ("e14", "invalid_user_id")}
    assert truncated == 1
    eval_kept, eval_rejected, eval_truncated = _evaluate_view(config, DAY)
    assert eval_kept == kept and eval_rejected == _reason_counts(rejected) and eval_truncated == truncated


@pytest.mark.parametrize("rate", [0.3])
def test_generated_malformed_day_same_population_in_preprocess_and_evaluate(tmp_path, rate):
    from pipeline.datagen import generate

    config = make_tiny_config(tmp_path)
    generate(config.data.raw_root, DAY, 1, users=200, items=150, events_per_day=1200, seed=5,
             faults={DAY: [f"malformed:{rate}"]})
    kept, rejected, truncated = _preprocess_view(config.data.raw_root, DAY)
    assert {"unknown_item", "null_label", "image_not_finite", "empty_title"} <= {r for _, r in rejected}
    assert truncated > 0 and len(kept) > 0
    eval_kept, eval_rejected, eval_truncated = _evaluate_view(config, DAY)
    assert eval_kept == kept                   # same event ids, same (truncated) histories
    assert eval_rejected == _reason_counts(rejected) and eval_truncated == truncated


def _history_day(raw_root) -> None:
    """Histories and platforms a broken export writes: a null inside a history, ids no catalog
    holds, platform values the model does not know (items 1-3 usable, 4 rejected)."""
    good = np.ones(F.IMAGE_DIM, dtype=np.float32).tolist()
    items = pa.table({
        F.ITEM_ID: pa.array([1, 2, 3, 4], pa.int64()), F.TITLE: pa.array(["Red shoe", "Blue hat", "Cap", " "]),
        F.CATEGORY: pa.array(["a"] * 4), F.PRICE: pa.array([1.0] * 4),
        F.IMAGE: pa.array([good] * 4, pa.list_(pa.float32())),
    })
    at = dt.datetime(2026, 11, 2, 3, tzinfo=dt.UTC)
    histories = [
        [1, None, 2],                   # h0: a null mid-sequence: rejected, never the padding id
        [1, 777],                       # h1: 777 is in no catalog: kept, counted
        [1],                            # h2: platform "tv": kept (platform unknown), counted
        [2],                            # h3: " Android" is android as the model reads it
        [3],                            # h4: null platform: context left out, like a null hour
        [None, 100, *([1] * 50)],     # h5: the null and the unknown id are in the cut (oldest) part
        [3, 0, 1],                      # h6: 0 means "no item" (padding), not an unknown id
        [4, 2],                         # h7: 4 is in the catalog (rejected there): not unknown
        None,                           # h8: no history at all
    ]
    n = len(histories)
    events = pa.table({
        F.EVENT_ID: pa.array([f"h{i}" for i in range(n)]),
        F.EVENT_TS: pa.array([at] * n, pa.timestamp("us", tz="UTC")),
        F.USER_ID: pa.array(range(1, n + 1), pa.int64()),
        F.ITEM_ID: pa.array([1] * n, pa.int64()),
        F.HISTORY: pa.array(histories, pa.list_(pa.int64())),
        F.PLATFORM: pa.array(["web", "ios", "tv", " Android", None, "web", "web", "ios", "android"]),
        F.HOUR: pa.array([3] * n, pa.int32()),
        F.LABEL: pa.array([0, 1] * (n // 2) + [0] * (n % 2), pa.int64()),
    })
    for folder, table, name in ((items_partition(raw_root, DAY), items, "items.parquet"),
                                (events_partition(raw_root, DAY), events, "part-0.parquet")):
        folder.mkdir(parents=True)
        pq.write_table(table, folder / name)


def test_history_nulls_unknown_history_ids_and_platforms_are_counted_alike(tmp_path):
    from components.preprocess.report import row_report

    config = make_tiny_config(tmp_path)
    _history_day(config.data.raw_root)
    items = pq.read_table(items_partition(config.data.raw_root, DAY), columns=list(rows.ITEM_COLUMNS))
    good, bad_ids, bad_reasons = B.validate_items(items)
    catalog = rows.Catalog.merge([rows.Catalog(np.sort(good.item_ids), bad_ids, bad_reasons)])
    events = pq.read_table(events_partition(config.data.raw_root, DAY), columns=list(rows.MODEL_EVENT_COLUMNS))
    batch, counts, rejected = B.validate_events(events, "eval", catalog, DAY, np.zeros(events.num_rows, bool))
    assert [(r["event_id"], r["reason"]) for r in rejected] == [("h0", "null_history_id")]
    assert counts == {"null_history_id": 1, "history_truncated": 1, "history_unknown_item": 1,
                      "unknown_platform": 1}
    histories = dict(zip(batch.event_ids.tolist(), np.split(batch.hist_values, batch.hist_offsets[1:-1])))
    assert histories["h1"].tolist() == [1, 777] and histories["h6"].tolist() == [3, 0, 1]
    assert histories["h5"].tolist() == [1] * 50                            # the most recent 50
    assert batch.platforms.tolist()[1:4] == [b"tv", b" Android", b""]   # kept as written: the graph maps them
    report = row_report({f"eval:{k}": v for k, v in {**counts, "rows": 9, "kept": 8}.items()}, 0.5)
    assert report["splits"]["eval"]["rejected"] == {"null_history_id": 1}
    assert {k: report["splits"]["eval"][k] for k in ("history_truncated", "history_unknown_item",
                                                     "unknown_platform")} == \
        {"history_truncated": 1, "history_unknown_item": 1, "unknown_platform": 1}
    # evaluate applies the same rules to the same rows: it judges what preprocess trains on
    eval_kept, eval_rejected, eval_truncated = _evaluate_view(config, DAY)
    assert eval_rejected == {"null_history_id": 1} and eval_truncated == 1
    assert eval_kept == {e: h.tolist() for e, h in histories.items()}

"""Event ids over whole partitions: repeats keep the first copy, the digest ignores layout."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.contracts import event_ids

DAY = dt.date(2026, 11, 2)


def _write(folder, name, ids, typ=pa.string()):
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"event_id": pa.array(ids, typ)}), folder / name)
    return folder / name


def test_repeats_keep_the_first_copy_in_file_then_row_order(tmp_path):
    a = _write(tmp_path, "part-0.parquet", ["x", "y", "x", None, None])
    b = _write(tmp_path, "part-1.parquet", ["z", "y", "x"], pa.large_string())
    ids = event_ids.read_partition(DAY, [b, a])                  # the order given does not matter
    assert {k: v.tolist() for k, v in ids.repeats.items()} == {str(a): [2], str(b): [1, 2]}
    assert ids.repeated == 3 and ids.rows == 8 and ids.unique.to_pylist() == ["x", "y", "z"]
    assert event_ids.repeat_mask(ids.repeats, str(b), 1, 2).tolist() == [True, True]
    assert event_ids.repeat_mask(ids.repeats, str(a), 0, 2).tolist() == [False, False]


def test_the_digest_depends_on_the_ids_only(tmp_path):
    one = event_ids.read_partition(DAY, [_write(tmp_path / "a", "p.parquet", ["e1", "e2", "e3"])])
    split = event_ids.read_partition(DAY, [_write(tmp_path / "b", "p0.parquet", ["e3"]),
                                           _write(tmp_path / "b", "p1.parquet", ["e2", "e1", "e1"],
                                                  pa.dictionary(pa.int32(), pa.string()))])
    other = event_ids.read_partition(DAY, [_write(tmp_path / "c", "p.parquet", ["e1", "e2", "e3x"])])
    shifted = event_ids.read_partition(DAY, [_write(tmp_path / "d", "p.parquet", ["e1e", "2", "e3"])])
    assert one.digest == split.digest
    assert len({one.digest, other.digest, shifted.digest}) == 3    # lengths are hashed too


def test_empty_days_are_never_copies_of_each_other(tmp_path):
    empty = event_ids.read_partition(DAY, [_write(tmp_path / "a", "p.parquet", [])])
    assert event_ids.same_content_problems({DAY: empty.digest, DAY - dt.timedelta(1): empty.digest}, {DAY}) == []


def test_overlap_within_the_bound_passes(tmp_path):
    train = event_ids.read_partition(DAY, [_write(tmp_path / "t", "p.parquet", [f"t{i}" for i in range(100)])])
    ev = event_ids.read_partition(DAY + dt.timedelta(1), [_write(tmp_path / "e", "p.parquet",
                                                                 ["t0", *(f"e{i}" for i in range(199))])])
    assert event_ids.overlap_problems(ev, [train], 0.01) == []           # 1 of 200 = 0.5 %
    assert "1 of its 200 event ids (0.5%)" in event_ids.overlap_problems(ev, [train], 0.001)[0]

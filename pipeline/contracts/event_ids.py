"""Event ids across whole partitions: repeated rows, a per-day digest, the eval day's novelty.

The contract promises one row per `event_id`. What a row rule cannot see in one batch needs
the whole partition: which rows repeat an id seen earlier (a re-delivered file, an
at-least-once writer), whether a day holds the same events as another day (a re-export under
the wrong date), and whether the eval day holds events of the training window (the gate would
then judge the model on rows it trained on). All of it reads one column, `event_id`, with
pyarrow; validate, preprocess and evaluate call these functions, so they never disagree.

Repeats: the first row of an id in (file name, row) order is kept and every later one is a
repeat (reason `duplicate_event_id`). A re-delivered file repeats identical rows, so keeping one
is what the upstream meant; training on both would count the impression twice.
"""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import features as F
from pipeline.contracts import raw
from pipeline.contracts.inputs import parquet_files
from pipeline.paths import RunPaths


@dataclass(frozen=True)
class PartitionIds:
    """The event ids of one events partition (one day, all its files)."""

    day: dt.date
    rows: int
    unique: pa.Array                       # distinct non-null ids, in first-seen order
    repeats: dict[str, np.ndarray]         # file path -> sorted row positions repeating an earlier id

    @property
    def repeated(self) -> int:
        return int(sum(len(r) for r in self.repeats.values()))

    @functools.cached_property
    def digest(self) -> str:
        """sha256 of the sorted distinct ids: equal for two days with the same events, whatever
        their file layout, row order or repeats. Computed once, and only by the steps that
        compare days (preprocess needs the repeats alone)."""
        ordered = pc.take(self.unique, pc.sort_indices(self.unique)) if len(self.unique) else self.unique
        lengths = pc.binary_length(ordered).to_numpy(zero_copy_only=False).astype(np.int64)
        digest = hashlib.sha256(lengths.tobytes())
        for chunk in _value_bytes(ordered):
            digest.update(chunk)
        return digest.hexdigest()


def _value_bytes(strings: pa.Array):
    """The concatenated bytes of a large_string array (64-bit offsets: a day may hold more than
    2 GiB of ids), without one Python object per value."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
    if len(strings):
        yield memoryview(strings.buffers()[2])[int(offsets[0]):int(offsets[-1])]


def read_partition(day: dt.date, files: list[Path]) -> PartitionIds:
    """Read `event_id` of every file of one day (sorted by name) and find the repeats."""
    files = sorted(files)
    columns = [pc.cast(raw.normalize(pq.read_table(f, columns=[F.EVENT_ID]), "events").column(0), pa.large_string())
               for f in files]
    ids = pa.chunked_array([c for col in columns for c in col.chunks], pa.large_string())
    unique = pc.unique(ids).drop_null()
    codes = pc.fill_null(pc.index_in(ids, value_set=unique), -1).to_numpy(zero_copy_only=False)
    repeat = codes >= 0
    _, first = np.unique(codes, return_index=True)
    repeat[first] = False
    repeat &= codes >= 0
    bounds = np.cumsum([0, *(len(c) for c in columns)])
    repeats = {str(f): np.flatnonzero(repeat[a:b]) for f, a, b in zip(files, bounds[:-1], bounds[1:])}
    return PartitionIds(day, len(ids), unique, repeats)


def repeat_mask(repeats: dict[str, np.ndarray], path: str, first_row: int, rows: int) -> np.ndarray:
    """The repeat flag of rows [first_row, first_row + rows) of one file."""
    positions = repeats.get(str(path), np.zeros(0, np.int64))
    return np.isin(np.arange(first_row, first_row + rows), positions)


def overlap_problems(eval_ids: PartitionIds, train: list[PartitionIds], max_fraction: float) -> list[str]:
    """The eval day must be new data: refuse it when more than `max_fraction` of its ids are in
    the training window, naming the training partitions they come from."""
    n = len(eval_ids.unique)
    if n == 0:
        return []
    seen = np.zeros(n, dtype=bool)
    shared = {}
    for part in train:
        hit = pc.is_in(eval_ids.unique, value_set=part.unique).to_numpy(zero_copy_only=False)
        if hit.any():
            shared[part.day] = int(hit.sum())
        seen |= hit
    fraction = seen.sum() / n
    if fraction <= max_fraction:
        return []
    where = ", ".join(f"ds={d} ({k})" for d, k in sorted(shared.items()))
    return [f"eval day ds={eval_ids.day}: {int(seen.sum())} of its {n} event ids ({fraction:.1%}) are also in "
            f"training partition(s) {where}, above validate.max_eval_overlap={max_fraction:.1%}: the gate "
            f"would judge the model on rows it trained on (is the eval day a re-export?)"]


def same_content_problems(digests: dict[dt.date, str], involving: set[dt.date]) -> list[str]:
    """Days whose distinct event ids are identical, one of them in `involving` (this run's days;
    `digests` may also hold earlier days from the validation history): one is a copy of the other."""
    by_digest: dict[str, list[dt.date]] = {}
    for day, digest in digests.items():
        by_digest.setdefault(digest, []).append(day)
    return [f"events partitions {' and '.join(f'ds={d}' for d in sorted(days))} hold the same event ids "
            f"(digest {digest[:12]}): one is a copy of the other (re-exported under the wrong date?)"
            for digest, days in by_digest.items()
            if len(days) > 1 and digest != EMPTY_DIGEST and involving & set(days)]


def novelty_problems(eval_ids: PartitionIds, train: list[PartitionIds], max_overlap: float,
                     earlier: dict[dt.date, str] | None = None) -> list[str]:
    """Everything that says the run's days are not new data: the eval day overlapping the
    window, and any of the run's days equal to another day (of the run, or `earlier` digests)."""
    run_days = {eval_ids.day, *(p.day for p in train)}
    digests = {d: h for d, h in (earlier or {}).items() if d not in run_days}
    digests.update({p.day: p.digest for p in [*train, eval_ids]})
    return [*overlap_problems(eval_ids, train, max_overlap), *same_content_problems(digests, run_days)]


def window_partitions(paths: RunPaths) -> list[PartitionIds]:
    """The training window's ids, for a step that has not read them (evaluate run alone)."""
    return [read_partition(day, parquet_files(paths.events_dir(day))) for day in paths.train_dates]


def earlier_digests(paths: RunPaths) -> dict[dt.date, str]:
    """The digests validation recorded for earlier days (validate writes them per day into its
    history once a day passes): a re-export of any of them under a new date is refused."""
    out = {}
    for path in paths.validation_history_dir.glob("ds=*.json"):
        digest = json.loads(path.read_text()).get("digest")
        if digest:
            out[dt.date.fromisoformat(path.stem.removeprefix("ds="))] = digest
    return out


EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()

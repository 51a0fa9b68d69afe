"""Faults planted on chosen dates, so later stages can be tested against real bad input.

Spec strings (CLI `--fault DATE=SPEC`):
- `shuffled_labels`: labels permuted within the day: same click rate, no signal.
- `missing_column`: events lose the `platform` column.
- `renamed_column`: events' `history_item_ids` is renamed `history_items`.
- `wrong_type`: events' `label` is written as a float64 column.
- `malformed[:RATE]` (default 0.05): about RATE of the rows are broken, spread over the
  kinds below. Item-level kinds break catalog rows (every event of that item is then bad):
  NaN/inf in `image_embedding`, wrong embedding length, empty title. Event-level kinds:
  history longer than 50, unknown `item_id`, null `label`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.contracts import features as F

SCHEMA_FAULTS = ("missing_column", "renamed_column", "wrong_type")
ITEM_KINDS = ("nan_embedding", "inf_embedding", "short_embedding", "empty_title")
EVENT_KINDS = ("long_history", "unknown_item", "null_label")
KINDS = ("shuffled_labels", "malformed", *SCHEMA_FAULTS)
UNKNOWN_ITEM_OFFSET = 10_000_000


@dataclass(frozen=True)
class Fault:
    kind: str
    rate: float = 0.0

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.rate:g}" if self.kind == "malformed" else self.kind


def parse(spec: str) -> Fault:
    kind, _, rate = spec.partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown fault {kind!r}; expected one of {KINDS}")
    if kind != "malformed":
        if rate:
            raise ValueError(f"fault {kind!r} takes no rate")
        return Fault(kind)
    value = float(rate) if rate else 0.05
    if not 0 < value < 1:
        raise ValueError(f"malformed rate must be in (0, 1), got {rate!r}")
    return Fault(kind, value)


def apply_to_items(table: pa.Table, faults: list[Fault], rng: np.random.Generator) -> pa.Table:
    for fault in faults:
        if fault.kind == "malformed":
            # Item kinds take a third of the budget; bad items hit events by popularity.
            table = _break_items(table, fault.rate / 3, rng)
    return table


def apply_to_events(table: pa.Table, faults: list[Fault], rng: np.random.Generator, world) -> pa.Table:
    for fault in faults:
        if fault.kind == "shuffled_labels":
            labels = table.column(F.LABEL).to_numpy()
            table = table.set_column(table.schema.get_field_index(F.LABEL), F.LABEL,
                                     pa.array(rng.permutation(labels)))
        elif fault.kind == "malformed":
            table = _break_events(table, fault.rate * 2 / 3, rng, world)
        elif fault.kind == "missing_column":
            table = table.drop_columns([F.PLATFORM])
        elif fault.kind == "renamed_column":
            table = table.rename_columns([c if c != F.HISTORY else "history_items" for c in table.column_names])
        elif fault.kind == "wrong_type":
            idx = table.schema.get_field_index(F.LABEL)
            table = table.set_column(idx, F.LABEL, pc.cast(table.column(F.LABEL), pa.float64()))
    return table


def _pick(n: int, rate: float, kinds: tuple[str, ...], rng: np.random.Generator) -> dict[str, np.ndarray]:
    broken = np.flatnonzero(rng.random(n) < rate)
    which = rng.integers(0, len(kinds), size=len(broken))
    return {kind: broken[which == k] for k, kind in enumerate(kinds)}


def _break_items(table: pa.Table, rate: float, rng: np.random.Generator) -> pa.Table:
    picks = _pick(table.num_rows, rate, ITEM_KINDS, rng)
    images = table.column(F.IMAGE).combine_chunks()
    flat = images.values.to_numpy(zero_copy_only=False).reshape(-1, F.IMAGE_DIM).copy()
    flat[picks["nan_embedding"], 0] = np.nan
    flat[picks["inf_embedding"], 1] = np.inf
    lengths = np.full(table.num_rows, F.IMAGE_DIM)
    lengths[picks["short_embedding"]] = F.IMAGE_DIM - 1
    keep = np.arange(F.IMAGE_DIM)[None, :] < lengths[:, None]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    table = table.set_column(table.schema.get_field_index(F.IMAGE), F.IMAGE,
                             pa.ListArray.from_arrays(offsets, pa.array(flat[keep])))
    titles = table.column(F.TITLE).to_pylist()
    for i in picks["empty_title"]:
        titles[i] = ""
    return table.set_column(table.schema.get_field_index(F.TITLE), F.TITLE, pa.array(titles, pa.string()))


def _break_events(table: pa.Table, rate: float, rng: np.random.Generator, world) -> pa.Table:
    picks = _pick(table.num_rows, rate, EVENT_KINDS, rng)
    items = table.column(F.ITEM_ID).to_numpy().copy()
    items[picks["unknown_item"]] = UNKNOWN_ITEM_OFFSET + picks["unknown_item"]
    table = table.set_column(table.schema.get_field_index(F.ITEM_ID), F.ITEM_ID, pa.array(items))
    labels = table.column(F.LABEL).to_numpy()
    null = np.zeros(table.num_rows, dtype=bool)
    null[picks["null_label"]] = True
    table = table.set_column(table.schema.get_field_index(F.LABEL), F.LABEL,
                             pa.array(labels, mask=null, type=pa.int64()))
    histories = table.column(F.HISTORY).to_pylist()
    for i in picks["long_history"]:
        extra = rng.integers(1, 20) + F.MAX_HISTORY - len(histories[i])
        histories[i] = histories[i] + world.item_ids(rng.integers(0, world.spec.items, size=extra)).tolist()
    return table.set_column(table.schema.get_field_index(F.HISTORY), F.HISTORY,
                            pa.array(histories, pa.list_(pa.int64())))

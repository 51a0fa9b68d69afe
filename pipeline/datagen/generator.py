"""Write date-partitioned raw events and item snapshots, streaming, with planted faults.

Events are produced in fixed-size chunks and written as they are made, so memory stays flat
whatever the number of events per day (peak memory: docs/benchmarks.md). Every chunk
has its own seed derived from (seed, date, chunk index): output is identical for a seed no
matter how it is chunked in time, and a single day can be regenerated alone.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import features as F
from pipeline.contracts import inputs
from pipeline.datagen import faults as faults_mod
from pipeline.datagen.drift import DriftingWorld
from pipeline.datagen.regimes import day_key, regime_spec
from pipeline.datagen.world import World
from pipeline.paths import events_partition, items_partition

log = logging.getLogger(__name__)

CHUNK_EVENTS = 100_000
PART_EVENTS = 500_000     # rows per part file; parts hold several row groups
LAUNCH_FRACTION = 0.1     # share of the catalog launched during the generated period


@dataclass
class DayReport:
    date: str
    events: int
    clicks: int
    items: int
    faults: list[str] = field(default_factory=list)


@dataclass
class GenerationReport:
    raw_root: str
    seed: int
    days: list[DayReport]
    ceiling_auc: float        # logistic regression on the true hidden factors, on the last day's users
    regime: str = "default"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def generate(
    raw_root: Path,
    start: dt.date,
    days: int,
    users: int = 2000,
    items: int = 1000,
    events_per_day: int = 4000,
    ctr: float = 0.12,
    seed: int = 7,
    faults: dict[dt.date, list[str]] | None = None,
    with_ceiling: bool = True,
    regime: str = "default",
) -> GenerationReport:
    """Generate `days` days from `start`; `faults` maps a date to fault specs (see faults.py);
    `regime` names the kind of world (pipeline/datagen/regimes.py; its knobs win over `ctr`).

    `with_ceiling` fits the logistic regression on the true factors (a fixed cost, mostly importing
    scikit-learn, that benchmarks skip: docs/benchmarks.md); the report's `ceiling_auc` is NaN without it.
    """
    faults = faults or {}
    parsed = {day: [faults_mod.parse(s) for s in specs] for day, specs in faults.items()}
    spec = regime_spec(regime, users=users, items=items, ctr=ctr, seed=seed)
    catalog = _DriftingCatalog(DriftingWorld(spec)) if spec.drift else _Catalog(World(spec), days)
    reports = []
    for offset in range(days):
        day = start + dt.timedelta(days=offset)
        day_faults = parsed.get(day, [])
        world, shown = catalog.on(day, offset)
        items_written = catalog.write_snapshot(Path(raw_root), day, offset, day_faults)
        events, clicks = _write_events(Path(raw_root), day, world, shown, events_per_day, day_faults)
        reports.append(DayReport(day.isoformat(), events, clicks, items_written,
                                 [f.spec for f in day_faults]))
        log.info("wrote %s: %d events, ctr %.3f, %d items %s", day, events, clicks / max(events, 1),
                 items_written, [f.spec for f in day_faults] or "")
    last = start + dt.timedelta(days=days - 1)
    ceiling = ceiling_auc(catalog.on(last, days - 1)[0], day_key(last)) if with_ceiling else float("nan")
    return GenerationReport(str(raw_root), seed, reports, ceiling, regime)


class _Catalog:
    """Item snapshots: most items exist from day 0, the rest launch on later days."""

    def __init__(self, world: World, days: int):
        self.world = world
        rng = np.random.default_rng([world.spec.seed, 3])
        n = world.spec.items
        late = rng.random(n) < LAUNCH_FRACTION
        self.launch_day = np.where(late, rng.integers(1, max(days, 2), size=n), 0)
        self.titles = np.array(world.titles(np.arange(n), rng), dtype=object)
        self.categories = np.array(world.categories(np.arange(n)), dtype=object)
        self.prices = np.round(np.exp(rng.normal(3.0, 0.8, size=n)), 2)

    def launched(self, offset: int) -> np.ndarray:
        return np.flatnonzero(self.launch_day <= offset)

    def on(self, day: dt.date, offset: int) -> tuple[World, np.ndarray]:
        """(the world of `day`, the items it may show): one world, the items launched by then."""
        return self.world, self.launched(offset)

    def write_snapshot(self, raw_root: Path, day: dt.date, offset: int, day_faults: list) -> int:
        idx = self.launched(offset)
        out_dir = items_partition(raw_root, day)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / inputs.SUCCESS_MARKER).unlink(missing_ok=True)
        rng = np.random.default_rng([self.world.spec.seed, 4, day.toordinal()])
        writer = None
        for block in range(0, len(idx), 4096):
            part = idx[block:block + 4096]
            table = self._items_table(part)
            table = faults_mod.apply_to_items(table, day_faults, rng)
            if writer is None:
                writer = pq.ParquetWriter(out_dir / "items.parquet", table.schema)
            writer.write_table(table)
        if writer is not None:
            writer.close()
        inputs.mark_landed(out_dir)
        return len(idx)

    def _items_table(self, idx: np.ndarray) -> pa.Table:
        images = self.world.images(idx)
        return pa.table({
            F.ITEM_ID: pa.array(self.world.item_ids(idx)),
            F.TITLE: pa.array(self.titles[idx].tolist(), pa.string()),
            F.CATEGORY: pa.array(self.categories[idx].tolist(), pa.string()),
            F.PRICE: pa.array(self.prices[idx]),
            F.IMAGE: pa.ListArray.from_arrays(
                np.arange(0, images.size + 1, F.IMAGE_DIM, dtype=np.int32), pa.array(images.ravel())
            ),
        })


class _DriftingCatalog(_Catalog):
    """A drifting world's snapshots: each day's catalog is its own (pipeline/datagen/drift.py):
    the items alive that day, shown, and the retired ones still listed, not shown."""

    def __init__(self, timeline: DriftingWorld):        # no launch days: items come and go by themselves
        self.timeline = timeline

    def on(self, day: dt.date, offset: int) -> tuple[World, np.ndarray]:
        """Day `day`'s world; write_snapshot then writes its catalog."""
        self.world = self.timeline.day(day_key(day))
        rows = np.arange(len(self.world.ids))
        self.titles = np.array(self.world.titles(rows), dtype=object)
        self.categories = np.array(self.world.categories(rows), dtype=object)
        self.prices = self.world.prices
        return self.world, self.world.shown

    def launched(self, offset: int) -> np.ndarray:
        return np.arange(len(self.world.ids))      # the whole catalog of the day `on` was given


def _write_events(raw_root: Path, day: dt.date, world: World, launched: np.ndarray,
                  total: int, day_faults: list) -> tuple[int, int]:
    out_dir = events_partition(raw_root, day)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in [*out_dir.glob("part-*.parquet"), out_dir / inputs.SUCCESS_MARKER]:
        stale.unlink(missing_ok=True)
    allowed = np.zeros(world.spec.items, dtype=bool)
    allowed[launched] = True
    pop = world.population(day_key(day))
    writer, part, in_part, clicks = None, 0, 0, 0
    for chunk_index, start in enumerate(range(0, total, CHUNK_EVENTS)):
        rng = np.random.default_rng([world.spec.seed, 5, day.toordinal(), chunk_index])
        table = _events_chunk(world, pop, rng, day, start, min(CHUNK_EVENTS, total - start), allowed)
        table = faults_mod.apply_to_events(table, day_faults, rng, world)
        clicks += int(pa.compute.sum(table.column(F.LABEL)).as_py() or 0) if F.LABEL in table.schema.names \
            else 0
        if writer is None or in_part >= PART_EVENTS:
            if writer is not None:
                writer.close()
                part += 1
            writer = pq.ParquetWriter(out_dir / f"part-{part:05d}.parquet", table.schema)
            in_part = 0
        writer.write_table(table, row_group_size=CHUNK_EVENTS)
        in_part += table.num_rows
    if writer is not None:
        writer.close()
    inputs.mark_landed(out_dir)
    return total, clicks


def _events_chunk(world: World, pop, rng: np.random.Generator, day: dt.date, start: int, n: int,
                  allowed: np.ndarray) -> pa.Table:
    users, items = world.sample_impressions(rng, n, pop)
    # Items not launched yet on this day are swapped for a launched one: no event before launch.
    launched = np.flatnonzero(allowed)
    unlaunched = ~allowed[items]
    items[unlaunched] = rng.choice(launched, size=int(unlaunched.sum()))
    platforms = pop.platform[users]
    offsets, history = world.sample_histories(rng, pop, users)
    unlaunched_history = ~allowed[history]
    history[unlaunched_history] = rng.choice(launched, size=int(unlaunched_history.sum()))
    p = 1 / (1 + np.exp(-world.click_logit(pop, users, items)))
    labels = (rng.random(n) < p).astype(np.int64)
    seconds = np.sort(rng.integers(0, 86_400, size=n))
    midnight = int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()) * 1_000_000
    return pa.table({
        F.EVENT_ID: _event_ids(day, start, n),
        F.EVENT_TS: pa.array(midnight + seconds * 1_000_000, pa.timestamp("us", tz="UTC")),
        F.USER_ID: pa.array(pop.ids[users]),
        F.ITEM_ID: pa.array(world.item_ids(items)),
        F.HISTORY: pa.ListArray.from_arrays(offsets, pa.array(world.item_ids(history))),
        F.PLATFORM: pa.array(np.array(F.PLATFORMS, dtype=object)[platforms].tolist(), pa.string()),
        F.HOUR: pa.array((seconds // 3600).astype(np.int32)),
        F.LABEL: pa.array(labels),
    })


def _event_ids(day: dt.date, start: int, n: int) -> pa.Array:
    """'YYYYMMDD-000000042': unique per day, built in Arrow (a Python f-string per row is much slower)."""
    numbers = pc.utf8_lpad(pc.cast(pa.array(np.arange(start, start + n)), pa.string()), 9, "0")
    return pc.binary_join_element_wise(f"{day:%Y%m%d}", numbers, "-")


def ceiling_auc(world: World, key: int = 0, n: int = 40_000) -> float:
    """AUC of a logistic regression on the true hidden factors of day `key`'s users: the best a
    model can hope for."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng([world.spec.seed, 6])
    pop = world.population(key)
    users, items = world.sample_impressions(rng, n, pop)
    labels = rng.random(n) < 1 / (1 + np.exp(-world.click_logit(pop, users, items)))
    x = world.ceiling_features(pop, users, items)
    half = n // 2
    model = LogisticRegression(max_iter=500).fit(x[:half], labels[:half])
    return float(roc_auc_score(labels[half:], model.predict_proba(x[half:])[:, 1]))

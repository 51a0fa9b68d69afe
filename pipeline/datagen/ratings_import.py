"""Import a ratings log (user, item, rating, time) and its item titles and genres into the raw contract.

The template for bringing one's own data (docs/data.md, *Importing a ratings log*): it writes the
same partitions `python -m pipeline generate-data` writes (`events/ds=D/part-00000.parquet` and
`items/ds=D/items.parquet`, each finished by a `_SUCCESS` marker), by real UTC calendar day, so
`python -m components.validate` and the rest of the chain read them unchanged. The data set vendored
in data/movietweetings-100k/ (MovieTweetings, 100K snapshot, MIT) is the default input.

How each contract column is filled (one rating is one impression):

- `label`: 1 when rating >= `positive_min`. MovieTweetings rates 0-10; its default is 9 (a 9 or a
  10: the user loved the film), which makes 26.4 % of the 100K ratings positive, a high but
  plausible rate for a click-like task with intent (the synthetic data's `ratings_like` regime is
  at 41 %). 10 alone gives 12.4 %, close to the synthetic default of 12 %, but the share of perfect
  10s swings from 7.7 % to 18.7 % between days, and 7 of the 185 day-over-day changes then exceed
  `validate.max_label_rate_drift` (50 %); at 9 the largest change is 41 %. 8 makes half the
  ratings positive. A CSV log has no default: its scale is the user's own.
- `history_item_ids`: the user's items rated strictly earlier (an equal timestamp is not earlier),
  most recent last, the last `MAX_HISTORY` (50) of them. The whole log counts, also before
  `start`.
- `event_ts` / `hour_of_day`: the rating's time in UTC and its UTC hour; the day partition is its
  UTC calendar day.
- `event_id`: `YYYYMMDD-<user_id>-<item_id>-<unix seconds>` (`.ffffff` appended for sub-second
  times): unique while (user, item, time) is, and the same on every re-import.
- `platform`: null (the contract's "context left out"): MovieTweetings does not say which app a
  tweet came from. A CSV log may carry its own `platform` column.
- items: `title` as given; `category` the first listed genre (`NO_GENRE` when there is none);
  `price` null (a CSV items file may carry a `price` column); `image_embedding` a fixed projection
  of the genres (`genre_image`), a stand-in for a real image feature: it carries the genres and
  nothing else.
- items snapshot of day D: every item of the items file rated on or before D, plus the items the
  log never rates (no date to place them: known from the start). A snapshot only grows, so
  `validate.max_catalog_drop` never trips, and a film is not in the catalog before it was first
  rated. Ratings of items the items file lacks are dropped (counted in the report).

Every input problem is a `RatingsImportError` with a one-line message naming the file (and line or
row). Reading and the per-row rules are vectorised (numpy, pyarrow); what is per value in Python is
the parse of each distinct genre list. Time goes into the daily catalogs: 2048 floats per item
per day.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import functools
import hashlib
import json
import logging
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from pipeline.config_sections import PROJECT_ROOT
from pipeline.contracts import features as F
from pipeline.contracts import inputs, raw
from pipeline.paths import events_partition, items_partition

log = logging.getLogger(__name__)

FORMATS = ("movietweetings", "csv")
MOVIETWEETINGS_DIR = PROJECT_ROOT / "data" / "movietweetings-100k"
MOVIETWEETINGS_POSITIVE_MIN = 9.0
RATINGS_COLUMNS = ("user_id", "item_id", "rating", "timestamp")     # a CSV log's header (and `platform`)
ITEMS_COLUMNS = ("item_id", "title", "genres")                      # its items file's (and `price`)
NO_GENRE = "(no genre)"
IMAGE_NONZEROS = 64              # dims each genre sets to +-1 (of F.IMAGE_DIM)
PROJECTION_KEY = b"reco-nightly/genre-image/v1:"
EVENTS_FILE = "part-00000.parquet"
ITEMS_FILE = "items.parquet"
EVENTS_SCHEMA = pa.schema([(name, raw.EVENT_TYPES[name]) for name in F.EVENT_COLUMNS])
_US = 1_000_000
_LATEST_US = int(dt.datetime(2200, 1, 1, tzinfo=dt.UTC).timestamp()) * _US
_DAY_US = 86_400 * _US
_INT = re.compile(r"^\s*[+-]?\d+\s*$")
_NUMBER = r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"


class RatingsImportError(ValueError):
    """An input the importer cannot turn into the contract; the message is one line naming the file."""


@dataclass
class Ratings:
    """The log, one entry per rating (numpy arrays of equal length)."""

    user: np.ndarray          # int64, >= 1
    item: np.ndarray          # int64, >= 1
    rating: np.ndarray        # float64
    ts_us: np.ndarray         # int64, microseconds since the epoch, UTC
    platform: pa.Array | None = None    # string, when the log has one


@dataclass
class Items:
    """The item file: ids, titles and '|'-separated genres, one row per item."""

    item_id: np.ndarray       # int64, unique, >= 1
    title: pa.Array           # string
    genres: pa.Array          # string, '|'-separated, may be empty
    price: pa.Array | None = None       # float64, when the file has one


@dataclass
class ImportReport:
    raw_root: str
    format: str
    ratings_file: str
    items_file: str
    positive_min: float
    start: str
    end: str
    ratings_read: int
    ratings_unknown_item: int             # rated items the items file lacks: dropped
    users: int
    events: int                           # written, over start..end
    positive_rate: float
    catalog_items: int                    # in the last snapshot written
    items_without_title: int
    days_without_ratings: list[str]       # no events partition written
    days_below_eval_min_rows: dict[str, int]
    eval_min_rows: int
    seconds: float
    days: list[dict] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


# --- reading -----------------------------------------------------------------------------

def _read_text(path: Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise RatingsImportError(f"{path}: cannot read: {err.strerror or err}") from err
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise RatingsImportError(f"{path}:{line}: not UTF-8 text ({data[err.start:err.start + 8]!r})") from err


def _lines(path: Path) -> tuple[pa.Array, np.ndarray]:
    """The non-blank lines of a text file and their line numbers."""
    lines = _read_text(path).splitlines()
    numbers = np.array([n for n, line in enumerate(lines, 1) if line.strip()], dtype=np.int64)
    if not len(numbers):
        raise RatingsImportError(f"{path}: no rows")
    return pa.array([lines[n - 1] for n in numbers.tolist()], pa.string()), numbers


def _split(path: Path, text: pa.Array, numbers: np.ndarray, count: int, **options) -> pa.Array:
    """`text` split on '::' into `count` fields; a line with another number names its file and line."""
    parts = pc.split_pattern(text, "::", **options)
    bad = np.flatnonzero(pc.list_value_length(parts).to_numpy(zero_copy_only=False) != count)
    if len(bad):
        raise RatingsImportError(f"{path}:{numbers[bad[0]]}: expected {count} fields separated by '::', "
                                 f"got {text[int(bad[0])].as_py()[:80]!r}")
    return parts


def _where(path: Path, numbers: np.ndarray | None, index: int) -> str:
    return f"{path}:{numbers[index]}" if numbers is not None else f"{path}: data row {index + 1}"


def _integers(values: pa.Array, what: str, path: Path, numbers: np.ndarray | None) -> np.ndarray:
    """Integer ids >= 1 (the contract's ids; 0 means "no item")."""
    ok = pc.fill_null(pc.match_substring_regex(values, _INT.pattern), False).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: {what} {values[i].as_py()!r} is not an integer "
                                 f"(map your ids to integers >= 1 first, and keep the mapping)")
    out = pc.cast(pc.utf8_trim_whitespace(values), pa.int64()).to_numpy()
    small = np.flatnonzero(out < 1)
    if len(small):
        raise RatingsImportError(f"{_where(path, numbers, int(small[0]))}: {what} {int(out[small[0]])} is below 1 "
                                 f"(0 means 'no item' in the contract)")
    return out


def _numbers(values: pa.Array, what: str, path: Path, numbers: np.ndarray | None) -> np.ndarray:
    ok = pc.fill_null(pc.match_substring_regex(values, _NUMBER), False).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: {what} {values[i].as_py()!r} is not a number")
    return pc.cast(pc.utf8_trim_whitespace(values), pa.float64()).to_numpy()


def _timestamps(values: pa.Array, path: Path, numbers: np.ndarray | None) -> np.ndarray:
    """Unix seconds (integer or decimal) or ISO 8601 with a zone offset, as UTC microseconds."""
    numeric = pc.fill_null(pc.match_substring_regex(values, _NUMBER), False).to_numpy(zero_copy_only=False)
    if numeric.all():
        if pc.all(pc.match_substring_regex(values, _INT.pattern)).as_py():
            ts_us = pc.cast(pc.utf8_trim_whitespace(values), pa.int64()).to_numpy() * _US
        else:
            ts_us = np.round(_numbers(values, "timestamp", path, numbers) * _US).astype(np.int64)
    elif numeric.any():
        i = int(np.flatnonzero(~numeric)[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: timestamp {values[i].as_py()!r} mixes with unix "
                                 f"seconds in the same column")
    else:
        try:
            ts_us = pc.cast(pc.cast(pc.utf8_trim_whitespace(values), pa.timestamp("us", tz="UTC")), pa.int64())
        except pa.ArrowInvalid as err:
            detail = str(err).splitlines()[0].split(". If these")[0]
            raise RatingsImportError(f"{path}: timestamp is neither unix seconds nor ISO 8601 with a zone offset "
                                     f"(the days are UTC days; a time without a zone is ambiguous): {detail}") from err
        ts_us = ts_us.to_numpy()
    late = np.flatnonzero((ts_us < 0) | (ts_us >= _LATEST_US))
    if len(late):
        i = int(late[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: timestamp {values[i].as_py()!r} is not between 1970 "
                                 f"and 2200: expected unix seconds (milliseconds?)")
    return ts_us


def read_movietweetings(ratings_path: Path, movies_path: Path) -> tuple[Ratings, Items]:
    """ratings.dat (`user::movie::rating::unix seconds`) and movies.dat (`movie::title (year)::genres`)."""
    text, numbers = _lines(ratings_path)
    parts = _split(ratings_path, text, numbers, 4)
    user, item, rating, ts = (pc.list_element(parts, k) for k in range(4))
    ratings = Ratings(user=_integers(user, "user_id", ratings_path, numbers),
                      item=_integers(item, "item_id", ratings_path, numbers),
                      rating=_numbers(rating, "rating", ratings_path, numbers),
                      ts_us=_timestamps(ts, ratings_path, numbers))
    text, numbers = _lines(movies_path)
    head = _split(movies_path, text, numbers, 2, max_splits=1)               # id :: the rest
    tail = _split(movies_path, pc.list_element(head, 1), numbers, 2,          # a title may hold '::'
                  max_splits=1, reverse=True)
    items = Items(item_id=_integers(pc.list_element(head, 0), "item_id", movies_path, numbers),
                  title=pc.list_element(tail, 0), genres=pc.list_element(tail, 1))
    _unique_items(items, movies_path)
    return ratings, items


def _read_csv(path: Path, required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, pa.Array]:
    """The named columns of a CSV file with a header, as strings (parsed and checked by the caller)."""
    try:
        with open(path, encoding="utf-8", newline="") as file:
            first = file.readline()
    except OSError as err:
        raise RatingsImportError(f"{path}: cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise RatingsImportError(f"{path}:1: not UTF-8 text") from err
    names = [name.strip() for name in next(csv.reader([first]), [])]
    missing = [c for c in required if c not in names]
    if missing:
        raise RatingsImportError(f"{path}: missing column(s) {', '.join(missing)}: the header must name "
                                 f"{', '.join(required)} (found {', '.join(names) or 'nothing'})")
    wanted = [c for c in (*required, *optional) if c in names]
    try:
        table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            include_columns=wanted, column_types={c: pa.string() for c in wanted},
            strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowException, OSError) as err:
        raise RatingsImportError(f"{path}: not a readable CSV file: {str(err).splitlines()[0]}") from err
    if not table.num_rows:
        raise RatingsImportError(f"{path}: no rows")
    table = table.combine_chunks()
    return {c: table.column(c).chunk(0) for c in wanted}


def read_csv_log(ratings_path: Path, items_path: Path) -> tuple[Ratings, Items]:
    """A CSV log `user_id,item_id,rating,timestamp[,platform]` and its items `item_id,title,genres[,price]`
    (genres '|'-separated, may be empty)."""
    col = _read_csv(ratings_path, RATINGS_COLUMNS, ("platform",))
    platform = None
    if "platform" in col:
        blank = pc.equal(pc.utf8_trim_whitespace(col["platform"]), "")
        platform = pc.if_else(blank, pa.scalar(None, pa.string()), col["platform"])
    ratings = Ratings(user=_integers(col["user_id"], "user_id", ratings_path, None),
                      item=_integers(col["item_id"], "item_id", ratings_path, None),
                      rating=_numbers(col["rating"], "rating", ratings_path, None),
                      ts_us=_timestamps(col["timestamp"], ratings_path, None), platform=platform)
    col = _read_csv(items_path, ITEMS_COLUMNS, ("price",))
    price = None
    if "price" in col:
        blank = pc.equal(pc.utf8_trim_whitespace(col["price"]), "").to_numpy(zero_copy_only=False)
        values = np.full(len(blank), np.nan)
        if (~blank).any():
            values[~blank] = _numbers(col["price"].filter(pa.array(~blank)), "price", items_path, None)
        price = pa.array(values, pa.float64(), mask=blank)
    items = Items(item_id=_integers(col["item_id"], "item_id", items_path, None), title=col["title"],
                  genres=col["genres"], price=price)
    _unique_items(items, items_path)
    return ratings, items


def _unique_items(items: Items, path: Path) -> None:
    ids, counts = np.unique(items.item_id, return_counts=True)
    if (counts > 1).any():
        repeated = ids[counts > 1]
        raise RatingsImportError(f"{path}: {len(repeated)} item id(s) listed more than once (first: "
                                 f"{int(repeated[0])}): which row is right is unknown")


# --- the rules ---------------------------------------------------------------------------

def parse_genres(genres: str | None) -> list[str]:
    """'Crime|Drama' -> ['Crime', 'Drama']: trimmed, empty parts and repeats dropped, order kept."""
    return list(dict.fromkeys(g.strip() for g in (genres or "").split("|") if g.strip()))


def category(genres: str | None) -> str:
    """The first listed genre, or NO_GENRE."""
    return (parse_genres(genres) or [NO_GENRE])[0]


@functools.lru_cache(maxsize=4096)
def genre_vector(genre: str) -> np.ndarray:
    """One genre's fixed vector: +-1 on IMAGE_NONZEROS dims, 0 elsewhere, positions and signs drawn
    from SHAKE-256 of the genre's name (no RNG: the same on every machine and numpy version). A sparse
    random projection (Achlioptas; Li, Hastie & Church): distinct genres are near-orthogonal."""
    stream = hashlib.shake_256(PROJECTION_KEY + genre.encode("utf-8")).digest(4 * F.IMAGE_DIM + IMAGE_NONZEROS)
    keys = np.frombuffer(stream[:4 * F.IMAGE_DIM], dtype="<u4")
    dims = np.argsort(keys, kind="stable")[:IMAGE_NONZEROS]
    signs = np.where(np.frombuffer(stream[4 * F.IMAGE_DIM:], dtype=np.uint8) & 1, 1.0, -1.0)
    vector = np.zeros(F.IMAGE_DIM, np.float32)
    vector[dims] = signs
    vector.setflags(write=False)
    return vector


def genre_image(genres: str | None) -> np.ndarray:
    """The stand-in image of an item: the sum of its distinct genres' vectors over sqrt(their number)
    (NO_GENRE's vector when it has none). It depends on the set of genres only, not their order."""
    names = sorted(parse_genres(genres)) or [NO_GENRE]
    return (np.sum([genre_vector(g) for g in names], axis=0) / np.sqrt(len(names))).astype(np.float32)


def labels(rating: np.ndarray, positive_min: float) -> np.ndarray:
    return (rating >= positive_min).astype(np.int64)


def histories(user: np.ndarray, item: np.ndarray, ts_us: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, offsets, values): rows sorted by (user, time, item) = `order`; row k's history is
    values[offsets[k]:offsets[k + 1]], the user's items of strictly earlier times, most recent last,
    at most F.MAX_HISTORY. Vectorised: each history is a slice of the sorted item column."""
    order = np.lexsort((item, ts_us, user))
    u, t = user[order], ts_us[order]
    n = len(order)
    rows = np.arange(n)
    new_user = np.r_[True, u[1:] != u[:-1]] if n else np.zeros(0, bool)
    new_time = new_user | np.r_[True, t[1:] != t[:-1]] if n else np.zeros(0, bool)
    user_first = np.maximum.accumulate(np.where(new_user, rows, 0))
    time_first = np.maximum.accumulate(np.where(new_time, rows, 0))      # first row of the same (user, time)
    length = np.minimum(time_first - user_first, F.MAX_HISTORY)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(length, out=offsets[1:])
    gather = np.repeat(time_first - length - offsets[:-1], length) + np.arange(offsets[-1])
    return order, offsets, item[order][gather]


def _event_ids(ts: pa.Array, user: np.ndarray, item: np.ndarray, ts_us: np.ndarray) -> pa.Array:
    seconds, micros = np.divmod(ts_us, _US)
    second_text = pc.cast(pa.array(seconds), pa.string())
    if micros.any():
        fraction = pc.binary_join_element_wise(".", pc.utf8_lpad(pc.cast(pa.array(micros), pa.string()), 6, "0"), "")
        second_text = pc.if_else(pa.array(micros != 0), pc.binary_join_element_wise(second_text, fraction, ""),
                                 second_text)
    return pc.binary_join_element_wise(pc.strftime(ts, format="%Y%m%d"), pc.cast(pa.array(user), pa.string()),
                                       pc.cast(pa.array(item), pa.string()), second_text, "-")


def events_table(ratings: Ratings, positive_min: float) -> tuple[pa.Table, np.ndarray]:
    """Every rating as a contract event, sorted by (time, user, item), and each row's UTC day number."""
    order, offsets, values = histories(ratings.user, ratings.item, ratings.ts_us)
    # 64-bit offsets (a big log's histories may pass 2**31 ids); each day is cast to the contract's list.
    history = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int64()))
    user, item, ts_us = ratings.user[order], ratings.item[order], ratings.ts_us[order]
    by_time = np.lexsort((item, user, ts_us))
    user, item, ts_us = user[by_time], item[by_time], ts_us[by_time]
    ts = pa.array(ts_us, pa.timestamp("us", tz="UTC"))
    platform = (pa.nulls(len(ts_us), pa.string()) if ratings.platform is None
                else ratings.platform.take(pa.array(order[by_time])))
    table = pa.table({
        F.EVENT_ID: _event_ids(ts, user, item, ts_us),
        F.EVENT_TS: ts,
        F.USER_ID: pa.array(user),
        F.ITEM_ID: pa.array(item),
        F.HISTORY: history.take(pa.array(by_time)),
        F.PLATFORM: platform,
        F.HOUR: pa.array((np.mod(ts_us, _DAY_US) // (3600 * _US)).astype(np.int32)),
        F.LABEL: pa.array(labels(ratings.rating[order][by_time], positive_min)),
    })
    return table, np.floor_divide(ts_us, _DAY_US)


def catalog_table(items: Items, first_day: np.ndarray) -> pa.Table:
    """The item file as contract rows, ordered by the UTC day each item was first rated (never rated:
    first), then id: the snapshot of day D is a prefix of it."""
    order = np.lexsort((items.item_id, first_day))
    genres = pc.fill_null(items.genres.take(pa.array(order)), "")
    distinct, codes = np.unique(np.array(genres.to_pylist(), dtype=object).astype(str), return_inverse=True)
    images = np.stack([genre_image(g) for g in distinct.tolist()]) if len(distinct) else \
        np.zeros((0, F.IMAGE_DIM), np.float32)
    flat = np.take(images, codes.reshape(-1), axis=0).reshape(-1)
    n = len(order)
    return pa.table({
        F.ITEM_ID: pa.array(items.item_id[order]),
        F.TITLE: items.title.take(pa.array(order)),
        F.CATEGORY: pa.array(np.array([category(g) for g in distinct.tolist()], dtype=object)[codes.reshape(-1)]
                             .tolist() if n else [], pa.string()),
        F.PRICE: pa.nulls(n, pa.float64()) if items.price is None else items.price.take(pa.array(order)),
        F.IMAGE: pa.ListArray.from_arrays(pa.array(np.arange(0, n * F.IMAGE_DIM + 1, F.IMAGE_DIM, dtype=np.int32)),
                                          pa.array(flat, pa.float32())),
    })


# --- writing -----------------------------------------------------------------------------

def _fresh(folder: Path, pattern: str) -> None:
    """A partition about to be rewritten: its marker first (no reader trusts it mid-write), then its files."""
    if folder.is_dir():
        (folder / inputs.SUCCESS_MARKER).unlink(missing_ok=True)
        for stale in folder.glob(pattern):
            stale.unlink()


def _write(table: pa.Table, folder: Path, name: str, **options) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / name, compression="zstd", **options)
    inputs.mark_landed(folder)


def import_ratings(raw_root: Path, ratings: Ratings, items: Items, positive_min: float,
                   start: dt.date | None = None, end: dt.date | None = None, *, fmt: str = "",
                   ratings_file: str = "", items_file: str = "", eval_min_rows: int = 0) -> ImportReport:
    """Write the events and items partitions of every UTC day from `start` to `end` (default: the
    log's first and last day) under `raw_root`; histories use the whole log."""
    began = time.monotonic()
    raw_root = Path(raw_root)
    known = np.isin(ratings.item, items.item_id)
    unknown = int((~known).sum())
    if unknown:
        missing = np.unique(ratings.item[~known])
        log.warning("%d ratings of %d item id(s) the items file lacks are dropped (first: %d)",
                    unknown, len(missing), int(missing[0]))
        ratings = Ratings(ratings.user[known], ratings.item[known], ratings.rating[known], ratings.ts_us[known],
                          None if ratings.platform is None else ratings.platform.filter(pa.array(known)))
    if not len(ratings.user):
        raise RatingsImportError(f"{ratings_file or 'ratings'}: no rating of an item in {items_file or 'the items'}")
    events, day_numbers = events_table(ratings, positive_min)
    epoch = dt.date(1970, 1, 1)
    first_log, last_log = (epoch + dt.timedelta(days=int(d)) for d in (day_numbers[0], day_numbers[-1]))
    if start and end and start > end:
        raise RatingsImportError(f"--start {start} is after --end {end}")
    end = end or max(last_log, start or last_log)
    start = start or min(first_log, end)
    lo, hi = (start - epoch).days, (end - epoch).days
    if not ((day_numbers >= lo) & (day_numbers <= hi)).any():
        raise RatingsImportError(f"no ratings from {start} to {end}: the log spans {first_log} to {last_log}")
    first_seen = np.full(len(items.item_id), np.iinfo(np.int64).min)
    rated, first = _first_rating_day(ratings.item, ratings.ts_us)
    pos = np.searchsorted(np.sort(items.item_id), rated)
    by_id = np.argsort(items.item_id)
    first_seen[by_id[pos]] = first
    catalog = catalog_table(items, first_seen)
    catalog_days = np.sort(first_seen)
    with_statistics = [F.ITEM_ID, F.TITLE, F.CATEGORY, F.PRICE]        # not of the 2048 floats: a third of the write
    days, empty, small = [], [], {}
    for day_number in range(lo, hi + 1):
        day = epoch + dt.timedelta(days=day_number)
        snapshot = catalog.slice(0, int(np.searchsorted(catalog_days, day_number, side="right")))
        _fresh(items_partition(raw_root, day), "*.parquet")
        if snapshot.num_rows:            # no catalog yet (a day before the log): no snapshot, as no data
            _write(snapshot, items_partition(raw_root, day), ITEMS_FILE, write_statistics=with_statistics)
        a, b = np.searchsorted(day_numbers, [day_number, day_number + 1])
        rows = int(b - a)
        _fresh(events_partition(raw_root, day), "part-*.parquet")
        if rows:
            _write(events.slice(int(a), rows).cast(EVENTS_SCHEMA), events_partition(raw_root, day), EVENTS_FILE)
        else:                            # a gap in the log: no partition (validate: "missing"), named in the report
            empty.append(str(day))
        if 0 < rows < eval_min_rows:
            small[str(day)] = rows
        positives = int(pc.sum(events.column(F.LABEL).slice(int(a), rows)).as_py() or 0)
        days.append({"date": str(day), "events": rows, "positives": positives, "items": snapshot.num_rows})
        log.info("wrote %s: %d events (%d positive), %d items", day, rows, positives, snapshot.num_rows)
    written = sum(d["events"] for d in days)
    titles = catalog.column(F.TITLE)
    untitled = int(pc.sum(pc.fill_null(pc.equal(pc.utf8_trim_whitespace(titles), ""), True)).as_py() or 0)
    if untitled:
        log.warning("%d items have no title: the row rules reject them and their events (empty_title)", untitled)
    return ImportReport(
        raw_root=str(raw_root), format=fmt, ratings_file=ratings_file, items_file=items_file,
        positive_min=positive_min, start=str(start), end=str(end), ratings_read=len(known),
        ratings_unknown_item=unknown, users=int(len(np.unique(ratings.user))), events=written,
        positive_rate=round(sum(d["positives"] for d in days) / written, 4), catalog_items=days[-1]["items"],
        items_without_title=untitled, days_without_ratings=empty, days_below_eval_min_rows=small,
        eval_min_rows=eval_min_rows, seconds=round(time.monotonic() - began, 2), days=days)


def _first_rating_day(item: np.ndarray, ts_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rated item ids, the UTC day number of each one's first rating)."""
    order = np.lexsort((ts_us, item))
    item, day = item[order], np.floor_divide(ts_us[order], _DAY_US)
    first = np.r_[True, item[1:] != item[:-1]]
    return item[first], day[first]


def read_log(fmt: str, ratings_path: Path | None, items_path: Path | None) -> tuple[Ratings, Items, Path, Path]:
    """Read a log in `fmt` (FORMATS); MovieTweetings defaults to the vendored data set."""
    if fmt not in FORMATS:
        raise RatingsImportError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "movietweetings":
        ratings_path = Path(ratings_path or MOVIETWEETINGS_DIR / "ratings.dat")
        items_path = Path(items_path or MOVIETWEETINGS_DIR / "movies.dat")
        return (*read_movietweetings(ratings_path, items_path), ratings_path, items_path)
    if ratings_path is None or items_path is None:
        raise RatingsImportError("--format csv needs --ratings FILE (user_id,item_id,rating,timestamp) and "
                                 "--items FILE (item_id,title,genres)")
    return (*read_csv_log(Path(ratings_path), Path(items_path)), Path(ratings_path), Path(items_path))


# --- the command -------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (and exit 2), like every other input problem."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m pipeline import-ratings",
        description="Import a ratings log into the raw contract by UTC day (docs/data.md, Importing a ratings log). "
                    "Default input: the vendored MovieTweetings 100K data set.")
    parser.add_argument("--format", default="movietweetings", metavar="{" + ",".join(FORMATS) + "}",
                        help="movietweetings: '::'-separated ratings.dat and movies.dat; csv: a header "
                             "user_id,item_id,rating,timestamp[,platform] and an items file "
                             "item_id,title,genres[,price]")
    parser.add_argument("--ratings", type=Path, help="the ratings log (default: data/movietweetings-100k/ratings.dat)")
    parser.add_argument("--items", type=Path, help="titles and genres (default: data/movietweetings-100k/movies.dat)")
    parser.add_argument("--positive-min", type=float,
                        help=f"label = rating >= this (default {MOVIETWEETINGS_POSITIVE_MIN:g} for "
                             f"movietweetings' 0-10 scale; required for csv)")
    parser.add_argument("--out", type=Path, help="raw data root (default: config data.raw_root)")
    parser.add_argument("--start", type=_date, help="first UTC day written, YYYY-MM-DD (default: the log's first)")
    parser.add_argument("--end", type=_date, help="last UTC day written (default: the log's last)")
    parser.add_argument("--config", help="params file (default: $RECO_CONFIG or conf/params.yaml)")
    return parser


def _date(value: str) -> dt.date:
    from pipeline.paths import parse_date

    try:
        return parse_date(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{value!r} is not YYYY-MM-DD") from err


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from pipeline.config import ConfigError, load_config

    try:
        if args.format not in FORMATS:
            raise RatingsImportError(f"unknown format {args.format!r}: expected one of {', '.join(FORMATS)}")
        positive_min = args.positive_min
        if positive_min is None:
            if args.format != "movietweetings":
                raise RatingsImportError(f"--format {args.format} needs --positive-min: the rating scale is yours "
                                         f"(label = rating >= it)")
            positive_min = MOVIETWEETINGS_POSITIVE_MIN
        cfg = load_config(args.config)
        ratings, items, ratings_path, items_path = read_log(args.format, args.ratings, args.items)
        report = import_ratings(args.out or cfg.data.raw_root, ratings, items, positive_min, args.start, args.end,
                                fmt=args.format, ratings_file=str(ratings_path), items_file=str(items_path),
                                eval_min_rows=cfg.eval.min_rows)
    except (RatingsImportError, ConfigError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    sys.stdout.write(report.to_json() + "\n")
    log.info("%d events over %d days (%s to %s), positive rate %.3f, %d days below eval.min_rows=%d, %.1f s",
             report.events, len(report.days), report.start, report.end, report.positive_rate,
             len(report.days_below_eval_min_rows), report.eval_min_rows, report.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

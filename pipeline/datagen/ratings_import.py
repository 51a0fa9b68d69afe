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
- ids: a log's integer ids >= 1 are kept; other ids (SKUs, UUIDs) become stable hashes, and
  `id_map/users.parquet` / `id_map/items.parquet` under the raw root map the log's ids to them
  (ratings_read.py; ratings_formats.py reads the files, in the column names, delimiters and
  encodings real logs come in).

Every input problem is a `RatingsImportError` with a one-line message naming the file (and line or
row). The per-row rules are vectorised (numpy, pyarrow); what is per value in Python is the parse
of each distinct genre list. Time goes into the daily catalogs: 2048 floats per item per day.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.contracts import features as F
from pipeline.contracts import inputs, raw
from pipeline.datagen.ratings_formats import CSV_COLUMNS, FORMATS, LogDialect, read_log
from pipeline.datagen.ratings_read import Items, Ratings, RatingsImportError
from pipeline.datagen.ratings_rows import catalog_table, events_table, repeats
from pipeline.paths import events_partition, items_partition

log = logging.getLogger(__name__)

MOVIETWEETINGS_POSITIVE_MIN = 9.0
MAX_DAYS_UNASKED = 400           # more days than this are written only when --start and --end name them
ID_MAP_DIR = "id_map"             # beside events/ and items/: the log's own ids -> the contract's, where hashed
EVENTS_FILE = "part-00000.parquet"
ITEMS_FILE = "items.parquet"
EVENTS_SCHEMA = pa.schema([(name, raw.EVENT_TYPES[name]) for name in F.EVENT_COLUMNS])
_US = 1_000_000
_DAY_US = 86_400 * _US


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
    ratings_repeated: int                 # the same user, item and time as an earlier row: dropped
    users: int
    events: int                           # written, over start..end
    positive_rate: float
    catalog_items: int                    # in the last snapshot written
    items_without_title: int
    days_without_ratings: list[str]       # no events partition written
    days_below_eval_min_rows: dict[str, int]
    eval_min_rows: int
    seconds: float
    hashed_ids: list[str] = field(default_factory=list)   # "user", "item": replaced by contract_id (id_map/)
    days: list[dict] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


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
        ratings = ratings.filter(known)
    if not len(ratings.user):
        raise RatingsImportError(f"{ratings_file or 'ratings'}: no rating of an item in {items_file or 'the items'}")
    repeated = repeats(ratings)
    if repeated.any():
        log.warning("%d ratings repeat an earlier row's user, item and time: dropped (the first is kept)",
                    int(repeated.sum()))
        ratings = ratings.filter(~repeated)
    events, day_numbers = events_table(ratings, positive_min)
    epoch = dt.date(1970, 1, 1)
    first_log, last_log = (epoch + dt.timedelta(days=int(d)) for d in (day_numbers[0], day_numbers[-1]))
    if start and end and start > end:
        raise RatingsImportError(f"--start {start} is after --end {end}")
    chosen = bool(start and end)
    end = end or max(last_log, start or last_log)
    start = start or min(first_log, end)
    lo, hi = (start - epoch).days, (end - epoch).days
    if hi - lo + 1 > MAX_DAYS_UNASKED and not chosen:
        raise RatingsImportError(
            f"{hi - lo + 1:,} days to write ({start} to {end}; the log spans {first_log} to {last_log}): every "
            f"day gets an items snapshot of 2048 floats an item, so name the days with both --start and --end "
            f"(a replay needs its training window plus one day a night)")
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
    hashed = _write_id_maps(raw_root, ratings, items)
    written = sum(d["events"] for d in days)
    titles = catalog.column(F.TITLE)
    untitled = int(pc.sum(pc.fill_null(pc.equal(pc.utf8_trim_whitespace(titles), ""), True)).as_py() or 0)
    if untitled:
        log.warning("%d items have no title: the row rules reject them and their events (empty_title)", untitled)
    return ImportReport(
        raw_root=str(raw_root), format=fmt, ratings_file=ratings_file, items_file=items_file,
        positive_min=positive_min, start=str(start), end=str(end), ratings_read=len(known),
        ratings_unknown_item=unknown, ratings_repeated=int(repeated.sum()),
        users=int(len(np.unique(ratings.user))), events=written,
        positive_rate=round(sum(d["positives"] for d in days) / written, 4), catalog_items=days[-1]["items"],
        items_without_title=untitled, days_without_ratings=empty, days_below_eval_min_rows=small,
        eval_min_rows=eval_min_rows, seconds=round(time.monotonic() - began, 2), hashed_ids=hashed, days=days)


def _write_id_maps(raw_root: Path, ratings: Ratings, items: Items) -> list[str]:
    """id_map/<kind>s.parquet (`source_id`, the log's text; `id`, the contract's) for each kind of id
    that was hashed; a kind that was not has its stale map removed. Returns the hashed kinds."""
    folder = raw_root / ID_MAP_DIR
    maps = {"user": (ratings.user_text, ratings.user), "item": (items.item_text, items.item_id)}
    hashed = []
    for kind, (text, ids) in maps.items():
        path = folder / f"{kind}s.parquet"
        if text is None:
            path.unlink(missing_ok=True)
            continue
        table = pa.table({"source_id": pc.utf8_trim_whitespace(text), "id": pa.array(ids, pa.int64())})
        table = table.group_by(["source_id", "id"]).aggregate([]).sort_by("source_id")
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, compression="zstd")
        hashed.append(kind)
    return hashed


def _first_rating_day(item: np.ndarray, ts_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rated item ids, the UTC day number of each one's first rating)."""
    order = np.lexsort((ts_us, item))
    item, day = item[order], np.floor_divide(ts_us[order], _DAY_US)
    first = np.r_[True, item[1:] != item[:-1]]
    return item[first], day[first]


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
                             "item_id,title,genres[,price]; jsonl: JSON Lines with those fields (a list of "
                             "genres or categories is fine)")
    parser.add_argument("--ratings", type=Path, help="the ratings log (default: data/movietweetings-100k/ratings.dat)")
    parser.add_argument("--items", type=Path, help="titles and genres (default: data/movietweetings-100k/movies.dat; "
                                                   "csv, jsonl: optional, without it the titles are the item ids)")
    parser.add_argument("--positive-min", type=float,
                        help=f"label = rating >= this (default {MOVIETWEETINGS_POSITIVE_MIN:g} for "
                             f"movietweetings' 0-10 scale; required for csv and jsonl)")
    parser.add_argument("--out", type=Path, help="raw data root (default: config data.raw_root)")
    parser.add_argument("--start", type=_date, help="first UTC day written, YYYY-MM-DD (default: the log's first)")
    parser.add_argument("--end", type=_date, help="last UTC day written (default: the log's last)")
    parser.add_argument("--column", action="append", type=_column, default=[], metavar="CONTRACT=YOURS",
                        help=f"the name in your files of one of {', '.join(CSV_COLUMNS)} (repeatable), e.g. "
                             "--column user_id=userId --column item_id=movieId; with --no-header, its column "
                             "number (1 = first), e.g. --column item_id=1 --column user_id=2")
    parser.add_argument("--encoding", default="utf-8", help="the files' text encoding (default utf-8; "
                                                            "MovieLens 1M's movies.dat is latin-1)")
    parser.add_argument("--delimiter", default=",", help="csv: the field delimiter (default ','; 'tab' for a TSV)")
    parser.add_argument("--no-header", action="store_true",
                        help="csv: the files have no header line; their columns are in the contract's order "
                             "unless --column numbers them")
    parser.add_argument("--time-zone", metavar="ZONE",
                        help="the IANA time zone (e.g. UTC, America/Phoenix) of timestamps written without a "
                             "zone offset (default: such timestamps are refused)")
    parser.add_argument("--config", help="params file (default: $RECO_CONFIG or conf/params.yaml)")
    return parser


def _column(value: str) -> tuple[str, str]:
    contract, sep, yours = value.partition("=")
    if not sep or contract.strip() not in CSV_COLUMNS or not yours.strip():
        raise argparse.ArgumentTypeError(f"{value!r} is not CONTRACT=YOURS with CONTRACT one of "
                                         f"{', '.join(CSV_COLUMNS)}")
    return contract.strip(), yours.strip()


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
        dialect = LogDialect(dict(args.column), args.encoding, args.delimiter, header=not args.no_header,
                             time_zone=args.time_zone)
        ratings, items, ratings_path, items_path = read_log(args.format, args.ratings, args.items, dialect)
        report = import_ratings(args.out or cfg.data.raw_root, ratings, items, positive_min, args.start, args.end,
                                fmt=args.format, ratings_file=str(ratings_path), items_file=str(items_path or ""),
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

"""The file formats `python -m pipeline import-ratings` reads: MovieTweetings' (also MovieLens
1M's) '::'-separated ratings.dat and movies.dat, CSV files (with a header or without), and JSON
Lines (one object per line: Amazon Reviews, Yelp, Goodreads).

What real files differ in, and how each is read (`LogDialect`):
- field names: `user_id,item_id,rating,timestamp` (and `item_id,title,genres`) unless `columns`
  maps them to the log's own (MovieLens' `userId`, `movieId`; Amazon's `parent_asin`); a CSV
  without a header has them in the contract's order unless `columns` numbers them (1 = first).
- delimiter: commas unless told (a TSV, a European Excel's ';').
- text encoding: UTF-8 unless told (MovieLens 1M's movies.dat is Latin-1); a byte-order mark at
  the start (Excel's "CSV UTF-8") is not part of the first value.
- times without a zone offset: refused unless the log's time zone is named (`time_zone`).
- JSON values: numbers and strings are read as text, a list (Amazon's categories) is '|'-joined.
The values are parsed by ratings_read.py.
"""
from __future__ import annotations

import codecs
import csv
import logging
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from pipeline.config_sections import PROJECT_ROOT
from pipeline.datagen.ratings_jsonl import read_jsonl
from pipeline.datagen.ratings_read import (
    BOM,
    Items,
    Ratings,
    RatingsImportError,
    check_unique_items,
    parse_log,
    parse_numbers,
)

log = logging.getLogger(__name__)

FORMATS = ("movietweetings", "csv", "jsonl")
MOVIETWEETINGS_DIR = PROJECT_ROOT / "data" / "movietweetings-100k"
RATINGS_COLUMNS = ("user_id", "item_id", "rating", "timestamp")     # a CSV log's header, in this order
RATINGS_OPTIONAL = ("platform",)                                    # ... then these when present
ITEMS_COLUMNS = ("item_id", "title", "genres")                      # its items file's
ITEMS_OPTIONAL = ("price",)
CSV_COLUMNS = tuple(dict.fromkeys((*RATINGS_COLUMNS, *RATINGS_OPTIONAL, *ITEMS_COLUMNS, *ITEMS_OPTIONAL)))


@dataclass(frozen=True)
class LogDialect:
    """How a user's log files are written: field names (contract name -> theirs; in a CSV without a
    header, the column's number, 1 = first), text encoding, CSV delimiter (one character; "tab"
    for a TSV), whether a CSV has a header, and the time zone of times without an offset."""

    columns: dict[str, str] = field(default_factory=dict)
    encoding: str = "utf-8"
    delimiter: str = ","
    header: bool = True          # False: no header line; columns by number, else in the contract's order
    time_zone: str | None = None  # an IANA zone (Europe/Berlin) for times written without an offset

    def __post_init__(self):
        """Checked and normalised once, where it is made: a codec's own name, 'tab' as a tab."""
        try:
            encoding = codecs.lookup(self.encoding).name
        except LookupError as err:
            raise RatingsImportError(f"unknown text encoding {self.encoding!r}") from err
        delimiter = "\t" if self.delimiter in ("tab", "\\t") else self.delimiter
        if len(delimiter) != 1 or delimiter in "\"\r\n":
            raise RatingsImportError(f"the delimiter must be one character other than a quote or a line end "
                                     f"(or 'tab'), not {self.delimiter!r}")
        numbered = [v for v in self.columns.values() if not (v.isdigit() and int(v) >= 1)]
        if not self.header and numbered:
            raise RatingsImportError(f"a file without a header names its columns by number (1 = first), not "
                                     f"{numbered[0]!r}: --column user_id=2")
        if self.time_zone is not None:
            try:
                zoneinfo.ZoneInfo(self.time_zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError) as err:
                raise RatingsImportError(f"unknown time zone {self.time_zone!r}: an IANA name such as "
                                         f"UTC or America/Los_Angeles") from err
        object.__setattr__(self, "encoding", encoding)
        object.__setattr__(self, "delimiter", delimiter)

    def source(self, names: tuple[str, ...]) -> dict[str, str]:
        """The file's own name of each contract field in `names` (a headerless CSV's: column numbers)."""
        if self.header:
            return {c: self.columns.get(c, c) for c in names}
        taken = {self.columns[c] for c in names if c in self.columns}     # a default never reads those
        default = {c: str(k) for k, c in enumerate(names, 1) if str(k) not in taken}
        return {c: self.columns.get(c, default.get(c, "")) for c in names}


def _read_text(path: Path, encoding: str) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise RatingsImportError(f"{path}: cannot read: {err.strerror or err}") from err
    try:
        return data.decode(encoding).removeprefix(BOM)        # Excel's "CSV UTF-8" starts with one
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise RatingsImportError(f"{path}:{line}: not {encoding} text ({data[err.start:err.start + 8]!r}): "
                                 f"name the file's encoding (--encoding)") from err


def _lines(path: Path, encoding: str) -> tuple[pa.Array, np.ndarray]:
    """The non-blank lines of a text file and their line numbers."""
    lines = _read_text(path, encoding).splitlines()
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


def read_movietweetings(ratings_path: Path, movies_path: Path, encoding: str = "utf-8") -> tuple[Ratings, Items]:
    """ratings.dat (`user::movie::rating::unix seconds`) and movies.dat (`movie::title (year)::genres`)."""
    text, numbers = _lines(ratings_path, encoding)
    parts = _split(ratings_path, text, numbers, 4)
    user, item, rating, ts = (pc.list_element(parts, k) for k in range(4))
    item_text, item_numbers = _lines(movies_path, encoding)
    head = _split(movies_path, item_text, item_numbers, 2, max_splits=1)               # id :: the rest
    tail = _split(movies_path, pc.list_element(head, 1), item_numbers, 2,               # a title may hold '::'
                  max_splits=1, reverse=True)
    item_ids = pc.list_element(head, 0)
    where = ((ratings_path, numbers), (movies_path, item_numbers))
    ratings, ids, hashed = parse_log(user, item, rating, ts, item_ids, where)
    items = Items(item_id=ids, title=pc.list_element(tail, 0), genres=pc.list_element(tail, 1),
                  item_text=item_ids if hashed else None)
    check_unique_items(items, movies_path)
    return ratings, items


def _read_csv(path: Path, required: tuple[str, ...], optional: tuple[str, ...],
              dialect: LogDialect) -> dict[str, pa.Array]:
    """The named columns of a CSV file, as strings by their contract names (parsed and checked by
    the caller); `dialect` says the file's own names (or column numbers)."""
    encoding = dialect.encoding
    try:
        with open(path, encoding=encoding, newline="") as file:
            first = file.readline()
    except OSError as err:
        raise RatingsImportError(f"{path}: cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise RatingsImportError(f"{path}: not {encoding} text: name the file's encoding (--encoding)") from err
    fields = [name.strip() for name in next(csv.reader([first.removeprefix(BOM)], delimiter=dialect.delimiter), [])]
    positional = (*required, *optional)
    names = fields if dialect.header else [str(k) for k in range(1, len(fields) + 1)]
    source = dialect.source(positional)
    missing = [source[c] for c in required if source[c] not in names]
    if missing and not dialect.header:
        raise RatingsImportError(f"{path}:1: {len(fields)} field(s): a file without a header needs "
                                 f"{', '.join(f'{c} (column {source[c]})' for c in required)}")
    if missing:
        raise RatingsImportError(f"{path}: missing column(s) {', '.join(missing)}: the header must name "
                                 f"{', '.join(source[c] for c in required)} (found {', '.join(names) or 'nothing'}; "
                                 f"--column maps a contract name to yours)")
    wanted = {c: source[c] for c in positional if source[c] in names}
    try:
        read = pacsv.ReadOptions(encoding=encoding, column_names=None if dialect.header else names)
        table = pacsv.read_csv(path, read_options=read,
                               parse_options=pacsv.ParseOptions(delimiter=dialect.delimiter),
                               convert_options=pacsv.ConvertOptions(
                                   include_columns=list(wanted.values()),
                                   column_types={c: pa.string() for c in wanted.values()},
                                   strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowException, OSError) as err:
        hint = " (is it another text encoding? --encoding)" if "UTF8" in str(err) or "decode" in str(err) else ""
        raise RatingsImportError(f"{path}: not a readable CSV file: {str(err).splitlines()[0]}{hint}") from err
    if not table.num_rows:
        raise RatingsImportError(f"{path}: no rows")
    table = table.combine_chunks()
    return {c: table.column(name).chunk(0) for c, name in wanted.items()}


def read_own_log(ratings_path: Path, items_path: Path | None, dialect: LogDialect = LogDialect(),
                 fmt: str = "csv") -> tuple[Ratings, Items]:
    """A log `user_id,item_id,rating,timestamp[,platform]` and its items `item_id,title,genres[,price]`
    (genres '|'-separated, may be empty), as CSV files or (`fmt` "jsonl") JSON Lines with those
    fields, written in `dialect`. Without an items file (a log of ratings alone) every rated item is
    an item whose title is its own id and which has no genre."""
    def read(path, required, optional):
        if fmt == "jsonl":
            return read_jsonl(path, required, dialect.source((*required, *optional)), dialect.encoding)
        return _read_csv(path, required, optional, dialect), None

    col, numbers = read(ratings_path, RATINGS_COLUMNS, RATINGS_OPTIONAL)
    platform = None
    if "platform" in col:
        blank = pc.equal(pc.utf8_trim_whitespace(col["platform"]), "")
        platform = pc.if_else(blank, pa.scalar(None, pa.string()), col["platform"])
    item_col, item_numbers = (read(items_path, ITEMS_COLUMNS, ITEMS_OPTIONAL) if items_path
                              else (_items_of(col["item_id"]), None))
    ratings, ids, hashed = parse_log(col["user_id"], col["item_id"], col["rating"], col["timestamp"],
                                     item_col["item_id"], ((ratings_path, numbers), (items_path, item_numbers)),
                                     platform, dialect.time_zone)
    price = None
    if "price" in item_col:
        blank = pc.equal(pc.utf8_trim_whitespace(item_col["price"]), "").to_numpy(zero_copy_only=False)
        values = np.full(len(blank), np.nan)
        if (~blank).any():
            values[~blank] = parse_numbers(item_col["price"].filter(pa.array(~blank)), "price", items_path,
                                           None if item_numbers is None else item_numbers[~blank])
        price = pa.array(values, pa.float64(), mask=blank)
    items = Items(item_id=ids, title=item_col["title"], genres=item_col["genres"], price=price,
                  item_text=item_col["item_id"] if hashed else None)
    check_unique_items(items, items_path)
    return ratings, items


def _items_of(rated: pa.Array) -> dict[str, pa.Array]:
    """Items for a log without an items file: each distinct rated id, titled by itself, no genre."""
    log.warning("no items file: each rated item is titled by its own id and has no genre, so the model tells "
                "items apart by their ids alone (docs/data.md)")
    ids = pc.unique(pc.utf8_trim_whitespace(rated))
    return {"item_id": ids, "title": ids, "genres": pa.array([""] * len(ids), pa.string())}


def read_log(fmt: str, ratings_path: Path | None, items_path: Path | None,
             dialect: LogDialect = LogDialect()) -> tuple[Ratings, Items, Path, Path]:
    """Read a log in `fmt` (FORMATS); MovieTweetings defaults to the vendored data set. The
    movietweetings format takes the dialect's encoding only."""
    if fmt not in FORMATS:
        raise RatingsImportError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "movietweetings":
        if dialect.columns or dialect.delimiter != "," or not dialect.header:
            raise RatingsImportError("--column, --delimiter and --no-header describe CSV files: the movietweetings "
                                     "format has no header and '::' between fields")
        ratings_path = Path(ratings_path or MOVIETWEETINGS_DIR / "ratings.dat")
        items_path = Path(items_path or MOVIETWEETINGS_DIR / "movies.dat")
        return (*read_movietweetings(ratings_path, items_path, dialect.encoding), ratings_path, items_path)
    if fmt == "jsonl" and (dialect.delimiter != "," or not dialect.header):
        raise RatingsImportError("--delimiter and --no-header describe CSV files: JSON Lines name their fields")
    if ratings_path is None:
        raise RatingsImportError(f"--format {fmt} needs --ratings FILE (user_id,item_id,rating,timestamp) and, "
                                 f"for titles and genres, --items FILE (item_id,title,genres)")
    items = Path(items_path) if items_path else None
    return (*read_own_log(Path(ratings_path), items, dialect, fmt), Path(ratings_path), items)

"""Reading a ratings log and its items file for `python -m pipeline import-ratings` (ratings_import.py).

Two formats: MovieTweetings' (also MovieLens 1M's) '::'-separated ratings.dat and movies.dat, and
CSV files with a header. What real logs differ in, and how each is read:

- ids: the contract's ids are integers >= 1. A log whose ids are such integers keeps them. A log
  with any other id of a kind (user or item: an SKU, an ASIN, a UUID, a 0) has every id of that
  kind replaced by `contract_id` of its text, a stable 63-bit hash (the same on every machine and
  re-import; a collision needs ~3 billion distinct ids to reach even odds). The item ids of the
  ratings and of the items file are one kind: both are hashed or neither. ratings_import.py writes
  the mapping beside the data (`id_map/`), for translating ids at serving time.
- column names and delimiter (`CsvDialect`): the CSV header names `user_id,item_id,rating,timestamp`
  (and `item_id,title,genres`) unless `columns` maps them to the log's own (MovieLens' `userId`,
  `movieId`); fields are separated by commas unless told (a TSV, a European Excel's ';').
- text encoding: UTF-8 unless told (MovieLens 1M's movies.dat is Latin-1); a byte-order mark at
  the start (Excel's "CSV UTF-8") is not part of the first value.
- timestamps: unix seconds (integer or decimal), unix milliseconds (a column of integers all past
  1e11, which as seconds would be after the year 5000), or ISO 8601 with a zone offset.

Every input problem is a `RatingsImportError` with a one-line message naming the file (and line or
row). Reading and the per-row rules are vectorised (numpy, pyarrow); hashing is per distinct id.
"""
from __future__ import annotations

import codecs
import csv
import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from pipeline.config_sections import PROJECT_ROOT

log = logging.getLogger(__name__)

FORMATS = ("movietweetings", "csv")
MOVIETWEETINGS_DIR = PROJECT_ROOT / "data" / "movietweetings-100k"
RATINGS_COLUMNS = ("user_id", "item_id", "rating", "timestamp")     # a CSV log's header (and `platform`)
ITEMS_COLUMNS = ("item_id", "title", "genres")                      # its items file's (and `price`)
ID_KEY = b"reco-nightly/contract-id/v1:"
BOM = "\ufeff"                                # a byte-order mark opening a file: not part of its first value
_US = 1_000_000
_LATEST_US = 7_258_118_400 * _US          # 2200-01-01 UTC
_MS_FROM, _MS_TO = 10**11, 10**14         # an integer column all in here is unix milliseconds (_timestamps)
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
    user_text: pa.Array | None = None   # the log's own user ids, where they were hashed (contract_id)
    item_text: pa.Array | None = None   # the log's own item ids, where they were hashed

    def filter(self, keep: np.ndarray) -> Ratings:
        mask = pa.array(keep)
        text = lambda column: None if column is None else column.filter(mask)  # noqa: E731
        return Ratings(self.user[keep], self.item[keep], self.rating[keep], self.ts_us[keep],
                       text(self.platform), text(self.user_text), text(self.item_text))


@dataclass
class Items:
    """The item file: ids, titles and '|'-separated genres, one row per item."""

    item_id: np.ndarray       # int64, unique, >= 1
    title: pa.Array           # string
    genres: pa.Array          # string, '|'-separated, may be empty
    price: pa.Array | None = None       # float64, when the file has one
    item_text: pa.Array | None = None   # the file's own ids, where they were hashed


@dataclass(frozen=True)
class CsvDialect:
    """How a user's CSV files are written: header names (contract name -> theirs), text encoding,
    field delimiter (one character; "tab" for a TSV)."""

    columns: dict[str, str] = field(default_factory=dict)
    encoding: str = "utf-8"
    delimiter: str = ","

    def checked(self) -> CsvDialect:
        try:
            encoding = codecs.lookup(self.encoding).name
        except LookupError as err:
            raise RatingsImportError(f"unknown text encoding {self.encoding!r}") from err
        delimiter = "\t" if self.delimiter in ("tab", "\\t") else self.delimiter
        if len(delimiter) != 1 or delimiter in "\"\r\n":
            raise RatingsImportError(f"the delimiter must be one character other than a quote or a line end "
                                     f"(or 'tab'), not {self.delimiter!r}")
        return CsvDialect(dict(self.columns), encoding, delimiter)


def contract_id(text: str) -> int:
    """A log's own id (any text) as a contract id: the first 8 bytes of BLAKE2b, as an integer in
    [1, 2**63 - 1]. Surrounding spaces do not count."""
    value = int.from_bytes(hashlib.blake2b(ID_KEY + text.strip().encode("utf-8"), digest_size=8).digest(), "big")
    return (value & (2**63 - 1)) or 1


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


def _where(path: Path, numbers: np.ndarray | None, index: int) -> str:
    return f"{path}:{numbers[index]}" if numbers is not None else f"{path}: data row {index + 1}"


def _first_non_id(*columns: pa.Array) -> str | None:
    """The first value of the columns that is not an integer >= 1 (the contract's own ids), or None."""
    for values in columns:
        ok = pc.fill_null(pc.match_substring_regex(values, _INT.pattern), False).to_numpy(zero_copy_only=False)
        if ok.all():
            try:
                ok = pc.cast(pc.utf8_trim_whitespace(values), pa.int64()).to_numpy() >= 1
            except pa.ArrowInvalid:           # an integer past int64: an id, not a number
                ok = np.array([1 <= int(v) < 2**63 for v in values.to_pylist()])
        if not ok.all():
            return values[int(np.flatnonzero(~ok)[0])].as_py()
    return None


def _ids(values: pa.Array, what: str, path: Path, numbers: np.ndarray | None, hashed: bool) -> np.ndarray:
    """Contract ids: the integers themselves, or `contract_id` of each distinct text when `hashed`."""
    blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(values), ""), True).to_numpy(zero_copy_only=False)
    if blank.any():
        raise RatingsImportError(f"{_where(path, numbers, int(np.flatnonzero(blank)[0]))}: {what} is empty")
    if not hashed:
        return pc.cast(pc.utf8_trim_whitespace(values), pa.int64()).to_numpy()
    encoded = pc.dictionary_encode(values)
    lookup = np.array([contract_id(v) for v in encoded.dictionary.to_pylist()], np.int64)
    return lookup[encoded.indices.to_numpy()]


def _numbers(values: pa.Array, what: str, path: Path, numbers: np.ndarray | None) -> np.ndarray:
    ok = pc.fill_null(pc.match_substring_regex(values, _NUMBER), False).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: {what} {values[i].as_py()!r} is not a number")
    return pc.cast(pc.utf8_trim_whitespace(values), pa.float64()).to_numpy()


def _timestamps(values: pa.Array, path: Path, numbers: np.ndarray | None) -> np.ndarray:
    """Unix seconds (integer or decimal) or ISO 8601 with a zone offset, as UTC microseconds. A
    column of integers all in [1e11, 1e14) is unix milliseconds (Amazon Reviews '23 writes them):
    as seconds every one would be after the year 5000, as milliseconds they span 1973-5138."""
    numeric = pc.fill_null(pc.match_substring_regex(values, _NUMBER), False).to_numpy(zero_copy_only=False)
    if numeric.all():
        if pc.all(pc.match_substring_regex(values, _INT.pattern)).as_py():
            raw_ts = pc.cast(pc.utf8_trim_whitespace(values), pa.int64()).to_numpy()
            millis = bool(len(raw_ts)) and bool(((raw_ts >= _MS_FROM) & (raw_ts < _MS_TO)).all())
            if millis:
                log.warning("%s: every timestamp is between 1e11 and 1e14: read as unix milliseconds", path)
            ts_us = raw_ts * (1000 if millis else _US)
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
                                 f"and 2200: expected unix seconds or milliseconds (microseconds?)")
    return ts_us


def _log(user, item, rating, ts, item_ids, where: tuple, platform=None) -> tuple[Ratings, np.ndarray, bool]:
    """Ratings from string columns, the items file's contract ids, and whether item ids were hashed
    (the ratings' and the items file's together)."""
    (ratings_path, ratings_numbers), (items_path, items_numbers) = where
    odd_user, odd_item = _first_non_id(user), _first_non_id(item, item_ids)
    hash_users, hash_items = odd_user is not None, odd_item is not None
    for kind, odd in (("user", odd_user), ("item", odd_item)):
        if odd is not None:
            log.warning("the %s ids are not all integers >= 1 (e.g. %r): every %s id is replaced by its "
                        "contract_id (a stable hash; the mapping is written to id_map/)", kind, odd, kind)
    ratings = Ratings(user=_ids(user, "user_id", ratings_path, ratings_numbers, hash_users),
                      item=_ids(item, "item_id", ratings_path, ratings_numbers, hash_items),
                      rating=_numbers(rating, "rating", ratings_path, ratings_numbers),
                      ts_us=_timestamps(ts, ratings_path, ratings_numbers), platform=platform,
                      user_text=user if hash_users else None, item_text=item if hash_items else None)
    return ratings, _ids(item_ids, "item_id", items_path, items_numbers, hash_items), hash_items


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
    ratings, ids, hashed = _log(user, item, rating, ts, item_ids, where)
    items = Items(item_id=ids, title=pc.list_element(tail, 0), genres=pc.list_element(tail, 1),
                  item_text=item_ids if hashed else None)
    _unique_items(items, movies_path)
    return ratings, items


def _read_csv(path: Path, required: tuple[str, ...], optional: tuple[str, ...],
              dialect: CsvDialect) -> dict[str, pa.Array]:
    """The named columns of a CSV file with a header, as strings by their contract names (parsed and
    checked by the caller); `dialect.columns` maps a contract name to the file's own."""
    columns, encoding = dialect.columns, dialect.encoding
    try:
        with open(path, encoding=encoding, newline="") as file:
            first = file.readline()
    except OSError as err:
        raise RatingsImportError(f"{path}: cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise RatingsImportError(f"{path}: not {encoding} text: name the file's encoding (--encoding)") from err
    header = csv.reader([first.removeprefix(BOM)], delimiter=dialect.delimiter)     # pyarrow skips a BOM too
    names = [name.strip() for name in next(header, [])]
    source = {c: columns.get(c, c) for c in (*required, *optional)}
    missing = [source[c] for c in required if source[c] not in names]
    if missing:
        raise RatingsImportError(f"{path}: missing column(s) {', '.join(missing)}: the header must name "
                                 f"{', '.join(source[c] for c in required)} (found {', '.join(names) or 'nothing'}; "
                                 f"--column maps a contract name to yours)")
    wanted = {c: source[c] for c in (*required, *optional) if source[c] in names}
    try:
        table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(encoding=encoding),
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


def read_csv_log(ratings_path: Path, items_path: Path, dialect: CsvDialect = CsvDialect()) -> tuple[Ratings, Items]:
    """A CSV log `user_id,item_id,rating,timestamp[,platform]` and its items `item_id,title,genres[,price]`
    (genres '|'-separated, may be empty), written in `dialect`."""
    dialect = dialect.checked()
    col = _read_csv(ratings_path, RATINGS_COLUMNS, ("platform",), dialect)
    platform = None
    if "platform" in col:
        blank = pc.equal(pc.utf8_trim_whitespace(col["platform"]), "")
        platform = pc.if_else(blank, pa.scalar(None, pa.string()), col["platform"])
    item_col = _read_csv(items_path, ITEMS_COLUMNS, ("price",), dialect)
    ratings, ids, hashed = _log(col["user_id"], col["item_id"], col["rating"], col["timestamp"], item_col["item_id"],
                                ((ratings_path, None), (items_path, None)), platform)
    price = None
    if "price" in item_col:
        blank = pc.equal(pc.utf8_trim_whitespace(item_col["price"]), "").to_numpy(zero_copy_only=False)
        values = np.full(len(blank), np.nan)
        if (~blank).any():
            values[~blank] = _numbers(item_col["price"].filter(pa.array(~blank)), "price", items_path, None)
        price = pa.array(values, pa.float64(), mask=blank)
    items = Items(item_id=ids, title=item_col["title"], genres=item_col["genres"], price=price,
                  item_text=item_col["item_id"] if hashed else None)
    _unique_items(items, items_path)
    return ratings, items


def _unique_items(items: Items, path: Path) -> None:
    ids, index, counts = np.unique(items.item_id, return_index=True, return_counts=True)
    if (counts > 1).any():
        first = int(index[np.flatnonzero(counts > 1)[0]])
        shown = items.item_text[first].as_py() if items.item_text is not None else int(items.item_id[first])
        raise RatingsImportError(f"{path}: {int((counts > 1).sum())} item id(s) listed more than once (first: "
                                 f"{shown}): which row is right is unknown")


def read_log(fmt: str, ratings_path: Path | None, items_path: Path | None,
             dialect: CsvDialect = CsvDialect()) -> tuple[Ratings, Items, Path, Path]:
    """Read a log in `fmt` (FORMATS); MovieTweetings defaults to the vendored data set. The
    movietweetings format takes the dialect's encoding only."""
    if fmt not in FORMATS:
        raise RatingsImportError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    dialect = dialect.checked()
    if fmt == "movietweetings":
        if dialect.columns or dialect.delimiter != ",":
            raise RatingsImportError("--column and --delimiter describe CSV files: the movietweetings format has "
                                     "no header and '::' between fields")
        ratings_path = Path(ratings_path or MOVIETWEETINGS_DIR / "ratings.dat")
        items_path = Path(items_path or MOVIETWEETINGS_DIR / "movies.dat")
        return (*read_movietweetings(ratings_path, items_path, dialect.encoding), ratings_path, items_path)
    if ratings_path is None or items_path is None:
        raise RatingsImportError("--format csv needs --ratings FILE (user_id,item_id,rating,timestamp) and "
                                 "--items FILE (item_id,title,genres)")
    return (*read_csv_log(Path(ratings_path), Path(items_path), dialect), Path(ratings_path), Path(items_path))

"""The values of a ratings log, parsed (ratings_formats.py reads the files; ratings_import.py writes
the contract).

- ids: the contract's ids are integers >= 1. A log whose ids are such integers keeps them. A log
  with any other id of a kind (user or item: an SKU, an ASIN, a UUID, a 0, an integer past int64)
  has every id of that kind replaced by `contract_id` of its text, a stable 63-bit hash (the same
  on every machine and re-import; a collision needs ~3 billion distinct ids to reach even odds).
  The item ids of the ratings and of the items file are one kind: both are hashed or neither.
  ratings_import.py writes the mapping beside the data (`id_map/`), for translating ids at
  serving time.
- timestamps: unix seconds (integer or decimal), unix milliseconds (a column of integers all past
  1e11, which as seconds would be after the year 5000), or ISO 8601 with a zone offset; times
  without an offset (Yelp's `2016-03-09 00:00:00`) only in a time zone the caller names.

Every input problem is a `RatingsImportError` with a one-line message naming the file (and line or
row). Parsing is vectorised (numpy, pyarrow); hashing is per distinct id.
"""
from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)

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


def contract_id(text: str) -> int:
    """A log's own id (any text) as a contract id: the first 8 bytes of BLAKE2b, as an integer in
    [1, 2**63 - 1]. Surrounding spaces do not count."""
    value = int.from_bytes(hashlib.blake2b(ID_KEY + text.strip().encode("utf-8"), digest_size=8).digest(), "big")
    return (value & (2**63 - 1)) or 1


def _where(path: Path, numbers: np.ndarray | None, index: int) -> str:
    return f"{path}:{numbers[index]}" if numbers is not None else f"{path}: data row {index + 1}"


def _integer_ids(*columns: pa.Array) -> list[np.ndarray] | None:
    """Each column as int64 when every value of every column is an integer in [1, 2**63) (the
    contract's own ids, kept); None otherwise (then every id of the kind is hashed)."""
    out = []
    for values in columns:
        if not pc.fill_null(pc.match_substring_regex(values, _INT.pattern), False).to_numpy(
                zero_copy_only=False).all():
            return None
        try:
            ids = pc.cast(pc.utf8_trim_whitespace(values), pa.int64()).to_numpy()
        except pa.ArrowInvalid:           # an integer past int64: an id, not a number
            return None
        if (ids < 1).any():
            return None
        out.append(ids)
    return out


def _warn_hashed(kind: str, *columns: pa.Array) -> None:
    """Say that a kind of ids is hashed, naming the first value that was not one of the contract's."""
    odd = next((v for values in columns for v in pc.unique(values).to_pylist()
                if not _INT.match(v) or not 1 <= int(v) < 2**63), "")
    log.warning("the %s ids are not all integers >= 1 (e.g. %r): every %s id is replaced by its contract_id "
                "(a stable hash; the mapping is written to id_map/)", kind, odd, kind)


def _hashed_ids(values: pa.Array, what: str, path: Path, numbers: np.ndarray | None) -> np.ndarray:
    """`contract_id` of each value, computed once per distinct text; an empty id is refused."""
    blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(values), ""), True).to_numpy(zero_copy_only=False)
    if blank.any():
        raise RatingsImportError(f"{_where(path, numbers, int(np.flatnonzero(blank)[0]))}: {what} is empty")
    encoded = pc.dictionary_encode(values)
    lookup = np.array([contract_id(v) for v in encoded.dictionary.to_pylist()], np.int64)
    return lookup[encoded.indices.to_numpy()]


def parse_numbers(values: pa.Array, what: str, path: Path, numbers: np.ndarray | None) -> np.ndarray:
    ok = pc.fill_null(pc.match_substring_regex(values, _NUMBER), False).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: {what} {values[i].as_py()!r} is not a number")
    return pc.cast(pc.utf8_trim_whitespace(values), pa.float64()).to_numpy()


def _timestamps(values: pa.Array, path: Path, numbers: np.ndarray | None, time_zone: str | None = None) -> np.ndarray:
    """Unix seconds (integer or decimal) or ISO 8601 with a zone offset, as UTC microseconds. A
    column of integers all in [1e11, 1e14) is unix milliseconds (Amazon Reviews '23 writes them):
    as seconds every one would be after the year 5000, as milliseconds they span 1973-5138.
    Times without an offset are read in `time_zone` when one is named (a wall-clock time the
    zone's clocks skip, or show twice, is taken as the later, or the earlier, instant)."""
    numeric = pc.fill_null(pc.match_substring_regex(values, _NUMBER), False).to_numpy(zero_copy_only=False)
    if numeric.all():
        if pc.all(pc.match_substring_regex(values, _INT.pattern)).as_py():
            raw_ts = pc.cast(pc.utf8_trim_whitespace(values), pa.int64()).to_numpy()
            millis = bool(len(raw_ts)) and bool(((raw_ts >= _MS_FROM) & (raw_ts < _MS_TO)).all())
            if millis:
                log.warning("%s: every timestamp is between 1e11 and 1e14: read as unix milliseconds", path)
            ts_us = raw_ts * (1000 if millis else _US)
        else:
            ts_us = np.round(parse_numbers(values, "timestamp", path, numbers) * _US).astype(np.int64)
    elif numeric.any():
        i = int(np.flatnonzero(~numeric)[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: timestamp {values[i].as_py()!r} mixes with unix "
                                 f"seconds in the same column")
    else:
        ts_us = _iso_times(pc.utf8_trim_whitespace(values), path, time_zone)
    late = np.flatnonzero((ts_us < 0) | (ts_us >= _LATEST_US))
    if len(late):
        i = int(late[0])
        raise RatingsImportError(f"{_where(path, numbers, i)}: timestamp {values[i].as_py()!r} is not between 1970 "
                                 f"and 2200: expected unix seconds or milliseconds (microseconds?)")
    return ts_us


def _iso_times(values: pa.Array, path: Path, time_zone: str | None) -> np.ndarray:
    """ISO 8601 texts as UTC microseconds: with a zone offset, or without one in `time_zone`."""
    try:
        return pc.cast(pc.cast(values, pa.timestamp("us", tz="UTC")), pa.int64()).to_numpy()
    except pa.ArrowInvalid as err:
        if time_zone is None:
            detail = str(err).splitlines()[0].split(". If these")[0]
            raise RatingsImportError(f"{path}: timestamp is neither unix seconds nor ISO 8601 with a zone offset "
                                     f"(the days are UTC days; a time without a zone is ambiguous: name the "
                                     f"log's zone with --time-zone): {detail}") from err
    try:
        local = pc.assume_timezone(pc.cast(values, pa.timestamp("us")), time_zone,
                                   ambiguous="earliest", nonexistent="latest")
    except pa.ArrowInvalid as err:
        detail = str(err).splitlines()[0]
        raise RatingsImportError(f"{path}: timestamp is neither unix seconds nor ISO 8601 (all with a zone offset, "
                                 f"or all without one, read in {time_zone}): {detail}") from err
    return pc.cast(local, pa.int64()).to_numpy()


def parse_log(user, item, rating, ts, item_ids, where: tuple, platform=None,
              time_zone: str | None = None) -> tuple[Ratings, np.ndarray, bool]:
    """Ratings from string columns, the items file's contract ids, and whether item ids were hashed
    (the ratings' and the items file's together); times without an offset are in `time_zone`."""
    (ratings_path, ratings_numbers), (items_path, items_numbers) = where
    users, items = _integer_ids(user), _integer_ids(item, item_ids)
    hash_users, hash_items = users is None, items is None
    if hash_users:
        _warn_hashed("user", user)
        users = [_hashed_ids(user, "user_id", ratings_path, ratings_numbers)]
    if hash_items:
        _warn_hashed("item", item, item_ids)
        items = [_hashed_ids(item, "item_id", ratings_path, ratings_numbers),
                 _hashed_ids(item_ids, "item_id", items_path, items_numbers)]
    ratings = Ratings(user=users[0], item=items[0],
                      rating=parse_numbers(rating, "rating", ratings_path, ratings_numbers),
                      ts_us=_timestamps(ts, ratings_path, ratings_numbers, time_zone), platform=platform,
                      user_text=user if hash_users else None, item_text=item if hash_items else None)
    return ratings, items[1], hash_items


def check_unique_items(items: Items, path: Path) -> None:
    ids, index, counts = np.unique(items.item_id, return_index=True, return_counts=True)
    if (counts > 1).any():
        first = int(index[np.flatnonzero(counts > 1)[0]])
        shown = items.item_text[first].as_py() if items.item_text is not None else int(items.item_id[first])
        raise RatingsImportError(f"{path}: {int((counts > 1).sum())} item id(s) listed more than once (first: "
                                 f"{shown}): which row is right is unknown")

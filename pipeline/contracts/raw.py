"""The raw tables' Arrow types, with the encodings that mean the same thing, and one normaliser.

Writers differ in how they spell a type: pandas >= 3 and Polars write `large_string` and
`large_list`, pandas may dictionary-encode strings and writes float lists as `list<double>`,
Polars and other writers give a fixed-width feature as `fixed_size_list<float>[2048]`,
timestamps come in s/ms/us/ns and with "UTC", "+00:00" or "Etc/UTC", integers in any width.
Those are the same logical columns (a float image cast to float32 keeps every finite value a
float32 can hold; a value beyond it becomes infinite, and the row rules refuse non-finite
images), so
they are accepted everywhere raw data is read; `normalize` casts them to one canonical type
before any row rule runs. What differs logically (a float label, a naive timestamp, a string
id) is still refused, naming table, partition, file and column.

A string column is text: bytes that are not UTF-8 in it (a Latin-1 export, a truncated
multi-byte character) pass the footer's schema, but every text function (and Beam's Arrow
reader) fails on them. `not_utf8` finds them, so validate names partition, file, column and row.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.contracts import features as F

NOT_UTF8_EXAMPLE_BYTES = 40          # of the first bad value, in the problem

_UTC_NAMES = {"utc", "+00:00", "etc/utc", "z", "gmt", "etc/gmt", "zulu"}

EVENT_TYPES: dict[str, pa.DataType] = {
    F.EVENT_ID: pa.string(),
    F.EVENT_TS: pa.timestamp("us", tz="UTC"),
    F.USER_ID: pa.int64(),
    F.ITEM_ID: pa.int64(),
    F.HISTORY: pa.list_(pa.int64()),
    F.PLATFORM: pa.string(),
    F.HOUR: pa.int32(),
    F.LABEL: pa.int64(),
}
ITEM_TYPES: dict[str, pa.DataType] = {
    F.ITEM_ID: pa.int64(),
    F.TITLE: pa.string(),
    F.CATEGORY: pa.string(),
    F.PRICE: pa.float64(),
    F.IMAGE: pa.list_(pa.float32()),
}
TABLE_TYPES = {"events": EVENT_TYPES, "items": ITEM_TYPES}
TEXT_COLUMNS = {table: tuple(c for c, t in types.items() if t.equals(pa.string()))
                for table, types in TABLE_TYPES.items()}


def _logical(typ: pa.DataType) -> pa.DataType:
    """The canonical spelling of `typ`'s logical type (it may still differ from the contract's)."""
    if pa.types.is_dictionary(typ):
        return _logical(typ.value_type)
    if pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return pa.string()
    if (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_list_view(typ)
            or pa.types.is_fixed_size_list(typ)):
        return pa.list_(_logical(typ.value_type))
    if pa.types.is_timestamp(typ):
        tz = "UTC" if typ.tz and typ.tz.lower() in _UTC_NAMES else typ.tz
        return pa.timestamp("us", tz=tz)
    return typ


def _same_kind(found: pa.DataType, want: pa.DataType) -> bool:
    if pa.types.is_integer(want):        # any width whose every value fits int64 (not uint64)
        return pa.types.is_signed_integer(found) or (pa.types.is_unsigned_integer(found) and found.bit_width < 64)
    if want.equals(pa.float32()):        # a feature vector: any float width (pandas writes double)
        return pa.types.is_floating(found)
    return found.equals(want)


def type_problem(found: pa.DataType, want: pa.DataType) -> str | None:
    """None when `found` is `want` or an equivalent encoding of it, else what is wrong."""
    logical = _logical(found)
    if pa.types.is_list(want):
        inner_ok = pa.types.is_list(logical) and type_problem(logical.value_type, want.value_type) is None
        return None if inner_ok else f"has type {found}, expected {want}"
    if pa.types.is_timestamp(want) and pa.types.is_timestamp(logical) and logical.tz != "UTC":
        zone = f"time zone {logical.tz!r}" if logical.tz else "no time zone"
        return f"has type {found} ({zone}), expected a UTC timestamp"
    return None if _same_kind(logical, want) else f"has type {found}, expected {want}"


def schema_problems(table: str, where: str, schema: pa.Schema) -> list[str]:
    """Missing, renamed (missing + unexpected) or mistyped columns of one file's schema."""
    expected = TABLE_TYPES[table]
    found = {name: schema.field(name).type for name in schema.names}
    missing = [c for c in expected if c not in found]
    extra = [c for c in found if c not in expected]
    problems = []
    for col in missing:
        hint = f"; found unexpected column(s) {extra} (renamed?)" if extra else ""
        problems.append(f"{where}: column {col!r} is missing{hint}")
    for col, want in expected.items():
        problem = type_problem(found[col], want) if col in found else None
        if problem:
            problems.append(f"{where}: column {col!r} {problem}")
    return problems


def normalize(data: pa.Table | pa.RecordBatch, table: str) -> pa.Table:
    """`data` with every contract column cast to the contract's own type (others untouched)."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    expected = TABLE_TYPES[table]
    for i, name in enumerate(data.column_names):
        want = expected.get(name)
        column = data.column(i)
        if want is None or column.type.equals(want):
            continue
        if pa.types.is_dictionary(column.type):
            column = pa.chunked_array([c.dictionary_decode() for c in column.chunks], column.type.value_type)
        # Timestamps may lose sub-microsecond digits; integers must fit (safe cast raises).
        safe = not pa.types.is_timestamp(want)
        data = data.set_column(i, name, pc.cast(column, want, safe=safe))
    return data


def not_utf8(column: pa.ChunkedArray | pa.Array) -> tuple[int, int, bytes]:
    """(count, first row, first value) of the values of a string column (any accepted encoding)
    that are not valid UTF-8; (0, -1, b"") when all are. Arrow's full validation finds them
    (C++, one pass); only a chunk that fails it is walked value by value."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    count, first, example, start = 0, -1, b"", 0
    for chunk in chunks:
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid:
            values = chunk.dictionary_decode() if pa.types.is_dictionary(chunk.type) else chunk
            for i, value in enumerate(pc.cast(values, pa.large_binary()).to_pylist()):
                if value is None or _is_utf8(value):
                    continue
                if count == 0:
                    first, example = start + i, value
                count += 1
        start += len(chunk)
    return count, first, example


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def text_problems(table_name: str, where: str, data: pa.Table) -> list[str]:
    """One problem per string column of `data` (one file of `table_name`) holding bytes that are
    not UTF-8, naming `where` (partition and file), the column and the first bad row."""
    problems = []
    for name in TEXT_COLUMNS[table_name]:
        if name not in data.column_names:
            continue
        count, first, example = not_utf8(data.column(name))
        if count:
            problems.append(f"{where}: column {name!r} holds {count} values that are not UTF-8 text (first at "
                            f"row {first}: {example[:NOT_UTF8_EXAMPLE_BYTES]!r}): every reader after validate "
                            f"would fail on them; re-export the file as UTF-8")
    return problems

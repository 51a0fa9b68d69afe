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
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.contracts import features as F

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

"""Raw files re-encoded the way other writers spell the same logical types (pandas >= 3, Polars)."""
from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.contracts import features as F


def rewrite(src_root, dst_root, write) -> None:
    """Copy a raw tree, rewriting every Parquet file with `write(table, path)`."""
    shutil.copytree(src_root, dst_root)
    for path in dst_root.rglob("*.parquet"):
        write(pq.read_table(path), path)


def large_types(table: pa.Table, path) -> None:
    """What pandas >= 3 / Polars produce: large strings and lists, ns timestamps, dictionaries."""
    fields = []
    for f in table.schema:
        t = f.type
        if pa.types.is_string(t):
            t = pa.dictionary(pa.int32(), pa.string()) if f.name == F.PLATFORM else pa.large_string()
        elif pa.types.is_list(t):
            t = pa.large_list(t.value_type)
        elif pa.types.is_timestamp(t):
            t = pa.timestamp("ns", tz="UTC")
        fields.append(pa.field(f.name, t))
    pq.write_table(table.cast(pa.schema(fields)), path)


def with_pandas(table: pa.Table, path) -> None:
    table.to_pandas().to_parquet(path, index=False)

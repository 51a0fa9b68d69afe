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


def pandas_float_lists(table: pa.Table, path) -> None:
    """A pandas frame built from Python lists: float lists become `list<double>` (pandas' default)."""
    frame = table.to_pandas()
    if F.IMAGE in frame:
        frame[F.IMAGE] = [None if v is None else [float(x) for x in v] for v in frame[F.IMAGE]]
    frame.to_parquet(path, index=False)
    if F.IMAGE in frame:
        assert pq.read_schema(path).field(F.IMAGE).type.value_type == pa.float64()


def fixed_size_images(table: pa.Table, path) -> None:
    """The image as Arrow's fixed-width type, `fixed_size_list<float>[2048]` (Polars' Array)."""
    if F.IMAGE in table.column_names:
        i = table.column_names.index(F.IMAGE)
        table = table.set_column(i, F.IMAGE, table.column(i).cast(pa.list_(pa.float32(), F.IMAGE_DIM)))
    pq.write_table(table, path)


def with_polars(table: pa.Table, path) -> None:
    """Polars' own writer, its defaults: large strings and lists, its timestamp spelling; the
    image as Polars' fixed-width Array (what a Polars job holding a 2048-float feature writes)."""
    import polars as pl

    frame = pl.from_arrow(table)
    if F.IMAGE in frame.columns:
        frame = frame.with_columns(pl.col(F.IMAGE).cast(pl.Array(pl.Float32, F.IMAGE_DIM)))
    frame.write_parquet(path)

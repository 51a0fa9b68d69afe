"""Arrow-equivalent encodings are accepted everywhere raw data is read; wrong types are refused by name."""
from __future__ import annotations

import datetime as dt
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components import validate
from components.evaluate.data import EvalData
from pipeline.contracts import features as F
from pipeline.contracts import raw
from pipeline.paths import RunPaths
from tests.conftest import RUN_DATE, make_tiny_config
from tests.pipeline.contracts.encodings import (
    fixed_size_images,
    large_types,
    pandas_float_lists,
    rewrite,
    with_pandas,
    with_polars,
)


@pytest.mark.parametrize("found", [
    pa.large_string(), pa.dictionary(pa.int32(), pa.string()), pa.string_view(), pa.string()])
def test_string_encodings_are_strings(found):
    assert raw.type_problem(found, pa.string()) is None


@pytest.mark.parametrize("found", [
    pa.timestamp("ms", tz="UTC"), pa.timestamp("ns", tz="+00:00"), pa.timestamp("s", tz="Etc/UTC"),
    pa.timestamp("us", tz="UTC")])
def test_timestamp_units_and_utc_spellings(found):
    assert raw.type_problem(found, raw.EVENT_TYPES[F.EVENT_TS]) is None


@pytest.mark.parametrize(("found", "want"), [
    (pa.large_list(pa.int64()), pa.list_(pa.int64())),
    (pa.list_(pa.field("element", pa.int32())), pa.list_(pa.int64())),
    (pa.large_list(pa.float32()), pa.list_(pa.float32())),
    (pa.list_(pa.float64()), pa.list_(pa.float32())),                  # pandas' float lists
    (pa.list_(pa.float32(), F.IMAGE_DIM), pa.list_(pa.float32())),     # Polars' fixed-width arrays
    (pa.large_list(pa.float64()), pa.list_(pa.float32())),
    (pa.int64(), pa.int32()), (pa.int16(), pa.int64())])
def test_lists_and_integer_widths(found, want):
    assert raw.type_problem(found, want) is None


@pytest.mark.parametrize(("found", "want", "says"), [
    (pa.float64(), pa.int64(), "expected int64"),
    (pa.timestamp("us"), raw.EVENT_TYPES[F.EVENT_TS], "no time zone"),
    (pa.timestamp("us", tz="Europe/Paris"), raw.EVENT_TYPES[F.EVENT_TS], "Europe/Paris"),
    (pa.list_(pa.int64()), pa.list_(pa.float32()), "expected list"),
    (pa.list_(pa.string()), pa.list_(pa.float32()), "expected list"),
    (pa.uint64(), pa.int64(), "expected int64"),          # values past 2^63 would not fit
    (pa.int64(), pa.string(), "expected string")])
def test_logically_different_types_are_refused(found, want, says):
    assert says in raw.type_problem(found, want)


@pytest.mark.parametrize("write", [large_types, with_pandas, pandas_float_lists, fixed_size_images, with_polars],
                         ids=["pyarrow-large-types", "pandas", "pandas-float64-images", "fixed-size-images",
                              "polars"])
def test_validate_and_evaluate_read_equivalent_files(tiny_config, raw_data, tmp_path, write):
    config = make_tiny_config(tmp_path, **{"data.raw_root": str(tmp_path / "raw")})
    rewrite(tiny_config.data.raw_root, config.data.raw_root, write)
    events = pq.read_schema(next(config.data.raw_root.glob("events/*/*.parquet")))
    items = pq.read_schema(next(config.data.raw_root.glob("items/*/*.parquet")))
    assert (events.field(F.EVENT_ID).type != pa.string()                 # really another encoding
            or not items.field(F.IMAGE).type.equals(raw.ITEM_TYPES[F.IMAGE]))
    paths = RunPaths.for_run(config, RUN_DATE, "types")
    result = validate.run(config, paths)
    assert sum(result.rows.values()) == sum(d.events for d in raw_data.days)
    rows = lambda cfg: sum(len(b) for b in EvalData(RunPaths.for_run(cfg, RUN_DATE, "t"), ("platform",)))
    assert rows(config) == rows(tiny_config)


def test_wrong_types_still_fail_naming_table_partition_column(tiny_config, raw_data, tmp_path):
    config = make_tiny_config(tmp_path, **{"data.raw_root": str(tmp_path / "raw")})
    shutil.copytree(tiny_config.data.raw_root, config.data.raw_root)
    day = RUN_DATE - dt.timedelta(days=1)
    path = next((config.data.raw_root / "events" / f"ds={day}").glob("*.parquet"))
    table = pq.read_table(path)
    naive = table.column(F.EVENT_TS).cast(pa.timestamp("us"))
    pq.write_table(table.set_column(table.schema.get_field_index(F.EVENT_TS), F.EVENT_TS, naive), path)
    with pytest.raises(validate.ValidationError) as err:
        validate.run(config, RunPaths.for_run(config, RUN_DATE, "wrong"))
    assert err.value.problems == [f"events partition ds={day} ({path.name}): column 'event_ts' has type "
                                  "timestamp[us] (no time zone), expected a UTC timestamp"]


def test_a_truncated_file_is_named_not_a_traceback(tiny_config, raw_data, tmp_path):
    config = make_tiny_config(tmp_path, **{"data.raw_root": str(tmp_path / "raw")})
    shutil.copytree(tiny_config.data.raw_root, config.data.raw_root)
    path = next((config.data.raw_root / "events" / f"ds={RUN_DATE}").glob("*.parquet"))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(validate.ValidationError, match=f"{path.name}: not a readable Parquet file"):
        validate.run(config, RunPaths.for_run(config, RUN_DATE, "truncated"))


def test_float64_images_are_cast_and_a_value_no_float32_holds_is_refused_as_not_finite():
    from pipeline.contracts import rows

    good, huge = [0.25] * F.IMAGE_DIM, [0.25] * (F.IMAGE_DIM - 1) + [1e300]
    table = pa.table({F.ITEM_ID: [1, 2], F.TITLE: ["a", "b"], F.CATEGORY: ["c", "c"], F.PRICE: [1.0, 2.0],
                      F.IMAGE: pa.array([good, huge], pa.list_(pa.float64()))})
    checked = rows.check_items(table)
    assert checked.images.dtype == np.float32 and checked.images[0, 0] == np.float32(0.25)
    assert checked.reasons.tolist() == ["", "image_not_finite"]      # "" = kept

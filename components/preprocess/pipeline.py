"""The preprocess Beam graph: validate rows, analyze items, transform, write table and shards.

    items ─ValidateItems─┬─ catalog index (side input) ──────────────────┐
                         ├─ item rows + impressions ─AnalyzeDataset─ transform_fn ─ WriteTransformFn
                         └─ TransformItems (once per item) ─ item table ─ WriteItemTable
    row groups ─ReadEvents─ValidateEvents(catalog)─┬─ CountWindow (train only: impressions, clicks per item)
                                    └─ TransformEvents ─ GroupByShard ─ WriteShards ─ shard stats

No join: an example references its items by item table row (pipeline/contracts/item_table.py),
so item content is written once, in the table, and the events go straight from the transform to
their shard. What crosses the shuffle is the examples themselves, a few hundred bytes each.
"""
from __future__ import annotations

import itertools
import os

import apache_beam as beam
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import schema_utils
from tfx_bsl.tfxio import tensor_adapter, tensor_representation_util

from components.preprocess import sinks
from components.preprocess import steps as S
from components.preprocess import transform as T
from pipeline.config import Config
from pipeline.contracts import item_table as IT
from pipeline.contracts.inputs import Inputs
from pipeline.contracts.rows import ITEM_COLUMNS, MODEL_EVENT_COLUMNS

STATS_DIR = "_stats"


def _read(p, label: str, files, columns):
    """One read stage for a list of files (Beam still splits the work by file / row group)."""
    return (p | f"{label}Files" >> beam.Create([str(f) for f in files])
            | label >> beam.io.ReadAllFromParquetBatched(columns=list(columns), with_filename=True))


def _adapter_config():
    schema = schema_utils.schema_from_feature_spec(T.RAW_FEATURE_SPEC)
    reps = tensor_representation_util.InferTensorRepresentationsFromSchema(schema)
    return tensor_adapter.TensorAdapterConfig(S.analysis_schema(), reps)


class ReadValidatedItems(beam.PTransform):
    """The items snapshot, read and checked: outputs items, catalog, counts and rejected."""

    def __init__(self, inputs: Inputs):
        super().__init__()
        self.inputs = inputs

    def expand(self, p):
        return (_read(p, "ReadItems", self.inputs.items, ITEM_COLUMNS)
                | "ValidateItems" >> beam.ParDo(S.ValidateItems()).with_outputs(
                    "rejected", "catalog", "counts", main="items"))


def _row_groups(inputs: Inputs) -> list[tuple[str, int, int]]:
    """(file, row group, first row) of every events file of the run."""
    out = []
    for files in inputs.event_files.values():
        for f in files:
            starts = [0, *itertools.accumulate(inputs.footers[f].row_groups)]
            out += [(str(f), g, starts[g]) for g in range(len(inputs.footers[f].row_groups))]
    return out


class ReadValidatedEvents(beam.PTransform):
    """Both splits' events from one read, checked against the catalog: outputs events, counts and
    rejected; each table is tagged by its file's split and partition date."""

    def __init__(self, inputs: Inputs, catalog, repeats: dict):
        super().__init__()
        self.inputs, self.catalog, self.repeats = inputs, catalog, repeats

    def expand(self, p):
        partition_of = {str(f): (split, day)
                        for split, by_day in (("train", self.inputs.train), ("eval", self.inputs.eval))
                        for day, files in by_day.items() for f in files}
        return (p | "EventRowGroups" >> beam.Create(_row_groups(self.inputs))
                | "SpreadRowGroups" >> beam.Reshuffle()
                | "ReadEvents" >> beam.ParDo(S.ReadRowGroups(MODEL_EVENT_COLUMNS))
                | "ValidateEvents" >> beam.ParDo(S.ValidateEvents(partition_of, self.repeats), self.catalog)
                .with_outputs("rejected", "counts", main="events"))


def build(p: beam.Pipeline, config: Config, inputs: Inputs, out: dict[str, str],
          shards: dict[str, int], repeats: dict[str, object], spill: bool = False,
          transformed: Inputs | None = None) -> None:
    """Add the whole preprocess graph to `p`; `out` holds the temp output folders.

    The analysis (vocabularies, the item table's counts) and the row report cover `inputs`, the
    whole window; the examples are written for `transformed` (default: the same), which an
    incremental night cuts to its new days (pipeline/contracts/training_plan.py).

    `repeats`: file -> row positions that repeat an earlier event id (event_ids.read_partition).
    `spill` (the DirectRunner): the examples reach the shard writer through files in
    out["spill"] instead of through the runner's memory (sinks.SpillByShard).

    Inputs are read and validated twice (cheap: Parquet decode + vectorized checks): once to
    count impressions and rejects for the analysis, once to transform. The alternative, keeping
    the validated events between the two, needs a fusion break that serializes every event
    batch through the runner, which costs more than re-reading the columns.
    """
    items = p | "Items" >> ReadValidatedItems(inputs)
    catalog = beam.pvalue.AsSingleton(items.catalog | "IndexCatalog" >> beam.CombineGlobally(S.MergeCatalog()))
    events = p | "Events" >> ReadValidatedEvents(inputs, catalog, repeats)
    window = beam.pvalue.AsSingleton(
        events.events | "CountWindow" >> beam.Map(S.batch_window_counts)
        | "SumWindow" >> beam.CombineGlobally(S.SumCounts()))
    analysis = items.items | "ItemAnalysisRows" >> beam.FlatMap(S.analysis_rows, window)
    with tft_beam.Context(temp_dir=out["tft_tmp"], force_tf_compat_v1=False):
        transform_fn = (analysis, _adapter_config()) | "AnalyzeItems" >> tft_beam.AnalyzeDataset(
            T.make_preprocessing_fn(config.model))
        written = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(out["transform"])
    ready = beam.pvalue.AsSingleton(written)

    table = (p | "ItemsAgain" >> ReadValidatedItems(inputs)).items | "TransformItems" >> beam.ParDo(
        S.TransformItems(out["transform"]), ready, catalog, window)
    _ = table | "WriteItemTable" >> beam.io.WriteToParquetBatched(
        os.path.join(out["examples"], IT.ITEM_TABLE), IT.schema(config.model.title_len),
        num_shards=1, shard_name_template="")
    again = p | "EventsAgain" >> ReadValidatedEvents(transformed or inputs, catalog, repeats)
    keyed = again.events | "TransformEvents" >> beam.ParDo(S.TransformEvents(out["transform"], shards), ready)
    if spill:
        keyed = keyed | "SpillByShard" >> beam.ParDo(sinks.SpillByShard(out["spill"]))
    stats = (keyed | "GroupByShard" >> beam.GroupByKey()
             | "WriteShards" >> beam.ParDo(sinks.WriteShard(out["examples"], shards,
                                                            config.preprocess.compression, spilled=spill)))

    stats_dir = os.path.join(out["examples"], STATS_DIR)
    counts = [items.counts, events.counts]
    rejected = [items.rejected, events.rejected]
    _ = (stats | "ListShards" >> beam.combiners.ToList()
         | "WriteShardStats" >> beam.Map(sinks.write_json, os.path.join(stats_dir, "shards.json")))
    _ = (counts | "AllCounts" >> beam.Flatten() | "SumAllCounts" >> beam.CombineGlobally(S.SumCounts())
         | "WriteCounts" >> beam.Map(sinks.write_json, os.path.join(stats_dir, "counts.json")))
    _ = (rejected | "AllRejected" >> beam.Flatten() | "RejectedToJson" >> beam.Map(sinks.to_json_line)
         | "WriteRejected" >> beam.io.WriteToText(os.path.join(out["rejected"], "rejected"),
                                                  file_name_suffix=".jsonl", num_shards=1,
                                                  shard_name_template=""))

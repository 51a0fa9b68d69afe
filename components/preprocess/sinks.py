"""The pipeline's last steps and small outputs: shards, their stats, reports.

WriteShard writes each shard straight into the temp output with the in-process ShardWriter
(sha256 computed while writing); the stats it yields become manifest entries.

SpillByShard is for runners whose GroupByKey holds its input in memory (the DirectRunner keeps
every PCollection that crosses a fusion break in the runner process, so grouping the day's
events by shard held the whole day): each bundle appends its chunks to one file per shard, only
the file names cross the GroupByKey, and WriteShard reads one shard's chunks back. Memory then
stays flat in the day's size. Distributed runners shuffle to disk themselves and skip it.
"""
from __future__ import annotations

import json
import os
import pickle
import uuid
from collections.abc import Iterable, Iterator

import apache_beam as beam
import numpy as np

from components.preprocess.steps import EventChunk, counter
from components.preprocess.tfrecord import ShardWriter
from pipeline.contracts import manifest as M

MAX_OPEN_WRITERS = 2      # shards still draining (write + sha256 + fsync) while the next is built


class SpillByShard(beam.DoFn):
    """((split, shard), chunk) -> appended to this bundle's file for that shard; at the bundle's
    end, ((split, shard), file) per file. A retried bundle writes new files (new names) and
    only a committed bundle's names reach the writer, as in Beam's own file sinks."""

    def __init__(self, spill_dir: str):
        self.spill_dir = spill_dir

    def start_bundle(self):
        self._files = {}

    def process(self, element):
        (split, shard), chunk = element
        spill = self._files.get((split, shard))
        if spill is None:
            os.makedirs(self.spill_dir, exist_ok=True)
            name = f"{split}-{shard:05d}-{uuid.uuid4().hex}.pickle"
            spill = self._files[(split, shard)] = open(os.path.join(self.spill_dir, name), "wb")
        pickle.dump(chunk, spill, protocol=pickle.HIGHEST_PROTOCOL)

    def finish_bundle(self):
        from apache_beam.transforms.window import GlobalWindows

        files, self._files = self._files, {}
        for key, spill in files.items():
            spill.close()
            yield GlobalWindows.windowed_value((key, spill.name))


def read_spilled(files: Iterable[str]) -> Iterator[EventChunk]:
    """The chunks SpillByShard wrote (our own temp files: pickle is safe here)."""
    for path in files:
        with open(path, "rb") as spill:
            while True:
                try:
                    yield pickle.load(spill)
                except EOFError:
                    break


class WriteShard(beam.DoFn):
    """All chunks of one shard -> one TFRecord file in the temp output; yields its stats.

    A shard's writer thread (file write + sha256 + fsync) keeps draining while the next shard
    is built (at most MAX_OPEN_WRITERS at once); stats are emitted at the end of the bundle.
    `spilled`: the grouped values are SpillByShard's file names, not chunks.
    """

    def __init__(self, out_dir: str, shards: dict[str, int], compression: str, spilled: bool = False):
        self.out_dir = out_dir
        self.shards = shards
        self.compression = compression
        self.spilled = spilled

    def start_bundle(self):
        self._open, self._results, self._closed = [], [], 0

    def _finish_oldest(self) -> None:
        writer, stats = self._open[self._closed]
        size, sha256 = writer.close()
        self._results.append({**stats, "bytes": size, "sha256": sha256})
        self._closed += 1

    def process(self, element):
        (split, shard), chunks = element
        chunks = list(read_spilled(chunks) if self.spilled else chunks)
        keys = np.concatenate([c.keys for c in chunks])
        parts = [p for c in chunks for p in c.payloads()]
        name = M.shard_name(split, shard, self.shards[split])
        path = os.path.join(self.out_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        while len(self._open) - self._closed >= MAX_OPEN_WRITERS:     # bound buffered bytes
            self._finish_oldest()
        writer = ShardWriter(path, self.compression)
        self._open.append((writer, {"name": name, "split": split, "shard": shard, "examples": len(parts)}))
        for i in np.argsort(keys, kind="stable").tolist():
            writer.write(parts[i])
        writer.finish()
        counter(f"{split}_examples_written").inc(len(parts))

    def finish_bundle(self):
        from apache_beam.transforms.window import GlobalWindows

        try:
            while self._closed < len(self._open):
                self._finish_oldest()
        finally:
            for writer, _ in self._open:
                writer.abort()
        results, self._open, self._results, self._closed = self._results, [], [], 0
        for stats in results:
            yield GlobalWindows.windowed_value(stats)


def write_json(value, path: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f, sort_keys=True, default=str)
    return path


def to_json_line(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)

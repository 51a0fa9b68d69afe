"""The shuffle spill: event chunks go through files, only file names through the GroupByKey."""
from __future__ import annotations

import numpy as np
import pytest

from components.preprocess.steps import EventChunk

pytestmark = pytest.mark.integration


def _chunk(start: int, n: int) -> EventChunk:
    keys = np.arange(start, start + n, dtype=np.uint64)
    return EventChunk.pack(keys, [f"event-{k}".encode() for k in keys.tolist()])


def test_spilled_chunks_come_back_whole_per_shard_and_only_names_are_grouped(tmp_path):
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    from components.preprocess.sinks import SpillByShard, read_spilled

    elements = [(("train", 0), _chunk(0, 3)), (("train", 1), _chunk(10, 2)), (("train", 0), _chunk(20, 4)),
                (("eval", 0), _chunk(30, 1))]
    want = {}
    for key, chunk in elements:
        want.setdefault(key, []).extend(zip(chunk.keys.tolist(), chunk.payloads()))

    def read_back(element):
        key, names = element
        assert all(isinstance(n, str) and n.startswith(str(tmp_path)) for n in names)   # names, not data
        return key, sorted((k, p) for c in read_spilled(names) for k, p in zip(c.keys.tolist(), c.payloads()))

    with beam.Pipeline("apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        got = (p | beam.Create(elements, reshuffle=False) | beam.ParDo(SpillByShard(str(tmp_path / "spill")))
               | beam.GroupByKey() | beam.Map(read_back))
        assert_that(got, equal_to([(k, sorted(v)) for k, v in want.items()]))
    assert {f.name.split("-")[0] for f in (tmp_path / "spill").iterdir()} == {"train", "eval"}


def test_only_the_direct_runner_spills(tiny_config):
    from components.preprocess import pipeline_options
    from components.preprocess.run import spills_shuffle

    assert spills_shuffle(pipeline_options(tiny_config, events=1000))
    assert not spills_shuffle(pipeline_options(tiny_config, ["--runner=FlinkRunner"]))
    assert not spills_shuffle(pipeline_options(tiny_config, ["--runner=DataflowRunner"]))

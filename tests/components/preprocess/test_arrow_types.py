"""The real Beam preprocess on raw files in other writers' encodings gives the same examples."""
from __future__ import annotations

import pytest

from pipeline.contracts import manifest as M
from pipeline.paths import RunPaths
from tests.components.preprocess.helpers import RUN_DATE
from tests.conftest import make_tiny_config
from tests.pipeline.contracts.encodings import large_types, rewrite

pytestmark = pytest.mark.integration


def test_large_types_dictionary_strings_and_ns_timestamps_preprocess_identically(
        tiny_config, pp_paths, pp_result, tmp_path):
    from components import preprocess

    config = make_tiny_config(tmp_path, **{"data.raw_root": str(tmp_path / "raw")})
    rewrite(tiny_config.data.raw_root, config.data.raw_root, large_types)
    paths = RunPaths.for_run(config, RUN_DATE, "large-types")
    result = preprocess.run(config, paths)
    assert (result.train_examples, result.eval_examples, result.rejected) == \
        (pp_result.train_examples, pp_result.eval_examples, pp_result.rejected)
    ours, theirs = M.read(paths.examples_dir), M.read(pp_paths.examples_dir)
    for split in M.SPLITS:       # deterministic shards: the same bytes whatever the encoding
        assert [s["sha256"] for s in ours["splits"][split]["shards"]] == \
            [s["sha256"] for s in theirs["splits"][split]["shards"]]

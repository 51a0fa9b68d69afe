"""Training reads nothing unverified, and its retry succeeds when the staged copy is damaged or gone.

A bit flipped in the staged item table used to be trained on and exported silently; a flipped
shard failed deep in a worker, and every retry re-read the same copy. Now train checks the copy
against the staged manifest before any worker starts, and the DAG's train re-stages it.
"""
from __future__ import annotations

import logging
import shutil

import pytest

from components import stage, train
from pipeline import orchestration as orch
from pipeline import run_config
from pipeline.contracts import item_table as IT
from pipeline.contracts import staged
from pipeline.paths import RunPaths
from tests.components.preprocess.helpers import RUN_DATE
from tests.conftest import ONE_WORKER

pytestmark = pytest.mark.integration


@pytest.fixture()
def clone(tiny_config, run_paths, preprocessed, tmp_path):
    """A run of its own (own SSD) with a copy of the session's real preprocess output, staged."""
    cfg = tiny_config.with_overrides({"data.staging_root": str(tmp_path / "ssd"), "train.epochs": 1, **ONE_WORKER})
    paths = RunPaths.for_run(cfg, RUN_DATE, f"restage-{tmp_path.name}")
    for part in ("examples_dir", "transform_dir"):
        shutil.copytree(getattr(run_paths, part), getattr(paths, part))
    stage.run(cfg, paths)
    return cfg, paths


def _flip_a_bit(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_flipped_bit_or_a_missing_copy_stops_train_before_any_worker_starts(clone):
    cfg, paths = clone
    _flip_a_bit(paths.staged_dir / IT.ITEM_TABLE)
    with pytest.raises(train.StagedDataError, match=rf"{IT.ITEM_TABLE}: sha256 mismatch; the DAG's train "
                                                    rf"re-stages it; by hand: python -m components.stage"):
        train.run(cfg, paths)
    assert not paths.logs_dir.exists()                     # no worker was launched
    shutil.rmtree(paths.staged_dir)
    with pytest.raises(train.StagedDataError, match="no staged copy of run"):
        train.run(cfg, paths)


def test_the_dags_train_restages_a_damaged_copy_trains_and_releases_its_pin(clone, caplog):
    cfg, paths = clone
    shard = next(p for p in (paths.staged_dir / "train").iterdir())
    _flip_a_bit(shard)
    assert staged.is_pinned(paths.staged_dir)
    spec = orch.RunSpec(paths.ds, paths.run_id, config=cfg.to_dict(), config_digest=run_config.digest(cfg))
    with caplog.at_level(logging.WARNING, logger="pipeline.orchestration"):
        result = orch.run_train(spec)
    assert "sha256 mismatch" in caplog.text and "staging again, then training" in caplog.text
    assert result["epochs"] >= 1 and (paths.model_dir / "saved_model.pb").exists()
    assert staged.problems(paths.staged_dir) == [] and not staged.is_pinned(paths.staged_dir)

"""Fixtures shared by the evaluate and push tests (imported by both folders' conftest.py).

Data: five generated days. 11-01 and 11-02 fit the stand-in model; 11-03 is clean; 11-04
carries malformed rows (every kind the generator plants); 11-05 has shuffled labels, so no
model can do better than chance on it.
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import make_tiny_config

FIRST_DAY = dt.date(2026, 11, 1)
CLEAN_DAY = dt.date(2026, 11, 3)
MALFORMED_DAY = dt.date(2026, 11, 4)
SHUFFLED_DAY = dt.date(2026, 11, 5)


@pytest.fixture(scope="session")
def gate_raw(tmp_path_factory) -> Path:
    from pipeline.datagen import generate

    root = tmp_path_factory.mktemp("gate") / "raw"
    generate(root, FIRST_DAY, 5, users=300, items=200, events_per_day=1500, seed=11,
             faults={MALFORMED_DAY: ["malformed:0.06"], SHUFFLED_DAY: ["shuffled_labels"]})
    return root


@pytest.fixture(scope="session")
def standins(tmp_path_factory, gate_raw) -> dict[str, Path]:
    from tests.components.evaluate.standin import save_standin

    root = tmp_path_factory.mktemp("standins")
    return {kind: save_standin(root / kind, kind, gate_raw, "2026-11-01") for kind in ("good", "bad")}


class Runs:
    """Builds (config, paths) for a run date in a per-test artifact and serving tree."""

    def __init__(self, root: Path, raw: Path, standins: dict[str, Path]):
        self.root, self.raw, self.standins = root, raw, standins

    def config(self, **overrides):
        # The popularity floor is off (tests/conftest.py TINY): the stand-ins are test doubles of
        # the serving contract, not rankers; test_popularity_gate.py trains a real one.
        # The malformed day plants 6 % bad rows to test how the gate skips them; the DAG's
        # preprocess (and evaluate alone) would refuse it at the default 1 % bound.
        return make_tiny_config(self.root, **{"data.raw_root": str(self.raw),
                                              "preprocess.max_rejected_fraction": 0.1, **overrides})

    def make(self, date: dt.date, model: str | None = "good", run_id: str = "r1", **overrides):
        from pipeline.paths import RunPaths

        config = self.config(**overrides)
        paths = RunPaths.for_run(config, date, run_id)
        if model is not None:
            if paths.model_dir.exists():
                shutil.rmtree(paths.model_dir)
            shutil.copytree(self.standins[model], paths.model_dir)
        return config, paths

    def serve_by_hand(self, config, version: int, model: str = "good",
                      data_date: dt.date | None = None) -> Path:
        """Place a version in the serving dir the way an operator would (copy, no push)."""
        vdir = config.data.serving_base / config.push.model_name / str(version)
        shutil.copytree(self.standins[model], vdir)
        if data_date is not None:
            (vdir / "assets.extra").mkdir(exist_ok=True)
            (vdir / "assets.extra" / "push_record.json").write_text(
                json.dumps({"version": version, "data_date": data_date.isoformat(), "source": "hand"}))
        return vdir


@pytest.fixture
def runs(tmp_path, gate_raw, standins) -> Runs:
    return Runs(tmp_path, gate_raw, standins)

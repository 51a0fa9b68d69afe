"""The quality benchmark's bookkeeping: partial runs and regime names (the runs themselves are `make bench`)."""
from __future__ import annotations

import json

import pytest

from bench.lab import quality

pytestmark = pytest.mark.unit


def test_a_partial_run_replaces_only_what_it_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(quality, "RESULTS_DIR", tmp_path)
    assert quality._merged({"b": 3}) == {"b": 3}                       # nothing committed yet
    (tmp_path / "quality.json").write_text(json.dumps({"a": 1, "b": 2, "machine": "x", "python": "3"}))
    assert quality._merged({"b": 3}) == {"a": 1, "b": 3}


def test_an_unknown_regime_is_refused_naming_the_choices():
    with pytest.raises(SystemExit, match=r"unknown regime\(s\) \['nope'\]; choose from .*'cold_start'"):
        quality.regime_matrix(["nope", "default"], seeds=1)

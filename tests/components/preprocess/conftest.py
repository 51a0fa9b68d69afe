"""Fixtures: the session's real preprocess run (tests/conftest.py `preprocessed`), under local names."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def pp_paths(run_paths):
    return run_paths


@pytest.fixture(scope="session")
def pp_result(preprocessed):
    return preprocessed

"""The tiers keep their promises: a unit test cannot start heavy work, a mislabelled test fails
the collection (tests/tiers.py)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pipeline.config import PROJECT_ROOT
from tests.tiers import TierViolation, refused


def test_a_unit_test_cannot_run_a_beam_pipeline_a_gang_airflow_or_a_push_verification(tmp_path):
    """This test is unit (unmarked): the guard is armed around it, as around every unit test."""
    import apache_beam as beam

    from components.train.gang.launcher import Gang, GangSpec

    with pytest.raises(TierViolation, match="Beam pipeline"):
        with beam.Pipeline() as p:
            p | beam.Create([1])
    with pytest.raises(TierViolation, match="gang"):
        Gang(GangSpec(commands=[["true"]], envs=[{}], logs_dir=tmp_path, ready_files=[tmp_path / "r"],
                      startup_timeout_s=1, timeout_s=1, kill_grace_s=0)).run()
    for command in (["airflow", "dags", "list"], [sys.executable, "-m", "components.train.worker"],
                    ["bash", "scripts/airflow_standalone.sh"], [sys.executable, "-m", "components.push.verify"]):
        with pytest.raises(TierViolation, match="unit test started"):
            subprocess.run(command, capture_output=True)


def test_help_and_plain_python_children_stay_allowed():
    assert refused([sys.executable, "-m", "components.preprocess", "--help"]) is None
    assert refused([sys.executable, "-c", "import airflow.sdk"]) is None         # a DAG parse in a child
    assert refused([sys.executable, "-m", "components.preprocess", "--date", "2026-11-04"]) == "components.preprocess"
    assert refused(["/venv/bin/airflow", "scheduler"]) == "/venv/bin/airflow"
    assert refused([sys.executable, "-m", "components.evaluate", "--date", "2026-11-04"]) == "components.evaluate"


@pytest.mark.parametrize("tier, fixture, ok", [("unit", "trained", False), ("unit", "live", False),
                                               ("integration", "trained", True), ("integration", "live", False),
                                               ("packaging", "preprocessed", False), ("airflow", "trained", True)])
def test_a_test_that_needs_a_heavier_tier_fails_the_collection(tmp_path, tier, fixture, ok):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import pytest
        pytest_plugins = ["tests.tiers"]

        @pytest.fixture
        def {fixture}():
            return 1
    """))
    (tmp_path / "test_mislabelled.py").write_text(textwrap.dedent(f"""
        import pytest

        @pytest.mark.{tier}
        def test_it({fixture}):
            assert {fixture} == 1
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"})
    assert (done.returncode == 0) is ok, done.stdout + done.stderr
    if not ok:
        assert f"a {tier} test uses fixture {fixture!r}" in done.stdout + done.stderr


def test_integration_groups_keep_shared_set_ups_together_and_spread_the_rest():
    from tests.tiers import xdist_group

    assert xdist_group("integration", ("tmp_path", "preprocessed"), "tests/a.py") == "integration"
    assert xdist_group("integration", ("train_data",), "tests/a.py") == "integration-train"
    assert xdist_group("integration", ("tmp_path",), "tests/a.py") != xdist_group("integration", (), "tests/b.py")
    assert xdist_group("airflow", ("live",), "tests/a.py") == "airflow-live"

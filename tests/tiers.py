"""The suite's tiers, as markers, and the two checks that keep their names honest.

- unit: pure Python, contracts, config, the DAG's structure in process, Keras model builds,
  stand-in SavedModels. No Beam pipeline, no process gang, no Airflow process, no push and no
  step CLI in a child process (each loads TensorFlow: a few seconds of CPU), no TF Lite
  conversion and no real storage server: `make test-fast`.
- integration: the real components on tiny data: one session-scoped Beam + tf.Transform run
  (`preprocessed`), real training gangs, kill and resume.
- airflow: real Airflow: `airflow dags test` stories and one live scheduler + api-server.
- packaging: what a fresh install gives (the lean `.[airflow]` venv).

A test without a tier marker is unit. `make test` runs the tiers in one session on two xdist
workers (`--dist loadgroup`): each heavy group (two of integration, two of airflow:
`xdist_group` below) runs on one worker, so its session fixtures are built once, while the unit
tests fill in. The heavy groups are ordered first, so no worker is
left with a heavy tail.

Two checks:
1. at collection, a test whose fixtures belong to a tier its own tier may not use fails the
   whole collection, naming the test and the fixture (`HEAVY_FIXTURES` below);
2. while a unit test runs, starting a Beam pipeline, a gang or an Airflow process raises
   `TierViolation` (`arm`), so "make test-fast runs none of them" is checked, not assumed.
"""
from __future__ import annotations

import subprocess

import pytest

TIERS = ("unit", "integration", "airflow", "packaging")
RUN_ORDER = ("integration", "airflow", "packaging", "unit")
MAY_USE = {"unit": {"unit"}, "integration": {"unit", "integration"},
           "airflow": {"unit", "integration", "airflow"}, "packaging": {"unit", "packaging"}}
# The set-ups that make a tier heavy; every fixture built on them inherits their tier.
HEAVY_FIXTURES = {
    "preprocessed": "integration",      # the session's Beam + tf.Transform run
    "train_data": "integration",        # tf.Transform on Beam, in a subprocess
    "trained": "integration",           # the session's training launch
    "gang_scenario": "integration",     # the kill / resume / export-kill gang
    "live": "airflow",                  # the one live scheduler + api-server (tests/live_airflow.py)
    "airflow_home": "airflow",          # a migrated Airflow home
    "lean_venv": "packaging",           # a venv with only the [airflow] extra
}


class TierViolation(AssertionError):
    """A unit test started work its tier promises not to do."""


def tier_of(item) -> str:
    return next(m.name for m in item.iter_markers() if m.name in TIERS)


def pytest_configure(config):
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: the {tier} tier (tests/tiers.py)")


def pytest_itemcollected(item):
    """Each test's tier, and its xdist group, before any collection hook reads markers (-m,
    xdist's loadgroup)."""
    tiers = [m.name for m in item.iter_markers() if m.name in TIERS]
    if not tiers:
        item.add_marker(pytest.mark.unit)
    elif tiers[0] != "unit":
        group = xdist_group(tiers[0], getattr(item, "fixturenames", ()), item.nodeid.split("::")[0])
        item.add_marker(pytest.mark.xdist_group(group))


def xdist_group(tier: str, fixtures, module: str = "") -> str:
    """A heavy tier's xdist group: a group's session fixtures are built once, on its worker.
    The airflow tier is two: the tests on the one live Celery stack (`live`) and the rest (each
    starts its own Airflow); both spend much of their time waiting on a scheduler. The
    integration tier: the tests on the session's preprocess output and trained model
    (`preprocessed`, `trained`), the tests on the small tf.Transform run (`train_data`), and one
    group per module for the rest (their module-scoped set-ups are built once, and the modules
    spread over both workers: one group of them all was the suite's longest)."""
    if tier == "airflow":
        return "airflow-live" if "live" in fixtures else tier
    if tier == "integration":
        if {"preprocessed", "trained"} & set(fixtures):
            return tier
        return "integration-train" if "train_data" in fixtures else f"integration:{module}"
    return tier


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    offences = []
    for item in items:
        tiers = {m.name for m in item.iter_markers() if m.name in TIERS}
        if len(tiers) > 1:
            offences.append(f"{item.nodeid}: more than one tier {sorted(tiers)}")
            continue
        tier = tiers.pop()
        for name in getattr(item, "fixturenames", ()):
            needed = HEAVY_FIXTURES.get(name)
            if needed and needed not in MAY_USE[tier]:
                offences.append(f"{item.nodeid}: a {tier} test uses fixture {name!r} of the {needed} tier")
    if offences:
        raise pytest.UsageError("tests in the wrong tier (tests/tiers.py):\n  " + "\n  ".join(offences))
    items.sort(key=lambda item: RUN_ORDER.index(tier_of(item)))      # stable: each tier keeps its order
    if config.getoption("loadgroup", default=False):      # xdist absent: no groups to name
        _name_xdist_groups(items)


def _name_xdist_groups(items) -> None:
    """What xdist's loadgroup does on a worker: `nodeid@group`, the suffix its scheduler groups by.
    xdist 3.8 writes `item._nodeid`, which pytest 9.2 no longer reads (the nodeid is `item._id`),
    so without this every test of a group may land on either worker."""
    from _pytest.nodeid import coerce_node_id

    for item in items:
        group = item.get_closest_marker("xdist_group")
        if group and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{group.args[0]}")


REFUSED_COMMANDS = ("airflow", "components.train.worker", "airflow_standalone.sh", "tft_fixture",
                    "components.push.verify")
# Step CLIs that load TensorFlow (or run Beam) as soon as they do more than print their help.
HEAVY_CLIS = ("components.preprocess", "components.evaluate", "components.push")


def refused(args) -> str | None:
    """What of a command line a unit test may not start: Airflow, a training worker, Beam, a step
    CLI that loads TensorFlow, push's verification child."""
    tokens = [args] if isinstance(args, (str, bytes)) else list(args)
    text = " ".join(str(t) for t in tokens)
    if "--help" in text:
        return None
    for token in tokens:
        token = str(token)
        if token.rsplit("/", 1)[-1] == "airflow" or any(word in token for word in REFUSED_COMMANDS[1:]):
            return token
    return next((cli for cli in HEAVY_CLIS if cli in text), None)


def arm(monkeypatch) -> None:
    """Make the unit tier's promises hard: each heavy entry point raises TierViolation."""
    import apache_beam

    from components.train.gang import launcher

    def no_pipeline(*_args, **_kwargs):
        raise TierViolation("a unit test ran a Beam pipeline: mark it integration")

    def no_gang(*_args, **_kwargs):
        raise TierViolation("a unit test started a process gang: mark it integration")

    original = subprocess.Popen.__init__

    def guarded_popen(self, args, *rest, **kwargs):
        what = refused(args)
        if what:
            raise TierViolation(f"a unit test started {what!r}: mark it integration or airflow")
        original(self, args, *rest, **kwargs)

    monkeypatch.setattr(apache_beam.Pipeline, "run", no_pipeline)
    monkeypatch.setattr(launcher.Gang, "run", no_gang)
    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_popen)


@pytest.fixture(autouse=True)
def _tier_guard(request, monkeypatch):
    if tier_of(request.node) == "unit":
        arm(monkeypatch)
    yield


_TIER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Each tier's own time: the sum of its tests' set-up, call and tear-down (on the xdist
    controller too: the workers' reports carry the markers as keywords)."""
    tier = next((t for t in TIERS if t in getattr(report, "keywords", {})), "unit")
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if _TIER_SECONDS:
        times = ", ".join(f"{tier} {_TIER_SECONDS[tier]:.0f} s" for tier in TIERS if tier in _TIER_SECONDS)
        terminalreporter.write_line(f"tier times (sum of their tests' durations, over all workers): {times}")

from tests.components.evaluate.fixtures import gate_raw, runs, standins  # noqa: F401 (fixtures)

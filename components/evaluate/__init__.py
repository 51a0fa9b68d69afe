"""Evaluation gate: `run(config, paths) -> EvalResult` (see component.py)."""
from components.evaluate.component import EvalError, run
from components.evaluate.outputs import BLESSED, NOT_BLESSED, read_verdict

__all__ = ["BLESSED", "NOT_BLESSED", "EvalError", "read_verdict", "run"]

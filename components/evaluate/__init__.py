"""Evaluation gate: `run(config, paths) -> EvalResult` (see run.py)."""
from components.evaluate.run import EvalError, run
from pipeline.contracts.evaluation import BLESSED, NOT_BLESSED, read_verdict

__all__ = ["BLESSED", "NOT_BLESSED", "EvalError", "read_verdict", "run"]

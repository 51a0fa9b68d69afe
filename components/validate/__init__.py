"""Validate step: cheap pyarrow checks of a run's raw inputs before any Beam worker starts.

`run(config, paths) -> ValidateResult` (see run.py). The partitions + schemas part that
preprocess re-checks is a shared rule: `pipeline.contracts.inputs.check_inputs`.
"""
from components.validate.run import run
from pipeline.contracts.inputs import Inputs, ValidationError

__all__ = ["Inputs", "ValidationError", "run"]

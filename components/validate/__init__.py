"""Validate step: cheap pyarrow checks of a run's raw inputs before any Beam worker starts.

`run(config, paths) -> ValidateResult` (see run.py); `check_inputs(paths)` is the partitions +
schemas part that preprocess re-checks before starting Beam.
"""
from components.validate.run import check_inputs, run
from pipeline.contracts.inputs import Inputs, ValidationError

__all__ = ["Inputs", "ValidationError", "check_inputs", "run"]

"""CLI: python -m components.evaluate --date 2026-11-08 [--run-id ID] [--config FILE] [--set k=v ...]

Exit status 0 when BLESSED, 3 when NOT_BLESSED (so a shell pipeline can stop), 2 when the
evaluation was refused for a reason named on one line (no candidate model, bad eval-day rows, a
served model that does not load, a full disk), 1 on any other error.
"""
from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli import (
    add_run_arguments,
    add_verdict_argument,
    emit_result,
    load_run,
    refusal,
    run_mirrored,
    setup_logging,
)

NOT_BLESSED_EXIT = 3


def main(argv: list[str] | None = None) -> int:
    parser = add_verdict_argument(add_run_arguments(
        argparse.ArgumentParser(prog="python -m components.evaluate", description=__doc__)))
    args = parser.parse_args(argv)
    setup_logging()
    from components.evaluate import run
    from components.evaluate.data import EvalDataError
    from components.evaluate.run import EvalError
    from components.evaluate.scoring import ScoringError
    from pipeline.contracts.inputs import ValidationError
    from pipeline.contracts.serving import ServingDirError

    try:
        result = run_mirrored(run, *load_run(args))
    except Exception as err:
        line = refusal(err, (EvalError, EvalDataError, ScoringError, ValidationError, ServingDirError))
        if line is None:
            raise
        logging.getLogger("components.evaluate").error("evaluate refused: %s", line)
        return 2
    emit_result(result, args)
    return 0 if result.blessed or args.exit_zero else NOT_BLESSED_EXIT


if __name__ == "__main__":
    sys.exit(main())

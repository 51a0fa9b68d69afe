"""`python -m components.preprocess --date YYYY-MM-DD [--run-id ID] [--config FILE] [beam flags]`.

Unknown flags go to Beam's PipelineOptions, e.g. `--runner=DataflowRunner --project=...`
or `--direct_running_mode=in_memory` (see docs/preprocess.md).
"""
from __future__ import annotations

import argparse
import sys

from pipeline.cli import add_run_arguments, run_step, setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.preprocess", description=__doc__,
                                     allow_abbrev=False)
    args, beam_args = add_run_arguments(parser).parse_known_args(argv)
    setup_logging()
    from components.preprocess import run
    from components.preprocess.run import WorkerPoolError
    from pipeline.contracts.inputs import ValidationError

    return run_step(args, run, (ValidationError, WorkerPoolError), beam_args)


if __name__ == "__main__":
    sys.exit(main())

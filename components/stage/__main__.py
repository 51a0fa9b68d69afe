"""`python -m components.stage --date YYYY-MM-DD [--run-id ID] [--worker I --workers W]`."""
from __future__ import annotations

import argparse
import sys

from pipeline.cli import add_run_arguments, run_step, setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = add_run_arguments(argparse.ArgumentParser(prog="python -m components.stage", description=__doc__))
    parser.add_argument("--worker", type=int, help="stage only this worker's shards (cluster hosts)")
    parser.add_argument("--workers", type=int, help="number of training workers (default: manifest)")
    args = parser.parse_args(argv)
    setup_logging()
    from components.stage import StageError, run

    return run_step(args, run, StageError, args.worker, args.workers)


if __name__ == "__main__":
    sys.exit(main())

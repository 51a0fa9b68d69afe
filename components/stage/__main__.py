"""`python -m components.stage --date YYYY-MM-DD [--run-id ID] [--worker I --workers W]`."""
from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli import add_run_arguments, emit_result, load_run, setup_logging

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    parser = add_run_arguments(argparse.ArgumentParser(prog="python -m components.stage", description=__doc__))
    parser.add_argument("--worker", type=int, help="stage only this worker's shards (cluster hosts)")
    parser.add_argument("--workers", type=int, help="number of training workers (default: manifest)")
    args = parser.parse_args(argv)
    setup_logging()
    config, paths = load_run(args)
    from components.stage import StageError, run

    try:
        result = run(config, paths, args.worker, args.workers)
    except StageError as err:
        log.error("%s", err)
        return 2
    emit_result(result, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

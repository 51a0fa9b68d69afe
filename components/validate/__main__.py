"""`python -m components.validate --date YYYY-MM-DD [--run-id ID] [--config FILE]`."""
from __future__ import annotations

import argparse
import sys

from pipeline.cli import add_run_arguments, run_step, setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = add_run_arguments(argparse.ArgumentParser(prog="python -m components.validate", description=__doc__))
    args = parser.parse_args(argv)
    setup_logging()
    from components.validate import ValidationError, run

    return run_step(args, run, ValidationError)


if __name__ == "__main__":
    sys.exit(main())

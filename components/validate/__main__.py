"""`python -m components.validate --date YYYY-MM-DD [--run-id ID] [--config FILE]`."""
from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli import add_run_arguments, emit_result, load_run, setup_logging

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    parser = add_run_arguments(argparse.ArgumentParser(prog="python -m components.validate", description=__doc__))
    args = parser.parse_args(argv)
    setup_logging()
    config, paths = load_run(args)
    from components.validate import ValidationError, run

    try:
        result = run(config, paths)
    except ValidationError as err:
        log.error("%s", err)
        return 2
    emit_result(result, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

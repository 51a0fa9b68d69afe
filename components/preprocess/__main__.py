"""`python -m components.preprocess --date YYYY-MM-DD [--run-id ID] [--config FILE] [beam flags]`.

Unknown flags go to Beam's PipelineOptions, e.g. `--runner=DataflowRunner --project=...`
or `--direct_running_mode=in_memory` (see docs/preprocess.md).
"""
from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli import add_run_arguments, emit_result, load_run, setup_logging

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.preprocess", description=__doc__,
                                     allow_abbrev=False)
    args, beam_args = add_run_arguments(parser).parse_known_args(argv)
    setup_logging()
    config, paths = load_run(args)
    from components.preprocess import run
    from components.validate import ValidationError

    try:
        result = run(config, paths, beam_args)
    except ValidationError as err:
        log.error("%s", err)
        return 2
    emit_result(result, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

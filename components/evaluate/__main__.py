"""CLI: python -m components.evaluate --date 2026-11-08 [--run-id ID] [--config FILE] [--set k=v ...]

Exit status 0 when BLESSED, 3 when NOT_BLESSED (so a shell pipeline can stop), 1 on error.
"""
from __future__ import annotations

import argparse
import sys

from pipeline.cli import add_run_arguments, add_verdict_argument, emit_result, load_run, run_mirrored, setup_logging

NOT_BLESSED_EXIT = 3


def main(argv: list[str] | None = None) -> int:
    parser = add_verdict_argument(add_run_arguments(
        argparse.ArgumentParser(prog="python -m components.evaluate", description=__doc__)))
    args = parser.parse_args(argv)
    setup_logging()
    from components.evaluate import run

    result = run_mirrored(run, *load_run(args))
    emit_result(result, args)
    return 0 if result.blessed or args.exit_zero else NOT_BLESSED_EXIT


if __name__ == "__main__":
    sys.exit(main())

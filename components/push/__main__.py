"""CLI for pushing a run's model to TF Serving, and for rolling back.

  python -m components.push push --date 2026-11-08 [--run-id ID] [--config FILE] [--set k=v]
                                 [--force --reason TEXT] [--allow-backfill]
  python -m components.push rollback --reason TEXT [--to-version N] [--config FILE]

Exit status 0 when a version was pushed / restored, 3 when the push was skipped (not blessed,
backfill, a served version copied in by hand) or published a version that a pin in models.config
keeps from being served, 2 when it was refused for a reason named on one line (nothing to roll
back to, a full volume, a failed verification, a models.config that does not parse, a serving dir
push may not write to), 1 on any other error.
"""
from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli import (
    add_config_arguments,
    add_run_arguments,
    add_verdict_argument,
    emit_result,
    load_args_config,
    load_run,
    refusal,
    run_mirrored,
    setup_logging,
)

SKIPPED_EXIT = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.push", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    push_help = "publish the run's model as the next version"
    push = add_verdict_argument(add_run_arguments(sub.add_parser("push", help=push_help)))
    push.add_argument("--force", action="store_true", help="push even if NOT_BLESSED (needs --reason)")
    push.add_argument("--reason", default=None, help="why --force (recorded in the push record)")
    push.add_argument("--allow-backfill", action="store_true", default=None,
                      help="let an older data date replace the served model")
    back = add_config_arguments(sub.add_parser("rollback", help="serve the previous version again"))
    back.add_argument("--reason", required=True)
    back.add_argument("--to-version", type=int, default=None)
    args = parser.parse_args(argv)
    setup_logging()

    from components.push import PushError, RollbackError, rollback, run
    from components.push.publish import PublishError
    from pipeline.contracts.serving import RolledBackError, ServingDirError

    try:
        if args.command == "push":
            flags = {"push.force": args.force or None, "push.force_reason": args.reason,
                     "push.allow_backfill": args.allow_backfill}
            result = run_mirrored(run, *load_run(args, {k: v for k, v in flags.items() if v is not None}))
        else:
            result = rollback(load_args_config(args), args.reason, args.to_version)
    except Exception as err:
        line = refusal(err, (PushError, PublishError, RollbackError, RolledBackError,
                                     ServingDirError))
        if line is None:
            raise
        logging.getLogger("components.push").error("%s refused: %s", args.command, line)
        return 2
    emit_result(result, args)
    return 0 if result.pushed or args.command == "push" and args.exit_zero else SKIPPED_EXIT


if __name__ == "__main__":
    sys.exit(main())

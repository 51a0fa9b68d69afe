"""Launcher CLI: `python -m components.train --date 2026-11-08 --workers 2 [--run-id ID]`.

The same command runs in a Kubernetes pod (`--backend kubernetes`): it then renders and
submits the worker manifests and waits for them instead of starting local processes.
Exit status 0 when the gang trained and the chief exported, 2 when the gang failed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.cli import add_run_arguments, run_step, setup_logging


def main(argv=None) -> int:
    p = add_run_arguments(argparse.ArgumentParser(prog="python -m components.train", description=__doc__))
    p.add_argument("--workers", type=int, help="gang size (default: train.workers)")
    p.add_argument("--epochs", type=int, help="default: train.epochs")
    p.add_argument("--backend", choices=("local", "kubernetes"), help="default: execution.backend")
    p.add_argument("--data-dir", type=Path, help="shards with train/ and eval/ (default: staged)")
    args = p.parse_args(argv)
    setup_logging()
    from components.train import run
    from components.train.gang.launcher import GangError

    flags = {"train.workers": args.workers, "train.epochs": args.epochs, "execution.backend": args.backend}
    return run_step(args, run, GangError, args.data_dir,
                    extra_overrides={k: v for k, v in flags.items() if v is not None})


if __name__ == "__main__":
    sys.exit(main())

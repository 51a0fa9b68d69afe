"""CLI: python -m components.evaluate --date 2026-11-08 [--run-id ID] [--config FILE] [--set k=v ...]

Exit status 0 when BLESSED, 3 when NOT_BLESSED (so a shell pipeline can stop), 1 on error.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

import yaml

from pipeline.config import load_config
from pipeline.paths import RunPaths

NOT_BLESSED_EXIT = 3


def parse_overrides(pairs: list[str]) -> dict:
    """--set eval.min_auc=0.6 --set eval.max_auc_drop=null -> {"eval.min_auc": 0.6, ...}"""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set expects key=value, got {pair!r}")
        out[key] = yaml.safe_load(value)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.evaluate", description=__doc__)
    parser.add_argument("--date", required=True, help="run (data) date YYYY-MM-DD; evaluates that day")
    parser.add_argument("--run-id", default="cli")
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for this run, e.g. eval.min_auc=0.6 (repeatable)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from components.evaluate import run

    config = load_config(args.config, overrides=parse_overrides(args.set))
    result = run(config, RunPaths.for_run(config, args.date, args.run_id))
    print(json.dumps(result.to_dict(), indent=2))
    return 0 if result.blessed else NOT_BLESSED_EXIT


if __name__ == "__main__":
    sys.exit(main())

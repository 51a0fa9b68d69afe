"""`python -m components.stage --date YYYY-MM-DD [--run-id ID] [--worker I --workers W]`."""
from __future__ import annotations

import argparse
import json
import logging
import sys

from components.stage import StageError, run
from pipeline.config import load_config
from pipeline.paths import RunPaths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.stage", description=__doc__)
    parser.add_argument("--date", required=True, help="run date D, YYYY-MM-DD")
    parser.add_argument("--run-id", default="cli")
    parser.add_argument("--config", help="params file (default conf/params.yaml)")
    parser.add_argument("--worker", type=int, help="stage only this worker's shards (cluster hosts)")
    parser.add_argument("--workers", type=int, help="number of training workers (default: manifest)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = load_config(args.config)
    try:
        result = run(config, RunPaths.for_run(config, args.date, args.run_id), args.worker, args.workers)
    except StageError as err:
        print(err, file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

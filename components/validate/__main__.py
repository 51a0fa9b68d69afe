"""`python -m components.validate --date YYYY-MM-DD [--run-id ID] [--config FILE]`."""
from __future__ import annotations

import argparse
import json
import logging
import sys

from components.validate import ValidationError, run
from pipeline.config import load_config
from pipeline.paths import RunPaths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.validate", description=__doc__)
    parser.add_argument("--date", required=True, help="run date D (the eval day), YYYY-MM-DD")
    parser.add_argument("--run-id", default="cli")
    parser.add_argument("--config", help="params file (default conf/params.yaml)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = load_config(args.config)
    try:
        result = run(config, RunPaths.for_run(config, args.date, args.run_id))
    except ValidationError as err:
        print(err, file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

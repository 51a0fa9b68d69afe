"""`python -m components.preprocess --date YYYY-MM-DD [--run-id ID] [--config FILE] [beam flags]`.

Unknown flags go to Beam's PipelineOptions, e.g. `--runner=DataflowRunner --project=...`
or `--direct_running_mode=in_memory` (see docs/preprocess.md).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from components.validate import ValidationError
from pipeline.config import load_config
from pipeline.paths import RunPaths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.preprocess", description=__doc__,
                                     allow_abbrev=False)
    parser.add_argument("--date", required=True, help="run date D (the eval day), YYYY-MM-DD")
    parser.add_argument("--run-id", default="cli")
    parser.add_argument("--config", help="params file (default conf/params.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override, e.g. --set train.workers=4 (YAML value)")
    args, beam_args = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import yaml

    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    config = load_config(args.config, overrides=overrides)
    from components.preprocess import run

    try:
        result = run(config, RunPaths.for_run(config, args.date, args.run_id), beam_args)
    except ValidationError as err:
        print(err, file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

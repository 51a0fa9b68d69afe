"""Launcher CLI: `python -m components.train --date 2026-11-08 --workers 2 [--run-id ID]`.

The same command runs in a Kubernetes pod (`--backend kubernetes`): it then renders and
submits the worker manifests and waits for them instead of starting local processes.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from pipeline.config import load_config
from pipeline.paths import RunPaths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m components.train", description=__doc__)
    p.add_argument("--date", required=True, help="run date D (the eval day), YYYY-MM-DD")
    p.add_argument("--workers", type=int, help="gang size (default: train.workers)")
    p.add_argument("--epochs", type=int, help="default: train.epochs")
    p.add_argument("--run-id", default="cli")
    p.add_argument("--config", type=Path, help="params YAML (default conf/params.yaml)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override, e.g. --set train.batch_size_per_replica=64 (YAML value)")
    p.add_argument("--overrides-json", help="config overrides as a JSON object (from the DAG)")
    p.add_argument("--backend", choices=("local", "kubernetes"), help="default: train.backend")
    p.add_argument("--data-dir", type=Path, help="shards with train/ and eval/ (default: staged)")
    p.add_argument("--result-json", type=Path, help="also write the TrainResult here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import yaml

    overrides = json.loads(args.overrides_json) if args.overrides_json else {}
    overrides.update({k.strip(): yaml.safe_load(v)
                      for k, _, v in (s.partition("=") for s in args.set)})
    for key, value in (("train.workers", args.workers), ("train.epochs", args.epochs),
                       ("train.backend", args.backend)):
        if value is not None:
            overrides[key] = value
    config = load_config(args.config, overrides)
    paths = RunPaths.for_run(config, args.date, args.run_id)

    from components.train import run
    from components.train.launcher import GangError

    try:
        result = run(config, paths, data_dir=args.data_dir)
    except GangError as err:
        print(f"training failed: {err}", file=sys.stderr)
        return 1
    if args.result_json:
        result.write_json(args.result_json)
    print(json.dumps(result.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

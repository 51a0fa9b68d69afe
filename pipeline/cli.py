"""The arguments every step CLI shares, so `python -m components.<step>` behaves the same everywhere.

`--overrides-json` carries a run's form overrides and `--result-json` writes the typed result
where the KubernetesPodOperator's XCom sidecar picks it up (/airflow/xcom/return.json).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import yaml

from pipeline.config import Config, load_config
from pipeline.paths import RunPaths, parse_date
from pipeline.results import StepResult


def add_run_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--date", required=True, type=parse_date, help="run date D (the eval day), YYYY-MM-DD")
    parser.add_argument("--run-id", default="cli", help="run id (Airflow's run_id); keys the run's paths")
    parser.add_argument("--config", help="params file (default: $RECO_CONFIG or conf/params.yaml)")
    parser.add_argument("--overrides-json", default="{}", help='dotted-key overrides, e.g. {"train.workers": 4}')
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="one config override, e.g. --set train.workers=4 (YAML value)")
    parser.add_argument("--result-json", type=Path, help="also write the step's result here")
    return parser


def load_run(args: argparse.Namespace, extra_overrides: dict | None = None) -> tuple[Config, RunPaths]:
    overrides = json.loads(args.overrides_json or "{}")
    overrides.update({k.strip(): yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)})
    overrides.update(extra_overrides or {})
    config = load_config(args.config, overrides=overrides)
    return config, RunPaths.for_run(config, args.date, args.run_id)


def emit_result(result: StepResult, args: argparse.Namespace) -> None:
    text = json.dumps(result.to_dict(), indent=2, sort_keys=True)
    if args.result_json:
        args.result_json.parent.mkdir(parents=True, exist_ok=True)
        args.result_json.write_text(text)
    sys.stdout.write(text + "\n")


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def run_step(args: argparse.Namespace, run, expected_error: type[Exception], *extra) -> int:
    """Run a step for the CLI: its result to stdout (and --result-json), an expected failure as exit 2."""
    config, paths = load_run(args)
    try:
        result = run(config, paths, *extra)
    except expected_error as err:
        logging.getLogger(run.__module__).error("%s", err)
        return 2
    emit_result(result, args)
    return 0

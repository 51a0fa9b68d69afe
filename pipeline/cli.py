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
from pipeline.paths import RunPaths, parse_date, safe_run_id
from pipeline.results import StepResult


def add_config_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--config", help="params file (default: $RECO_CONFIG or conf/params.yaml)")
    parser.add_argument("--overrides-json", default="{}", help='dotted-key overrides, e.g. {"train.workers": 4}')
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="one config override, e.g. --set train.workers=4 (YAML value; repeatable)")
    parser.add_argument("--run-config-json", default="",
                        help="the run's config as resolve_run fixed it (a pod's); the params file and "
                             "environment are then only compared with it")
    parser.add_argument("--result-json", type=Path, help="also write the step's result here")
    return parser


def _argument(parse):
    """argparse's type for `parse`: its own message on a bad value, exit 2 before anything runs."""
    def checked(value: str):
        try:
            return parse(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from err
    return checked


def add_run_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--date", required=True, type=_argument(parse_date),
                        help="run date D (the eval day), YYYY-MM-DD")
    parser.add_argument("--run-id", default="cli", type=_argument(safe_run_id),
                        help="run id (Airflow's run_id; one path component); keys the run's paths")
    return add_config_arguments(parser)


def add_verdict_argument(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """For the steps whose success has a verdict (evaluate: NOT_BLESSED, push: skipped)."""
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 whenever the step completes, whatever its verdict: a pod's caller "
                             "reads the verdict from --result-json")
    return parser


def parse_sets(pairs: list[str]) -> dict:
    """["eval.min_auc=0.6", "eval.max_auc_drop=null"] -> {"eval.min_auc": 0.6, "eval.max_auc_drop": None}"""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = _number_or_yaml(value)
    return out


def _number_or_yaml(value: str):
    """YAML 1.1 reads `1e-4` as a string; a number is what anyone typing it means."""
    try:
        return float(value) if any(c in value.lower() for c in ".e") else int(value)
    except ValueError:
        return yaml.safe_load(value)


def load_args_config(args: argparse.Namespace, extra_overrides: dict | None = None) -> Config:
    """The config a CLI run uses: params file, env, then --overrides-json, --set, the CLI's own flags."""
    overrides = json.loads(args.overrides_json or "{}")
    overrides.update(parse_sets(args.set))
    overrides.update(extra_overrides or {})
    if getattr(args, "run_config_json", ""):
        from pipeline import run_config

        return run_config.adopt(json.loads(args.run_config_json), "", overrides)
    return load_config(args.config, overrides=overrides)


def load_run(args: argparse.Namespace, extra_overrides: dict | None = None) -> tuple[Config, RunPaths]:
    config = load_args_config(args, extra_overrides)
    return config, RunPaths.for_run(config, args.date, args.run_id)


def emit_result(result: StepResult, args: argparse.Namespace) -> None:
    if args.result_json:
        result.write_json(args.result_json)
    sys.stdout.write(json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n")


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def run_mirrored(run, config: Config, paths: RunPaths, *extra) -> StepResult:
    """A step as a CLI runs it: with `data.artifact_store` set, mirrored like a DAG task
    (pipeline/storage.py), so a pod on another machine sees and publishes the run's outputs."""
    from pipeline import storage

    with storage.mirrored(config, paths):
        return run(config, paths, *extra)


def refusal(err: BaseException, expected: tuple[type[BaseException], ...]) -> str | None:
    """The one line a step CLI prints, with exit 2, for a refusal: one of the step's own
    `expected` errors, or a full disk in any step (named, or a bare ENOSPC from a small write).
    None for anything else: a crash, whose traceback is the point."""
    from pipeline.contracts.inputs import ValidationError
    from pipeline.fsutil import RETRY_HINT, DiskFullError, is_disk_full

    if isinstance(err, ValidationError) and isinstance(err, expected):
        text = "; ".join(err.problems)
    elif isinstance(err, (*expected, DiskFullError)):
        text = str(err)
    elif isinstance(err, OSError) and is_disk_full(err):
        text = f"disk full: {err}; {RETRY_HINT}"
    else:
        return None
    return f"{type(err).__name__}: {text}"


def run_step(args: argparse.Namespace, run, expected_error: type[Exception] | tuple[type[Exception], ...], *extra,
             extra_overrides: dict | None = None) -> int:
    """Run a step for the CLI: its result to stdout (and --result-json), a refusal as one line
    and exit 2."""
    config, paths = load_run(args, extra_overrides)
    try:
        result = run_mirrored(run, config, paths, *extra)
    except Exception as err:
        line = refusal(err, (expected_error,))
        if line is None:
            raise
        step = run.__module__.removeprefix("components.").split(".")[0]
        logging.getLogger(run.__module__).error("%s refused: %s", step, line)
        return 2
    emit_result(result, args)
    return 0

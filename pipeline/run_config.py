"""A run's one config: fixed once by resolve_run, used by every task of the run on any worker.

Why: each task used to resolve the config again from its own worker's params file and RECO__*
environment, so on Celery (or pods) preprocess and train of one run could run with different
settings. resolve_run now fixes the effective config (params file + environment + the form's
overrides) in the RunSpec every task receives, with its digest; each step writes it into the
run folder (`config.json`) beside its outputs, and a worker whose own config disagrees says so
in its task log, naming the keys, and uses the run's.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.config import Config, ConfigError, from_dict, load_config

log = logging.getLogger(__name__)
FILE = "config.json"


def digest(config: Config) -> str:
    """sha256 of the config's canonical JSON: the same settings give the same digest anywhere."""
    text = json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def flat(config: Config) -> dict[str, Any]:
    """{"train.workers": 2, ...}: every key, dotted."""
    return {f"{section}.{key}": value for section, values in config.to_dict().items()
            for key, value in values.items()}


def adopt(tree: Mapping[str, Any], expected: str, overrides: Mapping[str, Any]) -> Config:
    """The run's config from its spec (checked against its digest), with the spec's own
    overrides re-applied (an approval renames the forced push's reason after resolve_run)."""
    config = from_dict(tree)
    if expected and digest(config) != expected:
        raise ConfigError(f"the run's config does not match its digest {expected}: the run spec was altered")
    _say_if_local_differs(config, overrides)
    return config.with_overrides(overrides)


def _say_if_local_differs(config: Config, overrides: Mapping[str, Any]) -> None:
    try:
        local = flat(load_config(overrides=overrides))
    except ConfigError as err:
        log.warning("this worker's own config does not load (%s); the run's config is used", err)
        return
    run = flat(config.with_overrides(overrides))
    differ = sorted(key for key in run if run[key] != local.get(key))
    if differ:
        shown = ", ".join(f"{k}={local.get(k)!r} (run: {run[k]!r})" for k in differ[:5])
        more = f" and {len(differ) - 5} more" if len(differ) > 5 else ""
        log.warning("this worker's params file/environment differ from the run's config on %d key(s): "
                    "%s%s; the run's config is used", len(differ), shown, more)


def write(run_dir: Path, config: Config, expected: str) -> Path:
    """The run's config and digest in its folder, for people and for a pod that reads files."""
    out = Path(run_dir) / FILE
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"digest": expected, "config": config.to_dict()}, indent=2, sort_keys=True))
    return out

"""Typed configuration, loaded once: YAML file, then environment, then explicit overrides.

Why three layers: the YAML file (`conf/params.yaml`) is the one params file a team reviews;
environment variables (`RECO__TRAIN__WORKERS=4`) let a deployment change a value without a
commit; explicit overrides are what an Airflow run's form passes. Every error names the
dotted key, the value and what was expected, so a typo in a 2 a.m. backfill is obvious.
"""
from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.config_checks import CHECKS, MOVED_KEYS, REMOVED_KEYS
from pipeline.config_sections import (  # noqa: F401 - re-exported: callers import sections from here
    PROJECT_ROOT,
    DataConfig,
    EvalConfig,
    ExecutionConfig,
    GeneratorConfig,
    ModelConfig,
    PreprocessConfig,
    PushConfig,
    ScheduleConfig,
    TrainConfig,
    ValidateConfig,
    WindowConfig,
)

DEFAULT_CONFIG_FILE = PROJECT_ROOT / "conf" / "params.yaml"
ENV_PREFIX = "RECO__"
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
URL_REFUSED = ("is a URL; artifacts are written with local file operations (atomic rename, fsync), "
               "so every root must be a local or mounted path (a PVC, gcsfuse, an S3 CSI mount); for an "
               "object store keep data.artifact_root local and set data.artifact_store to the URL "
               "(pipeline/storage.py, docs/scaling.md)")


class ConfigError(ValueError):
    """A configuration value is unknown, mistyped or out of range; the message names the key."""


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    window: WindowConfig = field(default_factory=WindowConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    validate: ValidateConfig = field(default_factory=ValidateConfig)
    preprocess: PreprocessConfig = field(default_factory=PreprocessConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    push: PushConfig = field(default_factory=PushConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-able dict (paths as strings) that `from_dict` reads back."""
        return _plain(dataclasses.asdict(self))

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        """A copy with dotted-key overrides applied and validated (e.g. {"train.workers": 4})."""
        tree = self.to_dict()
        _apply_dotted(tree, overrides, origin="override")
        return from_dict(tree)


def load_config(
    path: os.PathLike | str | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Load `path` (else $RECO_CONFIG, else conf/params.yaml), then RECO__* env, then overrides."""
    env = os.environ if env is None else env
    path = Path(path or env.get("RECO_CONFIG") or DEFAULT_CONFIG_FILE)
    tree = Config().to_dict()
    if path.exists():
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of sections, got {type(loaded).__name__}")
        _merge(tree, loaded, prefix="", origin=str(path))
    elif path != DEFAULT_CONFIG_FILE:
        raise ConfigError(f"config file {path} does not exist")
    env_overrides = {
        key[len(ENV_PREFIX):].lower().replace("__", "."): yaml.safe_load(value)
        for key, value in env.items()
        if key.startswith(ENV_PREFIX)
    }
    _apply_dotted(tree, env_overrides, origin="environment")
    _apply_dotted(tree, overrides or {}, origin="override")
    return from_dict(tree)


def from_dict(tree: Mapping[str, Any]) -> Config:
    """Build and validate a Config from a nested dict (as written by `to_dict`)."""
    sections = {}
    for f in dataclasses.fields(Config):
        sections[f.name] = _build_section(f.name, f.default_factory, tree.get(f.name, {}))
    unknown = set(tree) - set(sections)
    if unknown:
        raise ConfigError(f"unknown config section(s) {sorted(unknown)}; expected one of {sorted(sections)}")
    return Config(**sections)


def _build_section(name: str, cls: type, values: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        dotted = f"{name}.{key}"
        if key not in hints:
            raise _unknown_key(dotted, f"; {name} has {sorted(hints)}")
        kwargs[key] = _coerce(dotted, value, hints[key])
        check = CHECKS.get(dotted)
        if check and not check[0](kwargs[key]):
            raise ConfigError(f"{dotted}: got {value!r}, expected {check[1]}")
    return cls(**kwargs)


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """Check `value` against a field's type hint; ints widen to float, lists become tuples."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):  # Optional[X], X | None
        if value is None:
            return None
        return _coerce(key, value, next(a for a in args if a is not type(None)))
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: got {value!r}, expected a list")
        return tuple(_coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
    if hint is Path:
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"{key}: got {value!r}, expected a path string")
        if isinstance(value, str) and URL.match(value):     # Path() would fold gs:// into gs:/
            raise ConfigError(f"{key}: {value!r} {URL_REFUSED}")
        p = Path(value).expanduser()
        return p if p.is_absolute() else PROJECT_ROOT / p
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float) and isinstance(value, bool) or not isinstance(value, hint):
        raise ConfigError(f"{key}: got {value!r} ({type(value).__name__}), expected {hint.__name__}")
    return value


def _merge(tree: dict, loaded: Mapping[str, Any], prefix: str, origin: str) -> None:
    for key, value in loaded.items():
        dotted = f"{prefix}{key}"
        if key not in tree:
            raise _unknown_key(dotted, origin=origin)
        if isinstance(tree[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: {dotted} must be a mapping, got {value!r}")
            _merge(tree[key], value, f"{dotted}.", origin)
        else:
            tree[key] = value


def _apply_dotted(tree: dict, overrides: Mapping[str, Any], origin: str) -> None:
    for dotted, value in overrides.items():
        section, _, key = dotted.partition(".")
        if section not in tree or not key or key not in tree[section]:
            raise _unknown_key(dotted, origin=origin)
        tree[section][key] = value


def _unknown_key(dotted: str, detail: str = "", origin: str = "") -> ConfigError:
    """A key the config does not have; a key that moved names its new place."""
    where = f"{origin}: " if origin else ""
    if dotted in MOVED_KEYS:
        return ConfigError(f"{where}config key {dotted!r} moved: it is now {MOVED_KEYS[dotted]!r}")
    if dotted in REMOVED_KEYS:
        return ConfigError(f"{where}config key {dotted!r} was removed ({REMOVED_KEYS[dotted]}): delete it")
    return ConfigError(f"{where}unknown config key {dotted!r}{detail}")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value

"""The TF Serving directory layout, read without TensorFlow: versions, records, history.

    <serving_base>/models.config                    model_config_list text proto
    <serving_base>/<model>/<version>/               complete SavedModels only (what TF Serving loads)
        model_card.json                            how it was trained (written at export)
        assets.extra/export_facts.json             what the export needs of a model server (written at export)
        assets.extra/push_record.json              who pushed it, from which run and data date
        assets.extra/tf_serving_warmup_requests    PredictionLog records replayed on load
        assets.extra/verification_requests.json    REST body whose answers are in the push record
    <serving_base>/.<model>.push-*                  staging temps (hidden, never a version)
    <serving_base>/<model>.history/                 push-NNNNNN.json / rollback-NNNNNN.json records,
                                                    canary-NNNNNN.json while a version waits for `stable`
    <serving_base>/<model>.lock                     serialises pushes and rollbacks

TF Serving's file-system source only loads children of the model dir whose names parse as
integers, and with the default `latest` policy it serves the highest one. models.config can say
otherwise: a `specific` policy without a `stable` label is a pin set by hand (on-call, in an
incident), and then the pinned version serves, whatever is published above it; push keeps such a
pin. The evaluation gate, the push and retention all ask `served_version`, so "baseline" always
means "what users get now". With version labels (components/push/labels.py) a new version is a
canary until `stable` moves to it; while its canary record exists, users of `stable` get the older
version, so the served version is the highest one that is not a canary.

A models.config that does not parse is refused (ServingDirError) before anything is published:
what TF Serving serves is then unknown, and a push would rewrite an operator's file it does not
understand.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import fsutil
from pipeline.config import ConfigError

log = logging.getLogger(__name__)

PUSH_RECORD = "push_record.json"
MODEL_CARD = "model_card.json"   # the export's model card (train writes it, a plan reads the served one's)
EXPORT_FACTS = "export_facts.json"
WARMUP_FILE = "tf_serving_warmup_requests"
VERIFY_REQUESTS = "verification_requests.json"
ASSETS_EXTRA = "assets.extra"
MODELS_CONFIG = "models.config"
PUSH_ADDED = (PUSH_RECORD, WARMUP_FILE, VERIFY_REQUESTS)    # written by push into a version, not by export
# TF Serving answers XLA-marked functions only with this flag (its flag help: otherwise "models
# utilizing this feature will return bad Status on first compilation request").
XLA_SERVING_FLAG = "--xla_cpu_compilation_enabled=true"
XLA_MARK = b"_XlaMustCompile"      # the function attribute `jit_compile=` sets in the graph
STABLE = "stable"                  # the label clients of a labelled deployment ask for
NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


class ServingDirError(ConfigError):
    """The serving directory cannot be used as it is: its models.config does not parse, or push may
    not write there (a read-only mount, an immutable or foreign-owned directory). A retry cannot
    change that, so it is a ConfigError: permanent (pipeline.orchestration.permanent_errors), the
    DAG fails the task at once; the push CLI says it on one line, exit 2."""


def is_not_writable(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in NOT_WRITABLE


@dataclass(frozen=True)
class VersionPolicy:
    """What models.config tells TF Serving about one model."""
    kind: str                       # "latest", "all" or "specific" (TF Serving's default: latest)
    versions: tuple[int, ...]       # the versions a `specific` policy loads
    labels: dict[str, int]

    @property
    def pinned(self) -> tuple[int, ...]:
        """Versions pinned by hand: a `specific` policy without a `stable` label (push's own
        labelled writes always carry one), else ()."""
        return self.versions if self.kind == "specific" and STABLE not in self.labels else ()


def parse_models_config(path: Path) -> Any | None:
    """`path` as TF Serving's ModelServerConfig (tensorflow-serving-api's proto, no TensorFlow);
    None when there is no file. A file that does not parse is a ServingDirError naming it."""
    if not path.exists():
        return None
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    try:
        return text_format.Parse(path.read_text(), model_server_config_pb2.ModelServerConfig())
    except (text_format.ParseError, UnicodeDecodeError) as err:
        detail = " ".join(str(err).split())
        raise ServingDirError(f"{path} is not a ModelServerConfig text proto ({detail}): which version TF "
                              "Serving serves is unknown, so neither the gate nor a push goes on; fix or "
                              "remove the file, then rerun") from err


def version_policy(serving_base: Path, model_name: str) -> VersionPolicy | None:
    """`model_name`'s policy in <serving_base>/models.config; None without the file or an entry
    for the model (push then writes `latest`). Raises ServingDirError if the file does not parse.
    Where tensorflow-serving-api is not installed (the DAG side's lean venv, which only reports the
    served version) the file cannot be read: None, with a warning."""
    try:
        config = parse_models_config(serving_base / MODELS_CONFIG)
    except ImportError as err:
        log.warning("cannot read %s without tensorflow-serving-api (%s): assuming the `latest` policy",
                    serving_base / MODELS_CONFIG, err)
        return None
    entry = next((c for c in config.model_config_list.config if c.name == model_name), None) \
        if config is not None else None
    if entry is None:
        return None
    policy = entry.model_version_policy
    kind = policy.WhichOneof("policy_choice") or "latest"
    versions = tuple(sorted(policy.specific.versions)) if kind == "specific" else ()
    return VersionPolicy(kind, versions, dict(entry.version_labels))


def list_versions(model_base: Path) -> list[int]:
    """Integer version directories, ascending; hidden temps and stray files are ignored."""
    if not model_base.is_dir():
        return []
    return sorted(int(p.name) for p in model_base.iterdir()
                  if p.is_dir() and p.name.isdigit() and not p.name.startswith("."))


def served_version(model_base: Path) -> int | None:
    """The version users get: with a pin in models.config the highest pinned version on disk (None
    if none is), else the highest integer (TF Serving's `latest` policy) that is not a canary
    still waiting for the `stable` label. Raises ServingDirError if models.config does not parse."""
    policy = version_policy(model_base.parent, model_base.name)
    if policy is not None and policy.pinned:
        present = set(list_versions(model_base))
        return max((v for v in policy.pinned if v in present), default=None)
    canaries = canary_versions(model_base)
    versions = [v for v in list_versions(model_base) if v not in canaries]
    return versions[-1] if versions else None


def canary_path(model_base: Path, version: int) -> Path:
    return history_dir(model_base.parent, model_base.name) / f"canary-{version:06d}.json"


def canary_versions(model_base: Path) -> set[int]:
    """Versions published under the `canary` label whose `stable` move has not happened yet."""
    folder = history_dir(model_base.parent, model_base.name)
    return {int(p.stem.split("-")[1]) for p in folder.glob("canary-*.json")} if folder.is_dir() else set()


def version_dir(model_base: Path, version: int) -> Path:
    return model_base / str(version)


def write_export_facts(export_dir: Path, tf_serving_flags: list[str]) -> None:
    """Written by the training export beside its SavedModel: what a model server must provide to
    serve it, so push (which has no model code) records it without inspecting graphs."""
    fsutil.write_json_atomic(Path(export_dir) / ASSETS_EXTRA / EXPORT_FACTS, {"tf_serving_flags": tf_serving_flags})


def export_facts(export_dir: Path) -> dict[str, Any]:
    """The export's facts. An export written before the train step recorded them (a retry after
    an upgrade, a model exported by hand) gets the conservative answer: the XLA flag whenever the
    graph mentions the XLA mark at all (an explicit `jit_compile=False` too), since enabling XLA
    on a server costs nothing for a model that never asks for it."""
    path = Path(export_dir) / ASSETS_EXTRA / EXPORT_FACTS
    if path.exists():
        return json.loads(path.read_text())
    graph = Path(export_dir) / "saved_model.pb"
    flags = [XLA_SERVING_FLAG] if graph.exists() and XLA_MARK in graph.read_bytes() else []
    log.warning("%s has no %s (not written by this version's train step): assuming server flags %s",
                export_dir, EXPORT_FACTS, flags or "none")
    return {"tf_serving_flags": flags}


def read_push_record(vdir: Path) -> dict[str, Any] | None:
    """The record written inside a pushed version, or None for a version pushed by hand."""
    path = vdir / ASSETS_EXTRA / PUSH_RECORD
    if not path.exists():
        return None
    return json.loads(path.read_text())


def history_dir(serving_base: Path, model_name: str) -> Path:
    return serving_base / f"{model_name}.history"


def lock_path(serving_base: Path, model_name: str) -> Path:
    return serving_base / f"{model_name}.lock"


def history_path(serving_base: Path, model_name: str, kind: str, version: int) -> Path:
    return history_dir(serving_base, model_name) / f"{kind}-{version:06d}.json"


def write_history(serving_base: Path, model_name: str, kind: str, version: int,
                  record: dict[str, Any]) -> Path:
    path = history_path(serving_base, model_name, kind, version)
    fsutil.write_json_atomic(path, record)
    return path


class RolledBackError(RuntimeError):
    """A push of a model that a rollback took away: no retry changes that (force overrides)."""


def rolled_back_digests(serving_base: Path, model_name: str) -> dict[str, dict[str, Any]]:
    """digest -> the rollback record that took that model away, for every model a rollback took
    away and no later rollback restored. Records older than `rolled_back_digest` name the
    version only: its push record gives the digest."""
    pushes = read_history(serving_base, model_name, "push")
    taken: dict[str, dict[str, Any]] = {}
    for record in read_history(serving_base, model_name, "rollback").values():
        if record.get("unpublished"):
            continue
        away = record.get("rolled_back_digest") or pushes.get(record.get("rolled_back_from"), {}).get("model_digest")
        taken.pop(record.get("model_digest"), None)        # restoring a model gives it back
        if away:
            taken[away] = record
    return taken


def published_records(serving_base: Path, model_name: str) -> dict[int, dict[str, Any]]:
    """version -> push or rollback history record, for every version push or rollback published
    and verified (withdrawn ones left out)."""
    records = {**read_history(serving_base, model_name, "push"), **read_history(serving_base, model_name, "rollback")}
    return {v: r for v, r in sorted(records.items()) if not r.get("unpublished")}


def lost_versions(serving_base: Path, model_name: str) -> list[int]:
    """Versions the history records as published that are no longer on disk (retention removes
    old ones; with nothing served, a lost or replaced serving volume)."""
    present = set(list_versions(serving_base / model_name))
    return [v for v in published_records(serving_base, model_name) if v not in present]


def newest_data_date(serving_base: Path, model_name: str) -> str | None:
    """The newest data date any push or rollback record knows of (history and the versions on
    disk), None if none does: what a version without a push record counts as newer than."""
    model_base = serving_base / model_name
    on_disk = [read_push_record(version_dir(model_base, v)) for v in list_versions(model_base)]
    dates = [r.get("data_date") for r in [*published_records(serving_base, model_name).values(), *on_disk] if r]
    return max((d for d in dates if d), default=None)


def read_history(serving_base: Path, model_name: str, kind: str) -> dict[int, dict[str, Any]]:
    """version -> record for every `kind` ("push" / "rollback") record, oldest first."""
    folder = history_dir(serving_base, model_name)
    out = {}
    if folder.is_dir():
        for path in sorted(folder.glob(f"{kind}-*.json")):
            out[int(path.stem.split("-")[1])] = json.loads(path.read_text())
    return out


def next_version(serving_base: Path, model_name: str) -> int:
    """One above every version ever published, so a number is never reused for other bytes.

    A version that was unpublished (failed verification) or deleted by retention keeps its
    number burned: TF Serving and its caches never see two different models as "7".
    """
    seen = list_versions(serving_base / model_name)
    for kind in ("push", "rollback"):
        seen.extend(read_history(serving_base, model_name, kind))
    return max(seen, default=0) + 1


def unpublish(vdir: Path) -> None:
    """Remove a version atomically: rename it to a hidden name first, then delete.

    TF Serving sees the version vanish at once instead of watching files disappear from
    a directory it may be loading.
    """
    if not vdir.exists():
        return
    hidden = fsutil.temp_sibling(vdir, "removed")
    os.rename(vdir, hidden)
    fsutil.fsync_dir(vdir.parent)
    shutil.rmtree(hidden, ignore_errors=True)


def stale_temps(serving_base: Path, model_name: str) -> list[Path]:
    """Hidden leftovers of killed pushes and rollbacks: staging copies beside the model dir and
    inside it, models.config temps, and record temps and write probes in the history dir."""
    found = [*serving_base.glob(f".{model_name}.*"), *serving_base.glob(f".{MODELS_CONFIG}.*")] \
        if serving_base.is_dir() else []
    for folder in (serving_base / model_name, history_dir(serving_base, model_name)):
        if folder.is_dir():
            found.extend(p for p in folder.iterdir() if p.name.startswith("."))
    return found


def model_digest(vdir: Path) -> str:
    """The digest recorded when a version was pushed (no re-hashing), else computed from its files."""
    record = read_push_record(vdir) or {}
    return record.get("model_digest") or tree_digest(vdir)


def same_model(model_base: Path, a: int, b: int) -> bool:
    """Whether versions `a` and `b` both exist and hold the same model (a rollback's copy holds
    its source's, under another number)."""
    da, db = version_dir(model_base, a), version_dir(model_base, b)
    return da.is_dir() and db.is_dir() and model_digest(da) == model_digest(db)


def tree_digest(root: Path) -> str:
    """sha256 over a SavedModel's files (relative path + bytes), ignoring what push adds to a
    version (the export's own assets.extra files, its facts among them, are digested).

    The gate records the digest of the model it judged; push refuses to publish other bytes
    under that verdict (a retrained model would otherwise ride on yesterday's BLESSED), and
    checks that the staged copy has the same digest before it becomes visible.
    """
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if rel.parts[0] == ASSETS_EXTRA and rel.name in PUSH_ADDED:
            continue
        digest.update(str(rel).encode() + b"\0")
        digest.update(fsutil.sha256_file(path).encode())
    return digest.hexdigest()

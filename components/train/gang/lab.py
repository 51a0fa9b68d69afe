"""Training options only benchmarks and tests use, kept out of the production config.

A team reads docs/config.md (and the run form) to decide what to set for the nightly job;
switches that only make a measurement cleaner (no serving export for a throughput run, one
core per worker for the gang benchmark, a model part switched off for an ablation) do not
belong there. They come from the environment variable RECO_TRAIN_LAB, a JSON object, so they
reach the worker processes the gang starts (which inherit the environment) without passing
through the config file.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

ENV = "RECO_TRAIN_LAB"


@dataclass(frozen=True)
class LabOptions:
    export: bool = True          # false: train + evaluate only, no SavedModel (throughput benchmarks)
    pin_cpus: bool = False       # pin worker i to its own cores (the gang benchmark)
    interactions: bool = True    # false: the din scorer gets vectors, not their products (an ablation)
    platt: bool = True           # false: the last layer's Platt scale stays the identity (an ablation)

    def env(self) -> dict[str, str]:
        """The environment entry that sets these options in a child process."""
        return {ENV: json.dumps(dataclasses.asdict(self))}


def lab_options(environ: dict[str, str] | None = None) -> LabOptions:
    """The options RECO_TRAIN_LAB sets (defaults when unset); a typo fails rather than being ignored."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not raw:
        return LabOptions()
    try:
        given = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{ENV} is not JSON ({e}): {raw!r}") from None
    known = {f.name for f in dataclasses.fields(LabOptions)}
    if not isinstance(given, dict) or set(given) - known:
        raise ValueError(f"{ENV} must be a JSON object with keys from {sorted(known)}: {raw!r}")
    if any(not isinstance(v, bool) for v in given.values()):
        raise ValueError(f"{ENV} values are true or false: {raw!r}")
    return LabOptions(**given)

"""Post-publish verification in a fresh process: load the version, answer a REST body, compare.

Why a separate process: the pushing process already holds TensorFlow state (the eval-time
graph, op registrations, caches); only a process that starts from nothing proves that the
directory TF Serving will read is self-contained and loads on its own. The child speaks the
REST row format (`{"instances": [...]}`) and answers `{"predictions": [...]}` per body, as the
model server would; push sends one body per client signature (raw features, and by id).

Child:  python -m components.push.verify --model-dir V --request bodies.json --output out.json
Parent: `verify_version(...)` runs the child and compares with the evaluation's predictions.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config import PROJECT_ROOT
from pipeline.contracts import signature

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Verification:
    ok: bool
    max_abs_diff: float | None
    predictions: list[float]
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "max_abs_diff": self.max_abs_diff, "predictions": self.predictions,
                "detail": self.detail}


def verify_version(vdir: Path, bodies: list[dict[str, Any]] | dict[str, Any],
                   expected: dict[str, list[float]] | list[float], tolerance: float, timeout_s: float) -> Verification:
    """Run the child on `vdir` with every REST body (one per client signature; a single body from
    a version pushed before there were two); ok when each signature's |served - expected| <=
    tolerance. `expected`: per signature name, what evaluate's process got from the same export
    (a plain list, from older versions, holds for every body)."""
    bodies = [bodies] if isinstance(bodies, dict) else list(bodies)
    # Hidden, inside the model dir: if push is killed here, the next push's clean_stale removes it.
    with tempfile.TemporaryDirectory(prefix=".verify-", dir=vdir.parent) as tmp:
        request, output = Path(tmp) / "request.json", Path(tmp) / "response.json"
        request.write_text(json.dumps(bodies))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        cmd = [sys.executable, "-m", "components.push.verify", "--model-dir", str(vdir),
               "--request", str(request), "--output", str(output)]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s,
                                  preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        except subprocess.TimeoutExpired:
            return Verification(False, None, [], f"verification process timed out after {timeout_s}s")
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            return Verification(False, None, [], f"verification process failed ({proc.returncode}): {tail}")
        responses = json.loads(output.read_text())
    return _compare(bodies, responses, expected, tolerance)


def _die_with_parent() -> None:
    """In the child, before exec: the kernel SIGKILLs it when push dies (SIGKILL included), so a
    killed push never leaves a verifier running (Linux prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _compare(bodies: list[dict[str, Any]], responses: list[dict[str, Any]],
             expected: dict[str, list[float]] | list[float], tolerance: float) -> Verification:
    diffs, predictions, count = {}, [], 0
    for body, response in zip(bodies, responses, strict=True):
        name = body.get("signature_name", signature.SERVING_DEFAULT)
        want = expected[name] if isinstance(expected, dict) else expected
        got = [_probability(p) for p in response["predictions"]]
        if len(got) != len(want):
            return Verification(False, None, got, f"{name}: {len(got)} predictions for {len(want)} requests")
        diffs[name] = max(abs(a - b) for a, b in zip(got, want, strict=True))
        predictions, count = predictions or got, len(want)
    diff = max(diffs.values())
    ok = diff <= tolerance
    each = ", ".join(f"{name} {d:.3g}" for name, d in diffs.items())
    detail = f"max |served - evaluated| = {diff:.3g} over {count} examples ({each}; " \
             f"{'within' if ok else 'exceeds'} tolerance {tolerance:g})"
    return Verification(ok, diff, predictions, detail)


def _probability(prediction: Any) -> float:
    """A row of a REST response: {"probability": [p]}, [p] or p."""
    if isinstance(prediction, dict):
        prediction = prediction[signature.OUTPUT]
    while isinstance(prediction, list):
        prediction = prediction[0]
    return float(prediction)


def predict_rest(model_dir: Path, body: dict[str, Any]) -> dict[str, Any]:
    """Answer a REST row-format body with the SavedModel, as TF Serving would."""
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(str(model_dir))
    fn = loaded.signatures[body.get("signature_name", signature.SERVING_DEFAULT)]
    specs = fn.structured_input_signature[1]
    instances = body["instances"]
    inputs = {name: tf.constant(np.asarray([inst[name] for inst in instances]), dtype=spec.dtype)
              for name, spec in specs.items()}
    outputs = {k: v.numpy() for k, v in fn(**inputs).items()}
    if len(outputs) == 1:
        (values,) = outputs.values()
        return {"predictions": values.tolist()}
    return {"predictions": [{k: v[i].tolist() for k, v in outputs.items()} for i in range(len(instances))]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Load a SavedModel in a fresh process and answer a "
                                     "TF Serving REST predict body.")
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument("--request", required=True, type=Path)
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args(argv)
    bodies = json.loads(args.request.read_text())
    bodies = [bodies] if isinstance(bodies, dict) else bodies
    args.output.write_text(json.dumps([predict_rest(args.model_dir, body) for body in bodies]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

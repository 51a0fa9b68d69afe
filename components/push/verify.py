"""Post-publish verification in a fresh process: load the version, answer a REST body, compare.

Why a separate process: the pushing process already holds TensorFlow state (the eval-time
graph, op registrations, caches); only a process that starts from nothing proves that the
directory TF Serving will read is self-contained and loads on its own. The child speaks the
REST row format (`{"instances": [...]}`) and answers `{"predictions": [...]}` per body, as the
model server would; push sends one body per client signature (raw features, and by id).
It also loads the version the way TF Serving itself does (session_load.py: every op against the
op registry, a Session load of the `serve` MetaGraphDef, the warmup file's PredictLogs fed by the
SignatureDef's tensor names) and compares those answers with the TF2 load's.

Child:  python -m components.push.verify --model-dir V --request bodies.json --output out.json
        (out.json: {"responses": [one per body], "session": session_load.check's result})
Parent: `verify_version(...)` runs the child and compares with the evaluation's predictions; a
Session-path failure is the verification's one-line detail.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
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
    session: dict[str, Any] | None = None      # session_load.check: TF Serving's own load path

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "max_abs_diff": self.max_abs_diff, "predictions": self.predictions,
                "detail": self.detail, "session": self.session}


def verify_version(vdir: Path, bodies: list[dict[str, Any]] | dict[str, Any],
                   expected: dict[str, list[float]] | list[float], tolerance: float, timeout_s: float) -> Verification:
    """Run the child on `vdir` with every REST body (one per client signature; a single body from
    a version pushed before there were two); ok when each signature's |served - expected| <=
    tolerance and the version passes TF Serving's Session path (session_load.check: ops registered,
    the warmup requests answered as the TF2 load answers them). `expected`: per signature name,
    what evaluate's process got from the same export (a plain list, from older versions, holds for
    every body)."""
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
        reply = json.loads(output.read_text())
    session = reply["session"]
    if not session["ok"]:
        return Verification(False, None, [], f"TF Serving's Session path: {session['detail']}", session)
    check = _compare(bodies, reply["responses"], expected, tolerance)
    return Verification(check.ok, check.max_abs_diff, check.predictions,
                        f"{check.detail}; Session path: {session['detail']}", session)


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
        # A non-finite prediction is an infinite difference (max() would skip a NaN after the first row).
        diffs[name] = max(_abs_diff(a, b) for a, b in zip(got, want, strict=True))
        predictions, count = predictions or got, len(want)
    diff = max(diffs.values())
    ok = diff <= tolerance
    each = ", ".join(f"{name} {d:.3g}" for name, d in diffs.items())
    detail = f"max |served - evaluated| = {diff:.3g} over {count} examples ({each}; " \
             f"{'within' if ok else 'exceeds'} tolerance {tolerance:g})"
    return Verification(ok, diff, predictions, detail)


def _abs_diff(a: float, b: float) -> float:
    diff = abs(a - b)
    return diff if math.isfinite(diff) else math.inf


def _probability(prediction: Any) -> float:
    """A row of a REST response: {"probability": [p]}, [p] or p."""
    if isinstance(prediction, dict):
        prediction = prediction[signature.OUTPUT]
    while isinstance(prediction, list):
        prediction = prediction[0]
    return float(prediction)


def predict_rest(loaded: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Answer a REST row-format body with the loaded SavedModel (`tf.saved_model.load`), as TF
    Serving would."""
    import numpy as np
    import tensorflow as tf

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
    args.output.write_text(json.dumps(answer(args.model_dir, bodies)))
    return 0


def answer(model_dir: Path, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """The child's work: the op check first (an op the registry lacks fails the TF2 load too, on
    many lines), then one TF2 load for the REST bodies and the Session check's comparison."""
    import tensorflow as tf

    from components.push import session_load

    try:
        meta_graph = session_load.serving_meta_graph(model_dir)
    except LookupError:
        meta_graph = None                       # session_load.check says so, on one line
    if meta_graph is None or session_load.unregistered_ops(meta_graph):
        return {"responses": None, "session": session_load.check(model_dir)}
    loaded = tf.saved_model.load(str(model_dir))
    return {"responses": [predict_rest(loaded, body) for body in bodies],
            "session": session_load.check(model_dir, loaded)}


if __name__ == "__main__":
    sys.exit(main())

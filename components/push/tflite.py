"""Optional TF Lite artifacts for edge devices: convert, then size and batch-1 latency vs the SavedModel.

Two conversions, each recorded with its error verbatim (docs/serving.md has the findings):
1. The exported raw-feature signature, with TF Lite builtin ops, then with Select TF ops
   (Flex: the device runtime must link TensorFlow kernels). Its tf.Transform part (string
   split, vocabulary hash tables) has no builtin kernels, and the LSTMs were traced with a
   dynamic batch, so their TensorList loop state has no static shape: builtins fail.
2. The export's `core_batch1` signature: the model on a transformed request (the shown item's
   title ids and image, the history's ids and item-table rows, ...) traced with batch 1 at
   export time, whose static shapes let the converter lower the LSTM loops to builtins; the
   history items' vectors are the export's item vectors, a constant of the flatbuffer. On a
   device the app then tokenises and looks up ids and rows itself. Push needs only the export
   for this, never the model code. Its agreement is measured against the same signature run by
   TensorFlow.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from components.push import serving_files
from pipeline import fsutil
from pipeline.contracts import features as F
from pipeline.contracts import signature

log = logging.getLogger(__name__)

SIGNATURE, OUTPUT, CORE = signature.SERVING_DEFAULT, signature.OUTPUT, signature.CORE_BATCH1


def convert_raw(saved_model_dir: Path) -> tuple[bytes | None, str | None, dict[str, str]]:
    """(flatbuffer, mode, errors by mode); flatbuffer is None when no mode converts."""
    import tensorflow as tf

    errors: dict[str, str] = {}
    modes = (("builtins", [tf.lite.OpsSet.TFLITE_BUILTINS]),
             ("select_tf_ops", [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]))
    for mode, ops in modes:
        converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir), signature_keys=[SIGNATURE])
        converter.target_spec.supported_ops = ops
        try:
            return converter.convert(), mode, errors
        except Exception as err:  # noqa: BLE001 - ConverterError & co. have no stable public base class
            errors[mode] = f"{type(err).__name__}: {err}"[:4000]
            log.warning("TF Lite conversion with %s failed: %s", mode, errors[mode][:300])
    return None, None, errors


def batch1_inputs(example: dict[str, Any], saved_model_dir: Path) -> dict[str, np.ndarray]:
    """One request of `example` with exactly the inputs the model's raw signature takes."""
    return serving_files.request_arrays([example], serving_files.signature_inputs(saved_model_dir))


def latency_ms(call: Callable[[], Any], runs: int = 300, warmup: int = 20) -> dict[str, float]:
    """p50/p99/mean wall time of `call` in milliseconds after `warmup` calls."""
    for _ in range(warmup):
        call()
    times = np.empty(runs)
    for i in range(runs):
        start = time.perf_counter()
        call()
        times[i] = (time.perf_counter() - start) * 1000
    return summary_ms(times)


def summary_ms(times_ms) -> dict[str, float]:
    times = np.asarray(times_ms, dtype=float)
    return {"p50_ms": float(np.percentile(times, 50)), "p99_ms": float(np.percentile(times, 99)),
            "mean_ms": float(times.mean()), "runs": len(times)}


def savedmodel_latency(saved_model_dir: Path, inputs: dict[str, np.ndarray], runs: int = 300) -> dict:
    import tensorflow as tf

    fn = tf.saved_model.load(str(saved_model_dir)).signatures[SIGNATURE]
    tensors = {k: tf.constant(v) for k, v in inputs.items()}
    return latency_ms(lambda: fn(**tensors), runs)


def tflite_runner(flatbuffer: bytes, name: str = SIGNATURE) -> Callable[..., dict[str, np.ndarray]]:
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    return interpreter.get_signature_runner(name)


def convert_and_measure(saved_model_dir: Path, out_path: Path, examples: list[dict[str, Any]],
                        runs: int = 300, time_savedmodel: bool = True) -> dict[str, Any]:
    """Write `out_path` (the core .tflite) when it converts; return sizes, latencies and errors.

    `time_savedmodel=False` skips timing the raw SavedModel, for a caller that measures it itself.
    """
    report: dict[str, Any] = {"saved_model_mib": dir_mib(saved_model_dir), "converted": False}
    inputs = batch1_inputs(examples[0], saved_model_dir)
    if time_savedmodel:
        report["saved_model"] = savedmodel_latency(saved_model_dir, inputs, runs)
    report["raw_signature"] = _raw_signature(saved_model_dir, out_path.with_name("raw_signature.tflite"),
                                             inputs, examples, runs)
    report["core"] = _core(saved_model_dir, out_path, runs)
    report["converted"] = bool(report["core"].get("tflite_mib"))
    fsutil.write_json_atomic(out_path.with_suffix(".json"), report)
    return report


def _raw_signature(saved_model_dir: Path, out_path: Path, inputs, examples, runs: int) -> dict[str, Any]:
    flatbuffer, mode, errors = convert_raw(saved_model_dir)
    out: dict[str, Any] = {"errors": errors, "converted": flatbuffer is not None}
    if flatbuffer is None:
        return out
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(flatbuffer)
    out.update(mode=mode, path=str(out_path), tflite_mib=len(flatbuffer) / 2**20)
    try:
        runner = tflite_runner(flatbuffer)
        out["tflite"] = latency_ms(lambda: runner(**inputs), runs)
        out["max_abs_diff_vs_savedmodel"] = _agreement(saved_model_dir, runner, examples)
    except (RuntimeError, ValueError) as err:
        out["runtime_error"] = f"{type(err).__name__}: {err}"[:2000]
        log.warning("raw-signature TF Lite model converted (%s) but does not run here: %s", mode, err)
    return out


def _core(saved_model_dir: Path, out_path: Path, runs: int) -> dict[str, Any]:
    """Convert the export's batch-1 core with builtins only; latency vs serving_transformed."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model_dir))
    if CORE not in loaded.signatures:
        return {"errors": {"export": f"{saved_model_dir} has no {CORE!r} signature (exported by an older "
                                     "train step): nothing to convert"}}
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir), signature_keys=[CORE])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        flatbuffer = converter.convert()
    except Exception as err:  # noqa: BLE001 - ConverterError & co. have no stable public base class
        return {"errors": {"builtins": f"{type(err).__name__}: {err}"[:4000]}}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(flatbuffer)
    x = _core_request(loaded)
    runner = tflite_runner(flatbuffer, CORE)
    reference = loaded.signatures[CORE]          # the same function, run by TensorFlow
    tensors = {k: tf.constant(v) for k, v in x.items()}
    diff = float(np.abs(np.ravel(runner(**x)[OUTPUT]) - np.ravel(reference(**tensors)[OUTPUT])).max())
    return {"mode": "builtins", "path": str(out_path), "tflite_mib": len(flatbuffer) / 2**20,
            "tflite": latency_ms(lambda: runner(**x), runs),
            "savedmodel_core": latency_ms(lambda: reference(**tensors), runs),
            "max_abs_diff_vs_savedmodel": diff}


def _core_request(loaded) -> dict[str, np.ndarray]:
    """One batch-1 request of the core's inputs: ids half-filled within the export's own tables,
    a random image, id 1 of each context."""
    rng = np.random.default_rng(0)
    rows = {v.name.split("/")[0]: int(v.shape[0]) for v in loaded.model_variables if v.name.endswith("embeddings:0")}
    vocab = {F.TITLE_IDS: rows["title_embedding"], F.HISTORY_IDS: rows["item_embedding"],
             F.HISTORY_ROWS: int(loaded.item_vectors.shape[0])}
    x = {}
    for name, spec in loaded.signatures[CORE].structured_input_signature[1].items():
        if name == F.IMAGE_Z:
            x[name] = rng.normal(size=spec.shape).astype(np.float32)
        elif name in vocab:
            x[name] = _ids(rng, int(spec.shape[1]), vocab[name])
        else:
            x[name] = np.ones(spec.shape, spec.dtype.as_numpy_dtype)
    return x


def _ids(rng, length: int, vocab: int) -> np.ndarray:
    """A right-padded id row (0 = padding) of a typical fill: half the slots used."""
    row = np.zeros((1, length), dtype=np.int64)
    row[0, : length // 2] = rng.integers(1, vocab, size=length // 2)
    return row


def _agreement(saved_model_dir: Path, runner, examples: list[dict[str, Any]]) -> float:
    import tensorflow as tf

    fn = tf.saved_model.load(str(saved_model_dir)).signatures[SIGNATURE]
    diffs = []
    for example in examples:
        inputs = batch1_inputs(example, saved_model_dir)
        ref = np.asarray(fn(**{k: tf.constant(v) for k, v in inputs.items()})[OUTPUT]).ravel()
        got = np.asarray(runner(**inputs)[OUTPUT]).ravel()
        diffs.append(float(np.abs(ref - got).max()))
    return max(diffs)


def dir_mib(root: Path) -> float:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file()) / 2**20

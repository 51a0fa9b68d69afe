"""TF Serving's own files: models.config, warmup PredictionLogs, REST request bodies.

All three are built from the protos of `tensorflow-serving-api` (or its documented JSON
format), so what the tests parse back is exactly what the model server reads.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pipeline import fsutil
from pipeline.contracts import features as F
from pipeline.contracts import serving, signature
from pipeline.contracts.signature import request_arrays

SIGNATURE = signature.SERVING_DEFAULT
# What clients call, so what push warms up and verifies: the raw-feature signature and, in
# exports that have it, scoring by id from the exported item table.
CLIENT_SIGNATURES = (signature.SERVING_DEFAULT, signature.SERVING_BY_ID)


def signature_inputs(model_dir: Path, name: str = SIGNATURE) -> tuple[str, ...]:
    """The raw features a SavedModel's signature `name` takes (read from saved_model.pb): a model
    exported before a feature was added takes fewer, and TF Serving rejects unknown inputs."""
    return client_signatures(model_dir)[name]


def client_signatures(model_dir: Path) -> dict[str, tuple[str, ...]]:
    """Each of CLIENT_SIGNATURES the export has -> the raw features it takes (older exports have
    no by-id signature)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel.FromString((Path(model_dir) / "saved_model.pb").read_bytes())
    defs = proto.meta_graphs[0].signature_def
    return {name: tuple(f for f in F.RAW_SERVING_FEATURES if f in defs[name].inputs)
            for name in CLIENT_SIGNATURES if name in defs}


def rest_body(examples: list[dict[str, Any]], inputs: tuple[str, ...] = F.RAW_SERVING_FEATURES,
              signature_name: str = SIGNATURE) -> dict[str, Any]:
    """A TF Serving REST predict body in row ("instances") format for eval-sample examples."""
    arrays = request_arrays(examples, inputs)
    return {
        "signature_name": signature_name,
        "instances": [{name: _plain(values[i]) for name, values in arrays.items()} for i in range(len(examples))],
    }


def _plain(value: Any) -> Any:
    """A numpy row or scalar as JSON-able Python (object arrays already hold str)."""
    return value.tolist() if hasattr(value, "tolist") else value


def warmup_records(examples: list[dict[str, Any]], model_name: str, batch_sizes: tuple[int, ...] = (1,),
                   inputs: tuple[str, ...] = F.RAW_SERVING_FEATURES, signature_name: str = SIGNATURE) -> list[bytes]:
    """PredictionLogs for TF Serving to replay at load: one batch-1 request per example (the
    latency-critical shape), then one request per larger size in `batch_sizes`, its rows cycled
    from the examples. Each distinct batch shape is one XLA compile of the export, paid here
    at load instead of by the first client that sends it (match TF Serving's allowed_batch_sizes).
    """
    if not examples:
        return []
    batches = [[e] for e in examples] if 1 in batch_sizes else []
    batches += [[examples[i % len(examples)] for i in range(size)] for size in sorted(set(batch_sizes)) if size > 1]
    return [_prediction_log(rows, model_name, inputs, signature_name) for rows in batches]


def _prediction_log(rows: list[dict[str, Any]], model_name: str, inputs: tuple[str, ...],
                    signature_name: str) -> bytes:
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for name, values in request_arrays(rows, inputs).items():
        dtype = tf.as_dtype(F.RAW_SERVING_DTYPES[name])
        request.inputs[name].CopyFrom(tf.make_tensor_proto(values.tolist() if dtype == tf.string else values,
                                                           dtype=dtype))
    log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
    return log.SerializeToString()


def write_warmup(path: Path, records: list[bytes]) -> None:
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


def warmup_bytes(records: list[bytes]) -> bytes:
    """The warmup file's bytes, framed by TensorFlow's own writer in a local temp: push then
    writes them onto the serving volume like any other file, inside the size check and the
    cleanup of a failed copy (TF's writer would fail there with ResourceExhaustedError)."""
    with tempfile.TemporaryDirectory(prefix="warmup-") as tmp:
        path = Path(tmp) / "warmup"
        write_warmup(path, records)
        return path.read_bytes()


def read_warmup(path: Path) -> list[Any]:
    """The PredictionLog protos of a warmup file (for tests and for operators' sanity checks)."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    logs = []
    for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        logs.append(prediction_log_pb2.PredictionLog.FromString(raw))
    return logs


def models_config_text(path: Path, model_name: str, base_path: Path, labels: dict[str, int] | None = None,
                       also_serve: tuple[int, ...] = ()) -> str:
    """models.config with `model_name` -> `base_path`, other models kept: the latest version, or
    with `labels` the labels and exactly the labelled versions plus `also_serve` (labels.py says
    why two writes).

    An existing file that does not parse is an operator's file we do not understand:
    raising (ServingDirError) beats silently replacing the config of other models on the same
    server. A pin by hand is not this function's business: publish.finish does not call it then.
    """
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = serving.parse_models_config(path) or model_server_config_pb2.ModelServerConfig()
    entries = config.model_config_list.config
    entry = next((c for c in entries if c.name == model_name), None) or entries.add()
    entry.name = model_name
    entry.base_path = str(base_path)
    entry.model_platform = "tensorflow"
    entry.model_version_policy.Clear()
    entry.ClearField("version_labels")
    if labels:
        entry.model_version_policy.specific.versions.extend(sorted({*labels.values(), *also_serve}))
        entry.version_labels.update(labels)
    else:
        entry.model_version_policy.latest.num_versions = 1
    return text_format.MessageToString(config)


def version_labels(serving_base: Path, model_name: str) -> dict[str, int]:
    """The labels models.config gives `model_name` now ({} without a file or labels)."""
    policy = serving.version_policy(serving_base, model_name)
    return dict(policy.labels) if policy else {}


def write_models_config(serving_base: Path, model_name: str, labels: dict[str, int] | None = None,
                        also_serve: tuple[int, ...] = ()) -> Path:
    """Atomically write <serving_base>/models.config (temp file, fsync, rename)."""
    path = serving_base / serving.MODELS_CONFIG
    text = models_config_text(path, model_name, (serving_base / model_name).resolve(), labels, also_serve)
    fsutil.write_text_atomic(path, text)
    return path

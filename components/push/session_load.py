"""Load a version the way TF Serving does and replay its warmup file through that load.

TF Serving does not call a SavedModel's TF2 functions: its SavedModelBundle imports the
MetaGraphDef tagged `serve` into a Session (every op, in the graph and in its function
library, must be in the server's op registry), runs the restore and init ops, and answers a
PredictRequest by feeding the request's TensorProtos to the tensors its SignatureDef names and
fetching the SignatureDef's output tensors. The push's other checks go through
`tf.saved_model.load`, which reads the object graph and the functions instead, so a SignatureDef
that names other tensors, or an op only the pushing process had registered, would pass them and
still fail (or answer differently) in the server. Here, in the fresh verification process:

1. `unregistered_ops`: every op type of the serving MetaGraphDef against TensorFlow's op
   registry (core TF, what a TF Serving build of the same release links), before loading;
2. `replay`: `tf.compat.v1.saved_model.loader.load(sess, ["serve"], dir)` in its own Graph +
   Session, then every PredictLog of assets.extra/tf_serving_warmup_requests as TF Serving
   runs it (the request's inputs must be exactly the signature's, with its dtypes), beside the
   same request through the TF2 signature; outputs must agree within SESSION_TOLERANCE.

Each failure is one line naming the op, the request, the signature and the output.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline.contracts import serving, signature

SERVE_TAGS = ("serve",)
SESSION_TOLERANCE = 1e-6     # the same graph and weights on the same CPU: measured 0 on the real export


def serving_meta_graph(vdir: Path) -> Any:
    """The MetaGraphDef TF Serving loads: tags exactly {"serve"} (its default --saved_model_tags)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel.FromString((Path(vdir) / "saved_model.pb").read_bytes())
    for meta_graph in proto.meta_graphs:
        if set(meta_graph.meta_info_def.tags) == set(SERVE_TAGS):
            return meta_graph
    found = [sorted(m.meta_info_def.tags) for m in proto.meta_graphs]
    raise LookupError(f"no MetaGraphDef tagged {list(SERVE_TAGS)} in {vdir} (tag sets: {found})")


def op_types(meta_graph: Any) -> dict[str, str]:
    """Op type -> where it is first used ("node N" or "function F"), over the graph and every
    function of its library; a call of a library function by name is not an op."""
    graph = meta_graph.graph_def
    functions = {f.signature.name for f in graph.library.function}
    where: dict[str, str] = {}
    for node in graph.node:
        where.setdefault(node.op, f"node {node.name}")
    for function in graph.library.function:
        for node in function.node_def:
            where.setdefault(node.op, f"function {function.signature.name}")
    return {op: place for op, place in where.items() if op not in functions}


def unregistered_ops(meta_graph: Any) -> list[str]:
    """"Op (where)" for each op type TensorFlow's op registry does not know, sorted."""
    from tensorflow.python.framework import op_def_registry

    return [f"{op} ({place})" for op, place in sorted(op_types(meta_graph).items())
            if op_def_registry.get(op) is None]


def read_logs(vdir: Path) -> list[Any]:
    """The warmup file's PredictionLogs ([] without the file)."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = Path(vdir) / serving.ASSETS_EXTRA / serving.WARMUP_FILE
    if not path.exists():
        return []
    return [prediction_log_pb2.PredictionLog.FromString(raw)
            for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]


def check(vdir: Path, loaded: Any | None = None, tolerance: float = SESSION_TOLERANCE) -> dict[str, Any]:
    """The whole check: ok, a one-line detail, and what was measured. `loaded`: the TF2 load of
    `vdir` the caller already holds (loaded here when None)."""
    start = time.monotonic()
    result: dict[str, Any] = {"ok": False, "ops": None, "replayed": 0, "max_abs_diff": None}
    try:
        meta_graph = serving_meta_graph(vdir)
    except LookupError as err:
        return {**result, "detail": str(err), "seconds": round(time.monotonic() - start, 3)}
    result["ops"] = len(op_types(meta_graph))
    missing = unregistered_ops(meta_graph)
    if missing:
        import tensorflow as tf

        detail = (f"op(s) not in TensorFlow {tf.__version__}'s op registry, so TF Serving of that release "
                  f"cannot load the graph: {', '.join(missing)}")
        return {**result, "unregistered_ops": missing, "detail": detail,
                "seconds": round(time.monotonic() - start, 3)}
    try:
        try:
            logs = read_logs(vdir)
        except Exception as err:        # noqa: BLE001 - TF Serving would fail the load on it too
            raise _Mismatch(f"{serving.WARMUP_FILE} does not read as PredictionLog records: {_first_line(err)}") \
                from err
        diff, replayed, skipped = _replay(vdir, logs, loaded, tolerance)
    except _Mismatch as err:
        return {**result, "detail": str(err), "seconds": round(time.monotonic() - start, 3)}
    note = f" ({skipped} non-predict logs not replayed)" if skipped else ""
    detail = (f"loaded as TF Serving does (Session, tags {list(SERVE_TAGS)}, {result['ops']} ops registered), "
              f"{replayed} warmup requests replayed{note}, max |session - TF2| = {diff:.3g}")
    if not logs:
        detail += f"; no {serving.WARMUP_FILE} to replay"
    return {**result, "ok": True, "replayed": replayed, "max_abs_diff": diff, "detail": detail,
            "seconds": round(time.monotonic() - start, 3)}


class _Mismatch(Exception):
    """One line: what the session path did differently."""


def _replay(vdir: Path, logs: list[Any], loaded: Any | None, tolerance: float) -> tuple[float, int, int]:
    import tensorflow as tf
    from tensorflow.python.util import deprecation

    loaded = loaded if loaded is not None else tf.saved_model.load(str(vdir))
    graph = tf.Graph()
    sess = tf.compat.v1.Session(graph=graph)
    try:
        try:
            with graph.as_default(), deprecation.silence():
                meta_graph = tf.compat.v1.saved_model.loader.load(sess, list(SERVE_TAGS), str(vdir))
        except Exception as err:        # noqa: BLE001 - any load error is the finding, on one line
            raise _Mismatch(f"the Session load (TF Serving's SavedModelBundle path) fails: {_first_line(err)}") \
                from err
        worst, replayed, skipped = 0.0, 0, 0
        for index, log in enumerate(logs):      # eager here: the TF2 calls must not land in `graph`
            if log.WhichOneof("log_type") != "predict_log":
                skipped += 1
                continue
            request = log.predict_log.request
            name = request.model_spec.signature_name or signature.SERVING_DEFAULT
            where = f"warmup request {index} ({name})"
            if name not in meta_graph.signature_def or name not in loaded.signatures:
                raise _Mismatch(f"{where}: the {'graph' if name not in meta_graph.signature_def else 'TF2 load'} "
                                f"has no signature {name!r}")
            sig = meta_graph.signature_def[name]
            inputs = _inputs(request, sig, where)
            outputs = sorted(sig.outputs)
            try:
                got = sess.run([sig.outputs[k].name for k in outputs],
                               feed_dict={sig.inputs[k].name: v for k, v in inputs.items()})
            except Exception as err:    # noqa: BLE001
                raise _Mismatch(f"{where}: Session.run fails: {_first_line(err)}") from err
            want = loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
            if set(want) != set(outputs):
                raise _Mismatch(f"{where}: outputs {outputs} in the SignatureDef, {sorted(want)} in TF2")
            for key, value in zip(outputs, got, strict=True):
                worst = max(worst, _diff(where, key, value, want[key].numpy(), tolerance))
            replayed += 1
    finally:
        sess.close()
    return worst, replayed, skipped


def _inputs(request: Any, sig: Any, where: str) -> dict[str, Any]:
    """The request's tensors, refused as TF Serving refuses them: other input names than the
    signature's, or another dtype than the signature's (a Python feed would cast silently)."""
    import tensorflow as tf

    if set(request.inputs) != set(sig.inputs):
        raise _Mismatch(f"{where}: inputs {sorted(request.inputs)} are not the signature's {sorted(sig.inputs)}")
    for key, proto in request.inputs.items():
        if proto.dtype != sig.inputs[key].dtype:
            raise _Mismatch(f"{where}: input {key} is {tf.as_dtype(proto.dtype).name}, the signature takes "
                            f"{tf.as_dtype(sig.inputs[key].dtype).name}")
    return {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}


def _diff(where: str, key: str, session: Any, tf2: Any, tolerance: float) -> float:
    import numpy as np

    if session.shape != tf2.shape:
        raise _Mismatch(f"{where}: output {key} has shape {session.shape} in the Session, {tf2.shape} in TF2")
    if session.dtype.kind in "fc":
        diff = float(np.max(np.abs(session - tf2))) if session.size else 0.0
    else:
        diff = 0.0 if np.array_equal(session, tf2) else float("inf")
    if not diff <= tolerance:           # NaN fails too
        raise _Mismatch(f"{where}: output {key} differs between the Session (TF Serving's path) and TF2: "
                        f"max |diff| = {diff:.3g} > {tolerance:g}")
    return diff


def _first_line(err: BaseException) -> str:
    text = " ".join(str(err).split("\n", 1)[0].split()) or type(err).__name__
    return text[:300]

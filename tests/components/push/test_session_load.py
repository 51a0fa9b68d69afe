"""Push verifies a version the way TF Serving loads it: a Session over the `serve` MetaGraphDef,
every op in the op registry, the warmup PredictLogs fed by the SignatureDef's tensor names
(components/push/session_load.py).

The faults are real edits of a SavedModel that the TF2 load (what evaluate and the REST check
use) does not see and TF Serving would: a SignatureDef whose output tensor is not what the TF2
function returns, and a graph node whose op no TensorFlow registers.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from components.evaluate import run as evaluate
from components.push import PushError, run, session_load
from pipeline.contracts import serving
from tests.components.evaluate.fixtures import MALFORMED_DAY


def _edit_graph(model_dir: Path, edit) -> None:
    """Rewrite the `serve` MetaGraphDef of the SavedModel in `model_dir` in place."""
    from tensorflow.core.protobuf import saved_model_pb2

    path = model_dir / "saved_model.pb"
    proto = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    (meta_graph,) = [m for m in proto.meta_graphs if list(m.meta_info_def.tags) == ["serve"]]
    edit(meta_graph)
    path.write_bytes(proto.SerializeToString())


def _shift_serving_output(meta_graph) -> None:
    """serving_default's SignatureDef now names `probability + 0.001`: TF Serving would answer that,
    the TF2 signature function still answers the probability."""
    import tensorflow as tf

    sig = meta_graph.signature_def["serving_default"]
    shift = meta_graph.graph_def.node.add(name="reco_fault/shift", op="Const")
    shift.attr["dtype"].type = tf.float32.as_datatype_enum
    shift.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.float32(1e-3)))
    add = meta_graph.graph_def.node.add(name="reco_fault/add", op="AddV2",
                                        input=[sig.outputs["probability"].name, "reco_fault/shift"])
    add.attr["T"].type = tf.float32.as_datatype_enum
    sig.outputs["probability"].name = "reco_fault/add:0"


def _add_unregistered_op(meta_graph) -> None:
    meta_graph.graph_def.node.add(name="reco_fault/unknown", op="RecoNoSuchOp")


def _push(runs, edit=None):
    config, paths = runs.make(MALFORMED_DAY)
    if edit is not None:
        _edit_graph(paths.model_dir, edit)       # before the gate: the verdict covers these bytes
    assert evaluate(config, paths).blessed       # the TF2 load scores it as before
    return config, paths


def _history(config) -> dict:
    return serving.read_history(config.data.serving_base, config.push.model_name, "push")


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_push_is_verified_through_tf_serving_s_session_path(runs):
    config, paths = _push(runs)
    result = run(config, paths)
    assert result.pushed and result.version == 1
    check = _history(config)[1]["verification"]
    session = check["session"]
    assert check["ok"] and session["ok"] and session["replayed"] == config.push.warmup_requests
    assert session["max_abs_diff"] <= session_load.SESSION_TOLERANCE and session["ops"] > 10
    assert "Session path" in check["detail"] and "warmup requests replayed" in result.reason


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_a_signature_def_that_is_not_the_tf2_function_fails_the_push(runs):
    """The REST check (TF2 load) matches evaluate exactly; only TF Serving's path sees the shift."""
    config, paths = _push(runs, _shift_serving_output)
    with pytest.raises(PushError) as raised:
        run(config, paths)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("verification of version 1 failed, unpublished it")
    assert "warmup request 0 (serving_default): output probability differs between the Session" in message
    assert "max |diff| = 0.001 > 1e-06" in message
    assert serving.list_versions(paths.model_base) == []
    record = _history(config)[1]
    assert record["unpublished"] and not record["verification"]["session"]["ok"]


@pytest.mark.integration      # pushes: a verification process loads TensorFlow (tests/tiers.py)
def test_an_op_missing_from_the_registry_fails_the_push_by_name(runs):
    """A node the TF2 load never imports (it reads functions, not the graph's nodes), but TF
    Serving's Session import must resolve."""
    config, paths = _push(runs, _add_unregistered_op)
    with pytest.raises(PushError) as raised:
        run(config, paths)
    message = str(raised.value)
    assert "\n" not in message
    assert "op registry" in message
    assert message.endswith("cannot load the graph: RecoNoSuchOp (node reco_fault/unknown)")
    assert serving.list_versions(paths.model_base) == []
    assert _history(config)[1]["verification"]["session"]["unregistered_ops"] == [
        "RecoNoSuchOp (node reco_fault/unknown)"]


def test_the_op_check_reads_every_function_of_the_library(standins):
    meta_graph = session_load.serving_meta_graph(standins["good"])
    ops = session_load.op_types(meta_graph)
    functions = {f.signature.name for f in meta_graph.graph_def.library.function}
    assert functions and not set(ops) & functions           # calling a function by name is no op
    assert "StatefulPartitionedCall" in ops and session_load.unregistered_ops(meta_graph) == []
    inner = meta_graph.graph_def.library.function[0]
    inner.node_def.add(name="fault", op="RecoNoSuchOp")
    assert session_load.unregistered_ops(meta_graph) == [f"RecoNoSuchOp (function {inner.signature.name})"]


def test_a_warmup_request_tf_serving_would_refuse_fails_the_check(standins, tmp_path):
    """TF Serving refuses a request whose dtype is not the signature's (a Python feed would cast
    it) or whose inputs are not the signature's; so does the check, naming the request."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    from components.push.serving_files import write_warmup

    vdir = tmp_path / "1"
    shutil.copytree(standins["bad"], vdir)
    inputs = {"title": tf.make_tensor_proto(["a b"], dtype=tf.string),
              "image_embedding": tf.make_tensor_proto(np.zeros((1, 2048), np.float32)),
              "history_item_ids": tf.make_tensor_proto(np.array([[3, 4]], np.int64))}

    def check(**changed):
        request = predict_pb2.PredictRequest()
        request.model_spec.signature_name = "serving_default"
        for name, proto in {**inputs, **changed}.items():
            if proto is not None:
                request.inputs[name].CopyFrom(proto)
        log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
        write_warmup(vdir / serving.ASSETS_EXTRA / serving.WARMUP_FILE, [log.SerializeToString()])
        return session_load.check(vdir)

    good = check()
    assert good["ok"] and good["replayed"] == 1 and good["max_abs_diff"] == 0.0, good
    wrong_dtype = check(history_item_ids=tf.make_tensor_proto(np.array([[3, 4]], np.int32)))
    assert not wrong_dtype["ok"]
    assert wrong_dtype["detail"] == ("warmup request 0 (serving_default): input history_item_ids is int32, "
                                     "the signature takes int64")
    missing = check(title=None)
    assert not missing["ok"] and "are not the signature's" in missing["detail"]


def test_an_xla_compiled_export_passes_the_session_path(tmp_path):
    """The reference architecture's export is XLA-marked (`jit_compile=True`): the Session runs
    its functions as the TF2 load does, at each warmed-up batch shape."""
    import tensorflow as tf

    from components.push.serving_files import warmup_records, write_warmup

    inputs = ("title", "image_embedding", "history_item_ids")

    class Compiled(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.linspace(-1, 1, 2048).astype(np.float32))

        @tf.function(jit_compile=True)
        def core(self, image):
            return tf.sigmoid(tf.reduce_sum(image * self.w, axis=1, keepdims=True))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=inputs[0]),
                                      tf.TensorSpec([None, 2048], tf.float32, name=inputs[1]),
                                      tf.TensorSpec([None, None], tf.int64, name=inputs[2])])
        def serve(self, title, image_embedding, history_item_ids):
            return {"probability": self.core(image_embedding)}

    vdir = tmp_path / "1"
    module = Compiled()
    tf.saved_model.save(module, str(vdir), signatures={"serving_default": module.serve.get_concrete_function()})
    assert serving.XLA_MARK in (vdir / "saved_model.pb").read_bytes()
    rng = np.random.default_rng(0)
    examples = [{"title": f"t {i}", "image_embedding": rng.random(2048).tolist(), "history_item_ids": [i + 1]}
                for i in range(2)]
    write_warmup(vdir / serving.ASSETS_EXTRA / serving.WARMUP_FILE,
                 warmup_records(examples, "recommender", (1, 8), inputs))
    check = session_load.check(vdir)
    assert check["ok"] and check["replayed"] == 3, check

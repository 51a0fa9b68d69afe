"""Export a SavedModel that takes RAW features and runs the tf.Transform graph inside.

This module builds and writes the serving module; scoring.py holds the model's ways of scoring
(also used by the chief's evaluation during training), saved_model_facts.py reads a written
SavedModel back (size, XLA marks, the flags a model server needs).

Serving the raw contract (title string, 2048 floats, list of history item ids) with the
*same* transform graph that produced the training data is what rules out training/serving
skew: there is no second implementation of tokenising, z-scoring or id lookup to drift.

The model's item tower (model/tower.py) is run once here over every row of the run's item table;
the export keeps those item vectors (a non-trainable variable), so history items, and shown
items requested by id, cost a gather, not a tower pass.

Signatures:
  serving_default   title string [B], image_embedding float32 [B, 2048], history_item_ids
                    int64 [B, L] (0 = padding, either side), item_id, user_id, platform,
                    hour_of_day -> {"probability": float32 [B, 1]}; the shown item's content is
                    the request's own (an item newer than the model scores fine).
  serving_by_id     item_id, history_item_ids, user_id, platform, hour_of_day: the shown
                    item's content from the exported item table, how candidates are scored. An
                    item id the table does not hold fails the request (InvalidArgumentError
                    naming the ids); its client sends it through serving_default instead.
  serving_examples  examples: serialized raw tf.Example [B] -> {"probability": [B, 1]}
                    (TF Serving warmup records and clients that send tf.Example)
  regress           inputs: serialized raw tf.Example [B] -> {"outputs": [B, 1]}, method name
                    patched to tensorflow/serving/regress for TF Serving's Regress API.
  serving_transformed  the model on transformed examples (ids and item table rows): the skew
                    check, and scoring preprocess output (evaluation during training).
  core_batch1       the model on a request's transformed features at batch 1 (the shown item's
                    title ids and image, the history's ids and rows), never XLA-compiled:
                    static shapes let TF Lite lower the reference model's LSTM loops to
                    builtins (push/tflite.py converts it from the export alone).

Beside the SavedModel, `assets.extra/export_facts.json` (pipeline/contracts/serving.py) says
what a model server needs to serve it (the XLA flag), so push never inspects graphs.
"""
from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from components.train.worker.saved_model_facts import read_saved_model_proto, tf_serving_flags
from components.train.worker.scoring import OUTPUT, Scoring, core_batch1_fn, history_to_sparse, transformed_fn
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts import serving
from pipeline.contracts import signature as S

SERVING_DEFAULT, SERVING_EXAMPLES, REGRESS = S.SERVING_DEFAULT, S.SERVING_EXAMPLES, S.REGRESS
SERVING_TRANSFORMED, REGRESS_METHOD = S.SERVING_TRANSFORMED, S.REGRESS_METHOD
CORE_BATCH1, SERVING_BY_ID = S.CORE_BATCH1, S.SERVING_BY_ID
RAW_EXAMPLE_SPEC = {
    F.TITLE: tf.io.FixedLenFeature([], tf.string),
    F.IMAGE: tf.io.FixedLenFeature([F.IMAGE_DIM], tf.float32),
    F.HISTORY: tf.io.VarLenFeature(tf.int64),
    F.ITEM_ID: tf.io.FixedLenFeature([], tf.int64, default_value=0),
    F.USER_ID: tf.io.FixedLenFeature([], tf.int64, default_value=0),
    F.PLATFORM: tf.io.FixedLenFeature([], tf.string, default_value=""),
    F.HOUR: tf.io.FixedLenFeature([], tf.int64, default_value=-1),
}
_RAW_SHAPES = {F.TITLE: [None], F.IMAGE: [None, F.IMAGE_DIM], F.HISTORY: [None, None]}


def raw_input_signature(names: tuple[str, ...] = F.RAW_SERVING_FEATURES) -> list[tf.TensorSpec]:
    """One named TensorSpec per raw serving feature in `names`, in the contract's order."""
    return [tf.TensorSpec(_RAW_SHAPES.get(name, [None]), tf.as_dtype(F.RAW_SERVING_DTYPES[name]), name=name)
            for name in names]


def serving_module(model, item_table: Path, transform_dir: Path, model_cfg: ModelConfig) -> tf.Module:
    """A tf.Module with the model's variables, the item vectors, the transform graph and the
    serving signatures.

    Saving a tf.Module that holds only the variables (not the Keras model) skips Keras'
    own SavedModel serialization, which re-traces every layer (both LSTM backends, with
    gradients) and made the export several times slower (docs/benchmarks.md).
    """
    import tensorflow_transform as tft

    module = tf.Module()
    scoring = Scoring(model, IT.dense(IT.read(item_table)), model_cfg)
    module.model_variables, module.item_vectors = scoring.model_variables, scoring.vectors
    module.tft_layer = tft.TFTransformOutput(str(transform_dir)).transform_features_layer()

    def predict_raw(raw: dict):
        """Raw features (history as a SparseTensor) -> probabilities, through the transform."""
        return scoring.by_content(module.tft_layer(raw))

    @tf.function(input_signature=raw_input_signature())
    def serve_raw(*tensors):
        raw = dict(zip(F.RAW_SERVING_FEATURES, tensors))
        raw[F.HISTORY] = history_to_sparse(raw[F.HISTORY])
        return {OUTPUT: predict_raw(raw)}

    @tf.function(input_signature=raw_input_signature(F.BY_ID_SERVING_FEATURES))
    def serve_by_id(*tensors):
        raw = dict(zip(F.BY_ID_SERVING_FEATURES, tensors))
        raw[F.HISTORY] = history_to_sparse(raw[F.HISTORY])
        features = module.tft_layer(raw)
        with tf.control_dependencies([scoring.check_in_table(raw[F.ITEM_ID], features[F.TARGET_ROW])]):
            return {OUTPUT: tf.identity(scoring.by_rows(features))}

    def parse_and_predict(serialized):
        parsed = tf.io.parse_example(serialized, RAW_EXAMPLE_SPEC)
        parsed[F.HISTORY] = history_to_sparse(tf.sparse.to_dense(parsed[F.HISTORY]))
        return predict_raw(parsed)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(examples):
        return {OUTPUT: parse_and_predict(examples)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress(inputs):
        return {"outputs": parse_and_predict(inputs)}

    module.signatures_ = {SERVING_DEFAULT: serve_raw, SERVING_BY_ID: serve_by_id, SERVING_EXAMPLES: serve_examples,
                          REGRESS: regress, SERVING_TRANSFORMED: transformed_fn(scoring, model_cfg),
                          CORE_BATCH1: core_batch1_fn(scoring, model_cfg)}
    return module


def save_module(module: tf.Module, export_dir: Path) -> Path:
    """Write the serving module as a SavedModel to `export_dir` (which must not exist yet)."""
    signatures = {name: fn.get_concrete_function() for name, fn in module.signatures_.items()}
    tf.saved_model.save(module, str(export_dir), signatures=signatures)
    _patch_method_name(export_dir, REGRESS, REGRESS_METHOD)
    serving.write_export_facts(export_dir, tf_serving_flags(export_dir))
    return export_dir


def export_saved_model(model, item_table: Path, transform_dir: Path, export_dir: Path,
                       model_cfg: ModelConfig) -> Path:
    return save_module(serving_module(model, item_table, transform_dir, model_cfg), export_dir)


def _patch_method_name(export_dir: Path, signature: str, method: str) -> None:
    """TF2 saves every signature as 'predict'; TF Serving's Regress API insists on its own name."""
    proto = read_saved_model_proto(export_dir)
    for meta_graph in proto.meta_graphs:
        if signature in meta_graph.signature_def:
            meta_graph.signature_def[signature].method_name = method
    (Path(export_dir) / "saved_model.pb").write_bytes(proto.SerializeToString())


def raw_example(row: dict) -> bytes:
    """One serialized raw tf.Example of a row holding the raw serving features (warmup, tests)."""
    def feature(name):
        value = row[name]
        if F.RAW_SERVING_DTYPES[name] == "string":
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(value).encode()]))
        if name == F.IMAGE:
            return tf.train.Feature(float_list=tf.train.FloatList(value=list(value)))
        ints = [int(v) for v in value if int(v) != 0] if name == F.HISTORY else [int(value)]
        return tf.train.Feature(int64_list=tf.train.Int64List(value=ints))

    features = {name: feature(name) for name in F.RAW_SERVING_FEATURES}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()

"""Export a SavedModel that takes RAW features and runs the tf.Transform graph inside.

Serving the raw contract (title string, 2048 floats, list of history item ids) with the
*same* transform graph that produced the training data is what rules out training/serving
skew: there is no second implementation of tokenising, z-scoring or id lookup to drift.

Signatures:
  serving_default   title string [B], image_embedding float32 [B, 2048], history_item_ids
                    int64 [B, L] (0 = padding, either side) -> {"probability": float32 [B, 1]}
  serving_examples  examples: serialized raw tf.Example [B] -> {"probability": [B, 1]}
                    (TF Serving warmup records and clients that send tf.Example)
  regress           inputs: serialized raw tf.Example [B] -> {"outputs": [B, 1]}, method name
                    patched to tensorflow/serving/regress for TF Serving's Regress API.
  serving_transformed  the bare model on transformed features (title_ids, image,
                    history_ids): for the skew check and for scoring tf.Transform output.
  core_batch1       the same at batch 1, never XLA-compiled: static shapes let TF Lite lower
                    the reference model's LSTM loops to builtins (push/tflite.py converts it
                    from the export alone, without the model code).

Beside the SavedModel, `assets.extra/export_facts.json` (pipeline/contracts/serving.py) says
what a model server needs to serve it (the XLA flag), so push never inspects graphs.
"""
from __future__ import annotations

import logging
from pathlib import Path

import tensorflow as tf

from components.train.model.vocab import VocabSizes
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts import serving
from pipeline.contracts import signature as S

log = logging.getLogger(__name__)

SERVING_DEFAULT, SERVING_EXAMPLES, REGRESS = S.SERVING_DEFAULT, S.SERVING_EXAMPLES, S.REGRESS
SERVING_TRANSFORMED, REGRESS_METHOD, OUTPUT = S.SERVING_TRANSFORMED, S.REGRESS_METHOD, S.OUTPUT
CORE_BATCH1 = S.CORE_BATCH1
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


def raw_input_signature() -> list[tf.TensorSpec]:
    """One named TensorSpec per raw serving feature, in the contract's order."""
    return [tf.TensorSpec(_RAW_SHAPES.get(name, [None]), tf.as_dtype(F.RAW_SERVING_DTYPES[name]), name=name)
            for name in F.RAW_SERVING_FEATURES]


def model_input_signature(model_cfg: ModelConfig) -> list[tf.TensorSpec]:
    spec = F.transformed_feature_spec(model_cfg)
    return [tf.TensorSpec([None, *spec[name].shape], tf.as_dtype(spec[name].dtype), name=name)
            for name in F.model_input_names(model_cfg)]


def vocab_sizes(transform_dir: Path, model_cfg: ModelConfig) -> VocabSizes:
    """Actual sizes from the tf.Transform vocabularies when readable, else the config bounds.

    Real vocabularies are often far smaller than the configured top-k (a 1,000-item catalogue
    never fills 100,000 slots), and the embedding tables are most of the parameters: reading
    them keeps the model, its checkpoints and its all-reduce small.
    """
    fallback = VocabSizes.from_config(model_cfg)
    try:
        import tensorflow_transform as tft
        title_vocab, item_vocab = F.TITLE_VOCAB, F.ITEM_VOCAB
        output = tft.TFTransformOutput(str(transform_dir))
        sizes = VocabSizes(
            title=output.vocabulary_size_by_name(title_vocab) + model_cfg.oov_buckets + 1,
            items=output.vocabulary_size_by_name(item_vocab) + model_cfg.oov_buckets + 1,
            users=model_cfg.user_buckets + 1)
    except (ImportError, OSError, ValueError, KeyError, tf.errors.OpError) as err:
        log.warning("vocabulary sizes from config bounds %s: %s", fallback, err)
        return fallback
    log.info("vocabulary sizes from %s: %s", transform_dir, sizes)
    return sizes


def history_to_sparse(history: tf.Tensor) -> tf.SparseTensor:
    """Dense int64 [B, L] with 0 = padding -> the VarLen SparseTensor the transform expects.

    Zeros are dropped and the remaining ids packed to columns 0..k-1 in order, so left- or
    right-padded requests give the same ragged-right tensor a parsed VarLenFeature would.
    """
    history = tf.convert_to_tensor(history, tf.int64)
    keep = tf.not_equal(history, 0)
    ragged = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(history, keep), tf.reduce_sum(tf.cast(keep, tf.int64), axis=1))
    return ragged.to_sparse()


def transformed_fn(model, model_cfg: ModelConfig):
    """The bare model on transformed features as one traced tf.function (evaluation + export).

    XLA-compiled when `model_cfg.xla_export` (by default for the reference architecture only):
    at batch 1 its cost is not arithmetic but the executor stepping through two masked LSTM
    loops of 20 and 50 steps; XLA fuses each loop body, which brings its batch-1 raw-feature
    p50 well below the plain export's with unrolled LSTMs. The target-aware model has no loop,
    and XLA's per-call launch cost made its export slower, not faster (docs/serving.md,
    docs/benchmarks.md). The tf.Transform part (string split, hash tables) cannot be compiled
    and stays outside, in the callers. Costs of XLA: a compile of each new batch shape, slow
    enough that it must happen before traffic (TF Serving: at load through the warmup
    requests, or cap shapes with batching's allowed_batch_sizes), and TF Serving must run
    with `--xla_cpu_compilation_enabled=true`.
    """
    names = F.model_input_names(model_cfg)
    wanted = set(model.input_names)          # the reference model reads only three of them

    @tf.function(jit_compile=True if model_cfg.xla_export else None,
                 input_signature=model_input_signature(model_cfg))
    def serve_transformed(*tensors):
        features = {name: t for name, t in zip(names, tensors) if name in wanted}
        return {OUTPUT: model(features, training=False)}

    return serve_transformed


def core_batch1_fn(model, model_cfg: ModelConfig):
    """The bare model on the transformed features it reads, traced at batch 1 (see module doc)."""
    spec = F.transformed_feature_spec(model_cfg)
    names = [n for n in F.model_input_names(model_cfg) if n in set(model.input_names)]

    @tf.function(input_signature=[tf.TensorSpec([1, *spec[n].shape], tf.as_dtype(spec[n].dtype), name=n)
                                  for n in names])
    def core_batch1(*tensors):
        return {OUTPUT: model(dict(zip(names, tensors)), training=False)}

    return core_batch1


def call_transformed(serve_transformed, features: dict, model_cfg: ModelConfig):
    """The model part's probabilities for a dict of transformed features."""
    return serve_transformed(*[features[name] for name in F.model_input_names(model_cfg)])[OUTPUT]


def serving_module(model, serve_transformed, transform_dir: Path, model_cfg: ModelConfig) -> tf.Module:
    """A tf.Module with the model's variables, the transform graph and the serving signatures.

    Saving a tf.Module that holds only the variables (not the Keras model) skips Keras'
    own SavedModel serialization, which re-traces every layer (both LSTM backends, with
    gradients) and made the export several times slower (docs/benchmarks.md). The model is
    traced once, in `serve_transformed` (see transformed_fn), and the raw-feature signatures
    call it.
    """
    import tensorflow_transform as tft

    module = tf.Module()
    module.model_variables = list(model.variables)
    module.tft_layer = tft.TFTransformOutput(str(transform_dir)).transform_features_layer()

    def predict_raw(raw: dict):
        """Raw features (history as a SparseTensor) -> probabilities, through the transform."""
        return call_transformed(serve_transformed, module.tft_layer(raw), model_cfg)

    @tf.function(input_signature=raw_input_signature())
    def serve_raw(*tensors):
        raw = dict(zip(F.RAW_SERVING_FEATURES, tensors))
        raw[F.HISTORY] = history_to_sparse(raw[F.HISTORY])
        return {OUTPUT: predict_raw(raw)}

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

    module.signatures_ = {SERVING_DEFAULT: serve_raw, SERVING_EXAMPLES: serve_examples,
                          REGRESS: regress, SERVING_TRANSFORMED: serve_transformed,
                          CORE_BATCH1: core_batch1_fn(model, model_cfg)}
    return module


def save_module(module: tf.Module, export_dir: Path) -> Path:
    """Write the serving module as a SavedModel to `export_dir` (which must not exist yet)."""
    signatures = {name: fn.get_concrete_function() for name, fn in module.signatures_.items()}
    tf.saved_model.save(module, str(export_dir), signatures=signatures)
    _patch_method_name(export_dir, REGRESS, REGRESS_METHOD)
    serving.write_export_facts(export_dir, tf_serving_flags(export_dir))
    return export_dir


def export_saved_model(model, transform_dir: Path, export_dir: Path, model_cfg: ModelConfig) -> Path:
    module = serving_module(model, transformed_fn(model, model_cfg), transform_dir, model_cfg)
    return save_module(module, export_dir)


def _patch_method_name(export_dir: Path, signature: str, method: str) -> None:
    """TF2 saves every signature as 'predict'; TF Serving's Regress API insists on its own name."""
    proto = read_saved_model_proto(export_dir)
    for meta_graph in proto.meta_graphs:
        if signature in meta_graph.signature_def:
            meta_graph.signature_def[signature].method_name = method
    (Path(export_dir) / "saved_model.pb").write_bytes(proto.SerializeToString())


def read_saved_model_proto(export_dir: Path):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())
    return proto


def xla_compiled_functions(export_dir: Path) -> list[str]:
    """Names of the SavedModel's functions marked for XLA (`jit_compile=True`)."""
    return sorted({fn.signature.name for graph in read_saved_model_proto(export_dir).meta_graphs
                   for fn in graph.graph_def.library.function if fn.attr["_XlaMustCompile"].b})


def tf_serving_flags(export_dir: Path) -> list[str]:
    """The model-server flags this export needs (serving.XLA_SERVING_FLAG for XLA-marked functions)."""
    return [serving.XLA_SERVING_FLAG] if xla_compiled_functions(export_dir) else []


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

"""Export a SavedModel that takes RAW features and runs the tf.Transform graph inside.

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

import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from components.train.model.item_stats import item_stats
from components.train.model.tower import (
    CALIBRATION,
    EXAMPLE_IDS,
    HISTORY_CONTENT,
    SCORER,
    TARGET_CONTENT,
    TOWER,
    scorer_ids,
)
from components.train.model.vocab import VocabSizes
from pipeline.config import ModelConfig
from pipeline.contracts import features as F
from pipeline.contracts import item_table as IT
from pipeline.contracts import popularity, serving
from pipeline.contracts import signature as S

log = logging.getLogger(__name__)

SERVING_DEFAULT, SERVING_EXAMPLES, REGRESS = S.SERVING_DEFAULT, S.SERVING_EXAMPLES, S.REGRESS
SERVING_TRANSFORMED, REGRESS_METHOD, OUTPUT = S.SERVING_TRANSFORMED, S.REGRESS_METHOD, S.OUTPUT
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


ITEM_FEATURES = tuple(F.item_feature_spec(ModelConfig()))
CORE_INPUTS = (*ITEM_FEATURES, F.HISTORY_ROWS, F.TARGET_ROW, *EXAMPLE_IDS)   # a request, transformed


def _specs(model_cfg: ModelConfig, names, batch: int | None = None) -> list[tf.TensorSpec]:
    spec = {**F.transformed_feature_spec(model_cfg), **F.item_feature_spec(model_cfg)}
    return [tf.TensorSpec([batch, *spec[n].shape], tf.as_dtype(spec[n].dtype), name=n) for n in names]


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


class Scoring:
    """The trained model's parts and the item table's vectors: every way of scoring a request.

    `vectors[r]` is the item tower's output for item-table row r; rows beyond the table (and
    padding) read its last row, the tower's output for zero content, as in training. A plain
    object, not a tf.Module: the saved module tracks only variables, never the Keras layers.
    """

    def __init__(self, model, content: dict[str, np.ndarray], model_cfg: ModelConfig):
        self.tower, self.scorer = model.get_layer(TOWER), model.get_layer(SCORER)
        self.calibration = model.get_layer(CALIBRATION)
        self.ids = scorer_ids(self.scorer)
        self.model_variables = list(model.variables)
        self.vectors = tf.Variable(item_vectors(self.tower, content), trainable=False, name="item_vectors")
        self.in_table = tf.constant(content[IT.EMBEDDING_ID] > 0)      # rows the table holds
        self.last_row = IT.clip_row(len(content[IT.EMBEDDING_ID]))
        # The shown item's window statistics by row (model/item_stats.py): an item newer than
        # the table reads the last row, no impressions, i.e. the window's rate.
        self.stats = (tf.constant(item_stats(content[IT.SHOWN], content[IT.CLICKS], IT.window_rate(content)))
                      if F.TARGET_STATS in self.ids else None)
        # What the last layer blends with the model's logit (model/calibration.py), by row;
        # rows with no impressions (newer than the table too) read the window's rate.
        self.evidence = tf.constant(popularity.evidence(content[IT.SHOWN], content[IT.CLICKS]))
        jit = True if model_cfg.xla_export else None
        self.by_rows = tf.function(self._by_rows, jit_compile=jit)
        self.by_content = tf.function(self._by_content, jit_compile=jit)

    def _rows(self, rows):
        return tf.gather(self.vectors, tf.minimum(rows, self.last_row))

    def _score(self, target, history, features):
        target_rows = tf.minimum(features[F.TARGET_ROW], self.last_row)
        if self.stats is not None:
            features = {**features, F.TARGET_STATS: tf.gather(self.stats, target_rows)}
        p = self.scorer({TARGET_CONTENT: target, HISTORY_CONTENT: history,
                         **{k: features[k] for k in self.ids}}, training=False)
        return self.calibration(p, evidence=tf.gather(self.evidence, target_rows), training=False)

    def _by_rows(self, features):
        """Examples by reference: both the shown item and the history from the table."""
        return self._score(self._rows(features[F.TARGET_ROW]), self._rows(features[F.HISTORY_ROWS]), features)

    def _by_content(self, features):
        """A request carrying the shown item's content: the tower runs on it."""
        target = self.tower({k: features[k] for k in ITEM_FEATURES}, training=False)
        return self._score(target, self._rows(features[F.HISTORY_ROWS]), features)

    def check_in_table(self, item_ids, rows):
        """InvalidArgumentError naming the shown item ids the exported table does not hold."""
        known = tf.gather(self.in_table, tf.minimum(rows, self.last_row))
        return tf.debugging.Assert(tf.reduce_all(known), [
            f"{S.SERVING_BY_ID}: item ids not in the item table exported with this model (newer than the model? "
            f"score them through {S.SERVING_DEFAULT} with their title and image):",
            tf.boolean_mask(item_ids, tf.logical_not(known))], summarize=20)


def item_vectors(tower, content: dict[str, np.ndarray], batch: int = 4096) -> np.ndarray:
    """The tower's output for every row of the item table's content, [rows, width]."""
    out = [tower({F.TITLE_IDS: content[IT.TITLE_IDS][i:i + batch], F.IMAGE_Z: content[IT.IMAGE][i:i + batch]},
                 training=False).numpy() for i in range(0, len(content[IT.TITLE_IDS]), batch)]
    return np.concatenate(out).astype(np.float32)


def transformed_fn(scoring: Scoring, model_cfg: ModelConfig):
    """The model on transformed examples (evaluation, the skew check)."""
    names = F.example_input_names(model_cfg)

    @tf.function(input_signature=_specs(model_cfg, names))
    def serve_transformed(*tensors):
        return {OUTPUT: scoring.by_rows(dict(zip(names, tensors)))}

    return serve_transformed


def core_batch1_fn(scoring: Scoring, model_cfg: ModelConfig):
    """A transformed request at batch 1, un-compiled (see module doc)."""
    @tf.function(input_signature=_specs(model_cfg, CORE_INPUTS, batch=1))
    def core_batch1(*tensors):
        return {OUTPUT: scoring._by_content(dict(zip(CORE_INPUTS, tensors)))}

    return core_batch1


def call_transformed(serve_transformed, features: dict, model_cfg: ModelConfig):
    """The model's probabilities for a dict of transformed example features."""
    return serve_transformed(*[features[name] for name in F.example_input_names(model_cfg)])[OUTPUT]


def transformed_scoring(model, item_table: Path, model_cfg: ModelConfig):
    """The transformed-features function alone (what the chief evaluates through), for a run
    that exports nothing and may have no transform graph (benchmarks on synthetic shards)."""
    return transformed_fn(Scoring(model, IT.dense(IT.read(item_table)), model_cfg), model_cfg)


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


def export_size(export_dir: Path) -> dict[str, float]:
    """What the export weighs on disk (the model card reports it): all of it, and the variables."""
    def mib(paths) -> float:
        return round(sum(p.stat().st_size for p in paths if p.is_file()) / 2**20, 2)

    root = Path(export_dir)
    return {"total_mib": mib(root.rglob("*")), "variables_mib": mib((root / "variables").glob("*"))}


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

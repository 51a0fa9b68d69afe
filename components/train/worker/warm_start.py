"""Warm start (`train.warm_start: served`): begin from the served model's weights, not from noise.

A nightly model differs from yesterday's by one day of data, so starting from the served
weights lets a run train fewer epochs. The day's vocabularies change (new items, new title
words), so an embedding row must follow its id, not its index: row i of the new item table is
row j of the served one when both name the same item id; rows of new ids keep their fresh
initialisation, the padding row and the OOV buckets (hashed the same way every day) are copied.
Other weights are copied when name and shape agree (same architecture and sizes), else left.
"""
from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import numpy as np

from pipeline.contracts import features as F

log = logging.getLogger(__name__)

# Variable -> the tf.Transform vocabulary file that numbers its rows (row = index + 1); the user
# tables are hashed (fixed rows). The export's item vectors are not model variables: each run
# computes its own from its item table.
VOCAB_OF_TABLE = {"item_embedding/embeddings": F.ITEM_VOCAB, "item_bias/embeddings": F.ITEM_VOCAB,
                  "title_embedding/embeddings": F.TITLE_VOCAB, "linear_member/item": F.ITEM_VOCAB,
                  "linear_member/history": F.ITEM_VOCAB}


def read_vocabulary(path: Path) -> list[str]:
    """One token per line; split on newlines only (a title token may hold other line breaks)."""
    text = Path(path).read_text()
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n") if text else []


def remap_rows(old: np.ndarray, new: np.ndarray, old_vocab: list[str], new_vocab: list[str],
               oov_buckets: int) -> tuple[np.ndarray, int]:
    """`new` with the rows of `old` moved to where their ids are now; (matrix, rows copied)."""
    out = new.copy()
    old_index = {token: i for i, token in enumerate(old_vocab)}
    pairs = [(i + 1, old_index[t] + 1) for i, t in enumerate(new_vocab) if t in old_index]
    pairs.append((0, 0))                                                    # padding
    pairs += [(len(new_vocab) + 1 + b, len(old_vocab) + 1 + b) for b in range(oov_buckets)]
    dst, src = (np.array(x, dtype=np.int64) for x in zip(*pairs))
    keep = (src < len(old)) & (dst < len(out))
    out[dst[keep]] = old[src[keep]]
    return out, int(keep.sum())


def _table(name: str) -> str:
    """"item_embedding/embeddings:0" -> "item_embedding/embeddings"."""
    return name.split(":")[0]


def served_variables(served_dir: Path) -> dict[str, np.ndarray]:
    """name -> value of the served export's `model_variables`, read from its checkpoint under the
    names its object graph records: `tf.saved_model.load` would restore every signature's function
    first, only to read the values (docs/training.md, "Warm start"). The SavedModel's object graph
    and its checkpoint's number their nodes alike (the loader relies on it), so a node's
    checkpoint key is found by its id."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    from components.train.worker.saved_model_facts import read_saved_model_proto

    nodes = read_saved_model_proto(served_dir).meta_graphs[0].object_graph_def.nodes
    listed = next((c.node_id for c in nodes[0].children if c.local_name == "model_variables"), None)
    if listed is None:
        raise ValueError(f"{served_dir} lists no model_variables: not an export of this trainer")
    reader = tf.train.load_checkpoint(str(Path(served_dir) / "variables" / "variables"))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    key = {i: node.attributes[0].checkpoint_key for i, node in enumerate(graph.nodes) if node.attributes}
    return {f"{nodes[c.node_id].variable.name}:0": reader.get_tensor(key[c.node_id]) for c in nodes[listed].children}


def initial_weights(model, served_dir: Path, transform_dir: Path, oov_buckets: int) -> dict[str, np.ndarray]:
    """name -> value for every variable of `model` the served export can initialise."""
    saved = served_variables(served_dir)
    out, skipped = {}, []
    for var in model.variables:
        old = saved.get(var.name)
        vocab = VOCAB_OF_TABLE.get(_table(var.name))
        if old is not None and vocab and (served_dir / "assets" / vocab).exists():
            old_vocab = read_vocabulary(served_dir / "assets" / vocab)
            new_vocab = read_vocabulary(Path(transform_dir) / "transform_fn" / "assets" / vocab)
            if old.shape[1:] == tuple(var.shape[1:]):
                out[var.name], copied = remap_rows(old, var.numpy(), old_vocab, new_vocab, oov_buckets)
                log.info("warm start: %s, %d of %d rows from the served model", var.name, copied, var.shape[0])
                continue
        if old is not None and old.shape == tuple(var.shape):
            out[var.name] = old
        else:
            skipped.append(var.name)
    if skipped:
        log.warning("warm start: %d variable(s) keep their fresh initialisation (no match in %s): %s",
                    len(skipped), served_dir, skipped[:5])
    return out


def warm_start(model, served_dir: Path | None, transform_dir: Path, oov_buckets: int) -> tuple[str, ...]:
    """Assign the served model's weights to `model` (inside the strategy's scope); the names of
    the variables set."""
    if served_dir is None:
        log.info("warm start: no model is served yet, training from scratch")
        return ()
    values = initial_weights(model, served_dir, transform_dir, oov_buckets)
    for var in model.variables:
        if var.name in values:
            var.assign(values[var.name])
    log.info("warm start from %s: %d of %d variables", served_dir, len(values), len(model.variables))
    return tuple(values)


def refitted_days(served_record: dict | None, train_dates: list[dt.date]) -> list[dt.date]:
    """The window's days the served model was trained on: every day before its run's data date
    (its window ends the day before). A warm start should train on the days after them only."""
    fitted_before = (served_record or {}).get("data_date")
    return [d for d in train_dates if fitted_before and d.isoformat() < fitted_before]

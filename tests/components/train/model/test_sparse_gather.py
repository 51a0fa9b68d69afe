"""Sparse gradients under a real tf.distribute strategy: lookups stay sparse reads, and LazyAdam's
packed exchange of every table's rows updates exactly as one optimizer given the summed gradient.

MirroredStrategy over two logical CPUs runs the same cross-replica code paths as MWMS
(replica-context all-gather, mirrored variables) in one process; logical devices must be set
before TensorFlow starts, hence the child process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from components.train.model.sparse_gather import MAX_EXACT_ROWS, can_pack
from pipeline.config import PROJECT_ROOT

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from components.train.model.embedding import RowEmbedding
    from components.train.model.optimizers import LazyAdam

    IDS = [np.array([[1, 4, 4], [9, 0, 1]]), np.array([[4, 7, 7], [7, 2, 3]])]   # per replica
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        items, small = RowEmbedding(12, 3, l2=0.01, name="items"), RowEmbedding(5, 2, name="small")
        items.build((None,)); small.build((None,))
        scale = tf.Variable([0.5, -1.0, 2.0])          # dense: its all-reduce carries the row counts
        optimizer = LazyAdam(learning_rate=0.1)
    init = [items.embeddings.numpy(), small.embeddings.numpy(), scale.numpy()]
    variables = [items.embeddings, small.embeddings, scale]

    def loss_of(ids, a, b, s):
        # training=True: the row penalty is a training loss
        return (tf.reduce_sum(tf.square(a(ids, training=True))) + tf.reduce_sum(s * a(ids, training=True))
                + tf.reduce_sum(b(ids % 5, training=True)) + tf.add_n(a.losses))

    @tf.function
    def distributed_step():
        def step():
            ctx = tf.distribute.get_replica_context()
            ids = tf.gather(tf.constant(np.stack(IDS)), ctx.replica_id_in_sync_group)
            with tf.GradientTape() as tape:
                loss = loss_of(ids, items, small, scale)
            grads = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(grads, variables))
            return tf.constant(0)
        return strategy.run(step)

    graph = distributed_step.get_concrete_function().graph
    dense_reads = [op.name for op in graph.get_operations()
                   if op.type == "GatherV2" and op.inputs[0].op.type == "ReadVariableOp"]
    distributed_step()

    # The same step without a strategy: one optimizer, the two replicas' gradients summed.
    ref_items, ref_small = RowEmbedding(12, 3, l2=0.01, name="items"), RowEmbedding(5, 2, name="small")
    ref_items.build((None,)); ref_small.build((None,))
    ref_items.embeddings.assign(init[0]); ref_small.embeddings.assign(init[1])
    ref_scale = tf.Variable(init[2])
    ref_vars = [ref_items.embeddings, ref_small.embeddings, ref_scale]
    summed = [0, 0, 0]
    for ids in IDS:
        with tf.GradientTape() as tape:
            loss = loss_of(tf.constant(ids), ref_items, ref_small, ref_scale)
        summed = [s + tf.convert_to_tensor(g) for s, g in zip(summed, tape.gradient(loss, ref_vars))]
    reference = LazyAdam(learning_rate=0.1)
    reference.apply_gradients(zip(summed, ref_vars))
    print("RESULT " + json.dumps({
        "dense_reads": dense_reads,
        "sparse_reads": sum(op.type == "ResourceGather" for op in graph.get_operations()),
        "got": [v.numpy().tolist() for v in variables],
        "want": [v.numpy().tolist() for v in ref_vars],
        "init": [v.tolist() for v in init]}))
""")


def test_mirrored_lookups_read_sparsely_and_packed_exchange_matches_the_summed_gradient():
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    # A dense read of a mirrored table would copy all of it on every lookup (embedding.py).
    assert out["dense_reads"] == [] and out["sparse_reads"] >= 4, out["dense_reads"]
    assert len(out["got"]) == 3
    for got, want in zip(out["got"], out["want"]):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert not np.allclose(out["got"][2], out["init"][2])          # the dense variable moved too
    touched = sorted({1, 4, 9, 0, 7, 2, 3})
    untouched = [r for r in range(12) if r not in touched]
    np.testing.assert_array_equal(np.array(out["got"][0])[untouched], np.array(out["init"][0])[untouched])
    assert not np.allclose(np.array(out["got"][0])[touched], np.array(out["init"][0])[touched])


def test_what_cannot_travel_in_a_float32_pack_goes_the_default_way():
    def grad(dtype=tf.float32, rows=10):
        return tf.IndexedSlices(tf.zeros([2, 3], dtype), tf.constant([0, 1], tf.int64),
                                tf.constant([rows, 3], tf.int64))

    assert can_pack([grad(), grad(rows=MAX_EXACT_ROWS)])
    assert not can_pack([grad(), grad(tf.float16)])                 # mixed precision values
    assert not can_pack([grad(rows=MAX_EXACT_ROWS + 1)])            # ids not exact in float32

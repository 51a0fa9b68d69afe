"""Every worker's rows of all sparse gradients of a step in one all-gather (plus one for counts).

tf.distribute all-reduces each `tf.IndexedSlices` on its own: an all-gather of its length, then
of its values, then of its indices, one after another. With six embedding tables that is
eighteen sequential collectives per step, each a network round trip that the step waits for.
Here all of them travel in one float32 pack per worker, after one exchange of the row counts
that can ride with the dense gradients' all-reduce (count_slots): for each gradient its row ids (exact
in float32 below 2**24 rows) beside its values, padded to the most rows any worker has for it,
so every worker's pack has the same layout and a receiver can cut it without more messages.
Rows are concatenated, not summed: `apply_gradients` sums duplicate rows afterwards.
"""
from __future__ import annotations

import tensorflow as tf

MAX_EXACT_ROWS = 2 ** 24      # float32 holds every integer below this exactly


def can_pack(grads: list[tf.IndexedSlices]) -> bool:
    """float32 values with a static row width, in tables small enough for exact float32 ids."""
    for g in grads:
        rows = tf.get_static_value(g.dense_shape)
        if (g.values.dtype != tf.float32 or g.values.shape.rank is None or g.values.shape.rank < 2
                or not g.values.shape[1:].is_fully_defined() or rows is None or rows[0] > MAX_EXACT_ROWS):
            return False
    return True


def count_slots(ctx: tf.distribute.ReplicaContext, grads: list[tf.IndexedSlices]) -> tf.Tensor:
    """This replica's row count of each gradient in its own row of a [replicas, gradients] float32
    matrix of zeros. Summed over the replicas it is every replica's counts: an all-gather done
    as an all-reduce, so it can travel in the same collective as the dense gradients (one
    round trip per step fewer than gathering the counts on their own)."""
    counts = tf.cast(tf.stack([tf.shape(g.indices)[0] for g in grads]), tf.float32)
    mine = tf.one_hot(ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync, dtype=tf.float32)
    return mine[:, None] * counts[None, :]


def all_gather_sparse(ctx: tf.distribute.ReplicaContext, grads: list[tf.IndexedSlices],
                      summed_slots: tf.Tensor) -> list[tf.IndexedSlices]:
    """The rows of every replica for each gradient (in replica context, inside a tf.function),
    given `summed_slots`: count_slots of `grads` summed over the replicas (by the caller's
    all-reduce, see count_slots)."""
    every_count = tf.cast(tf.round(summed_slots), tf.int32)             # [replicas, gradients]
    longest = tf.reduce_max(every_count, axis=0)
    widths = [g.values.shape[1:].num_elements() for g in grads]
    pack = tf.concat([_rows(g, w, longest[k]) for k, (g, w) in enumerate(zip(grads, widths))], axis=0)
    every_pack = ctx.all_gather(pack[None], axis=0)                     # [replicas, pack length]
    out, start = [], tf.constant(0)
    for k, (g, width) in enumerate(zip(grads, widths)):
        size = longest[k] * (1 + width)
        block = tf.reshape(every_pack[:, start:start + size], [ctx.num_replicas_in_sync, -1, 1 + width])
        rows = tf.boolean_mask(block, tf.sequence_mask(every_count[:, k], longest[k]))
        values = tf.reshape(rows[:, 1:], tf.concat([[-1], tf.shape(g.values)[1:]], 0))
        out.append(tf.IndexedSlices(values, tf.cast(rows[:, 0], g.indices.dtype), g.dense_shape))
        start += size
    return out


def _rows(g: tf.IndexedSlices, width: int, longest) -> tf.Tensor:
    """[row id, values...] per row, padded with zero rows to `longest`, flattened."""
    rows = tf.concat([tf.cast(g.indices, tf.float32)[:, None], tf.reshape(g.values, [-1, width])], axis=1)
    return tf.reshape(tf.pad(rows, [[0, longest - tf.shape(rows)[0]], [0, 0]]), [-1])

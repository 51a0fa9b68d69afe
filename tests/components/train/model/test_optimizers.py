"""LazyAdam: Adam on the touched rows of sparse gradients, exact Adam on dense ones, and it trains."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.train.model import keras_private as private
from components.train.model.optimizers import LazyAdam

ROWS, DIM = 10, 4


def _sparse(indices, seed):
    values = np.random.default_rng(seed).standard_normal((len(indices), DIM)).astype(np.float32)
    return tf.IndexedSlices(tf.constant(values), tf.constant(indices, tf.int64), tf.constant([ROWS, DIM], tf.int64))


def _table():
    return np.random.default_rng(0).standard_normal((ROWS, DIM)).astype(np.float32)


def test_sparse_step_matches_adam_on_touched_rows_and_leaves_other_rows_alone():
    init = _table()
    lazy_var, dense_var = tf.Variable(init), tf.Variable(init)
    lazy, dense = LazyAdam(learning_rate=0.1), keras.optimizers.Adam(learning_rate=0.1)
    # Row 3 twice in every step (duplicate index); row 5 on step 1 only.
    steps = [_sparse([1, 3, 3, 5], seed=1), _sparse([1, 3, 3], seed=2), _sparse([3, 1, 3], seed=3)]
    after = []
    for grad in steps:
        lazy.apply_gradients([(grad, lazy_var)])
        dense.apply_gradients([(tf.convert_to_tensor(grad), dense_var)])
        after.append((lazy_var.numpy().copy(), dense_var.numpy().copy()))
        # Rows 1 and 3 are touched every step, so their moments are Adam's exactly.
        np.testing.assert_allclose(lazy_var.numpy()[[1, 3]], dense_var.numpy()[[1, 3]], rtol=0, atol=1e-6)
        assert not np.allclose(lazy_var.numpy()[[1, 3]], init[[1, 3]])

    (lazy_1, dense_1), (lazy_2, dense_2), (lazy_3, _) = after
    np.testing.assert_allclose(lazy_1[5], dense_1[5], rtol=0, atol=1e-6)
    assert not np.allclose(lazy_1[5], init[5])
    # Step 2 does not touch row 5: plain Adam moves it on its momentum, LazyAdam must not.
    assert not np.allclose(dense_2[5], dense_1[5])
    np.testing.assert_array_equal(lazy_2[5], lazy_1[5])
    np.testing.assert_array_equal(lazy_3[5], lazy_1[5])
    m = private.adam_moments(lazy, private.slot_index(lazy, lazy_var))[0].numpy()
    assert np.all(m[5] != 0)
    never = [0, 2, 4, 6, 7, 8, 9]
    np.testing.assert_array_equal(lazy_3[never], init[never])
    np.testing.assert_array_equal(m[never], 0)


def test_update_step_sums_duplicate_indices_itself():
    """apply_gradients deduplicates before update_step; update_step must not rely on it."""
    dup_var, sum_var = tf.Variable(_table()), tf.Variable(_table())
    dup_opt, sum_opt = LazyAdam(learning_rate=0.1), LazyAdam(learning_rate=0.1)
    dup_opt.build([dup_var])
    sum_opt.build([sum_var])
    grad = _sparse([3, 1, 3], seed=4)
    summed = tf.IndexedSlices(tf.stack([grad.values[0] + grad.values[2], grad.values[1]]),
                              tf.constant([3, 1], tf.int64))
    dup_opt.update_step(grad, dup_var)
    sum_opt.update_step(summed, sum_var)
    np.testing.assert_allclose(dup_var.numpy(), sum_var.numpy(), rtol=0, atol=1e-6)


def test_dense_gradient_gets_exactly_adams_update():
    kernel = np.random.default_rng(5).standard_normal((3, 2)).astype(np.float32)
    lazy_var, dense_var = tf.Variable(kernel), tf.Variable(kernel)
    lazy, dense = LazyAdam(learning_rate=0.05), keras.optimizers.Adam(learning_rate=0.05)
    for seed in range(3):
        grad = tf.constant(np.random.default_rng(10 + seed).standard_normal((3, 2)).astype(np.float32))
        lazy.apply_gradients([(grad, lazy_var)])
        dense.apply_gradients([(grad, dense_var)])
    assert not np.allclose(lazy_var.numpy(), kernel)
    np.testing.assert_array_equal(lazy_var.numpy(), dense_var.numpy())


class _SpyLazyAdam(LazyAdam):
    """Records (at trace time) which gradient types reached update_step."""

    def update_step(self, gradient, variable):
        self.seen = getattr(self, "seen", set()) | {type(gradient).__name__}
        return super().update_step(gradient, variable)


def _separable(n=512, seq=5, vocab=50, seed=0):
    """Ids < 25 are 'positive' tokens; the label is whether most of a row's tokens are."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (n, seq))
    labels = ((ids < vocab // 2).sum(axis=1) > seq // 2).astype(np.float32)
    return ids, labels


@pytest.mark.parametrize("jit", [False, True])
def test_embedding_model_converges(jit):
    keras.utils.set_random_seed(0)
    ids, labels = _separable()
    model = keras.Sequential([keras.layers.Input((ids.shape[1],), dtype="int64"),
                              keras.layers.Embedding(50, 8),
                              keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(1, activation="sigmoid")])
    optimizer = _SpyLazyAdam(1e-2, global_clipnorm=1.0)
    optimizer.jit_compile = jit  # the constructor turns XLA off without a GPU (as in model.py)
    model.compile(optimizer=optimizer, loss="binary_crossentropy", metrics=[keras.metrics.AUC(name="auc")])
    history = model.fit(ids, labels, batch_size=32, epochs=6, verbose=0)
    assert optimizer.jit_compile is jit
    assert "IndexedSlices" in optimizer.seen  # the embedding's gradient took the lazy path
    assert history.history["auc"][-1] > 0.9
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]


def test_mirrored_strategy_matches_unreplicated():
    def run(strategy):
        with strategy.scope():
            var = tf.Variable(_table())
            opt = LazyAdam(learning_rate=0.1, global_clipnorm=1.0)

        @tf.function
        def step(ids):
            def replica_fn():
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.square(tf.gather(var, ids)))
                grad = tape.gradient(loss, var)
                assert isinstance(grad, tf.IndexedSlices)
                opt.apply_gradients([(grad, var)])
            strategy.run(replica_fn)

        for ids in ([1, 3, 3], [1, 7]):
            step(tf.constant(ids))
        return var.read_value().numpy()

    init = _table()
    mirrored = run(tf.distribute.MirroredStrategy(["/cpu:0"]))
    plain = run(tf.distribute.get_strategy())
    np.testing.assert_allclose(mirrored, plain, rtol=0, atol=1e-6)
    assert not np.allclose(mirrored[[1, 3, 7]], init[[1, 3, 7]])
    np.testing.assert_array_equal(mirrored[[0, 2, 4, 5, 6, 8, 9]], init[[0, 2, 4, 5, 6, 8, 9]])


def test_amsgrad_is_refused():
    with pytest.raises(ValueError, match="amsgrad"):
        LazyAdam(amsgrad=True)


def test_config_round_trip_and_checkpoint_compatible_with_adam(tmp_path):
    opt = LazyAdam(learning_rate=0.02, beta_1=0.8, beta_2=0.99, epsilon=1e-6, adaptive_epsilon=True,
                   global_clipnorm=1.0, name="lazy")
    config = opt.get_config()
    restored = LazyAdam.from_config(dict(config))
    assert type(restored) is LazyAdam
    assert restored.get_config() == config
    assert restored.adaptive_epsilon is True and restored.global_clipnorm == 1.0
    assert type(keras.optimizers.deserialize(keras.optimizers.serialize(opt))) is LazyAdam

    # Slots are the parent's: a LazyAdam checkpoint restores into plain Adam.
    var = tf.Variable(_table())
    opt.apply_gradients([(_sparse([2, 4], seed=6), var)])
    path = tf.train.Checkpoint(var=var, optimizer=opt).save(str(tmp_path / "ckpt"))
    other_var = tf.Variable(np.zeros((ROWS, DIM), np.float32))
    adam = keras.optimizers.Adam()
    adam.build([other_var])
    tf.train.Checkpoint(var=other_var, optimizer=adam).restore(path).assert_existing_objects_matched()
    assert [v.name.split("/")[-1] for v in adam.variables] == [v.name.split("/")[-1] for v in opt.variables]
    for mine, theirs in zip(opt.variables, adam.variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    assert int(adam.iterations.numpy()) == 1


def _full_average(weights_after_each_step, init, momentum):
    """Keras' every-step average of a variable whose values after each step are given."""
    average = init.copy()
    for w in weights_after_each_step:
        average = momentum * average + (1 - momentum) * w
    return average


def test_table_averages_move_by_rows_and_sync_to_the_every_step_average():
    init = _table()
    var = tf.Variable(init)
    opt = LazyAdam(learning_rate=0.1, use_ema=True, ema_momentum=0.9)
    # Row 5 sits out steps 2-4, rows 0, 2, 4, 6-9 are never touched.
    steps = [_sparse([1, 3, 5], seed=1), _sparse([1, 3], seed=2), _sparse([3], seed=3), _sparse([1, 3], seed=4),
             _sparse([5, 1], seed=5)]
    seen = []
    for grad in steps:
        opt.apply_gradients([(grad, var)])
        seen.append(var.numpy().copy())
    average = private.moving_average(opt, 0)
    lagging = average.numpy().copy()
    np.testing.assert_array_equal(lagging[[0, 2]], init[[0, 2]])       # untouched rows: not stepped yet
    expected = _full_average(seen, init, 0.9)
    np.testing.assert_allclose(lagging[[1, 5]], expected[[1, 5]], rtol=0, atol=1e-6)   # touched last step
    opt.sync_averages()
    np.testing.assert_allclose(average.numpy(), expected, rtol=0, atol=1e-6)
    assert not np.allclose(expected[3], lagging[3])    # row 3 (not in the last step) really caught up
    opt.sync_averages()                                # idempotent
    np.testing.assert_allclose(average.numpy(), expected, rtol=0, atol=1e-6)


def test_a_table_with_dense_gradients_is_averaged_like_keras():
    init = _table()
    lazy_var, keras_var = tf.Variable(init), tf.Variable(init)
    lazy = LazyAdam(learning_rate=0.1, use_ema=True, ema_momentum=0.9)
    plain = keras.optimizers.Adam(learning_rate=0.1, use_ema=True, ema_momentum=0.9)
    for seed in range(3):
        grad = tf.convert_to_tensor(_sparse([1, 3, 5], seed=seed))
        lazy.apply_gradients([(grad, lazy_var)])
        plain.apply_gradients([(grad, keras_var)])
    lazy.sync_averages()
    np.testing.assert_allclose(private.moving_average(lazy, 0).numpy(),
                               private.moving_average(plain, 0).numpy(), rtol=0, atol=1e-6)


def test_mirrored_lazy_averages_match_unreplicated():
    def run(strategy):
        with strategy.scope():
            var = tf.Variable(_table())
            opt = LazyAdam(learning_rate=0.1, use_ema=True, ema_momentum=0.8)

        @tf.function
        def step(ids):
            def replica_fn():
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.square(tf.gather(var, ids)))
                opt.apply_gradients([(tape.gradient(loss, var), var)])
            strategy.run(replica_fn)

        for ids in ([1, 3, 3], [1, 7], [3]):
            step(tf.constant(ids))
        with strategy.scope():
            opt.sync_averages()
        return private.moving_average(opt, 0).read_value().numpy()

    mirrored = run(tf.distribute.MirroredStrategy(["/cpu:0"]))
    plain = run(tf.distribute.get_strategy())
    np.testing.assert_allclose(mirrored, plain, rtol=0, atol=1e-6)
    assert not np.allclose(mirrored[7], _table()[7])


def test_another_tf_keras_fails_loudly_naming_the_adapter():
    """The private names were read from one tf_keras: another version stops at import, not in a
    subtly different training."""
    private.check()                                         # the installed one: the pinned one
    with pytest.raises(private.UnsupportedKeras, match=r"tf_keras 2\.22\.0 .*keras_private\.py"):
        private.check("2.22.0")
    for name in private.OVERRIDDEN:                         # the overridden private method still exists
        assert callable(getattr(keras.optimizers.Adam, name))

"""Every private name of tf_keras the trainer relies on, in one place, and the one version of
tf_keras they were read from.

Why: the touched-rows Adam (optimizers.py) and the weight averaging (worker/averaging.py) need
the optimizer's slot table, its moving averages and its sparse-gradient de-duplication, which
tf_keras keeps private. A private name can change in any release without notice; here a
different tf_keras fails at import, naming this file, instead of training something subtly
different. To move to a new tf_keras: read its `optimizers/optimizer.py` for each name below,
adjust, and change SUPPORTED.

The one private name not behind a function is a method LazyAdam overrides,
`_update_model_variables_moving_average` (the parent's whole-variable averaging step); it is
listed in OVERRIDDEN so the version check vouches for it too.
"""
from __future__ import annotations

import tf_keras as keras

SUPPORTED = "2.21."
OVERRIDDEN = ("_update_model_variables_moving_average",)


class UnsupportedKeras(RuntimeError):
    """The installed tf_keras is not the version these private names were read from."""


def check(version: str = keras.__version__) -> None:
    if not version.startswith(SUPPORTED):
        raise UnsupportedKeras(
            f"tf_keras {version} is installed; components/train/model/keras_private.py was written against "
            f"tf_keras {SUPPORTED}x (constraints.txt): check the private names it lists, then update SUPPORTED")


check()


def slot_index(optimizer, variable) -> int | None:
    """The position of `variable`'s slots (and moving average) in the optimizer's lists, or None
    for a variable the optimizer built no slot for."""
    return optimizer._index_dict.get(optimizer._var_key(variable))


def variable_key(optimizer, variable) -> str:
    return optimizer._var_key(variable)


def adam_moments(optimizer, index: int):
    """Adam's (m, v) slot variables of the variable at `index`."""
    return optimizer._momentums[index], optimizer._velocities[index]


def moving_average(optimizer, index: int):
    """The `use_ema` moving average of the variable at `index`."""
    return optimizer._model_variables_moving_average[index]


def deduplicate_sparse_grad(optimizer, grads: list) -> list:
    """Keras' own summing of an IndexedSlices gradient's duplicate rows."""
    return optimizer._deduplicate_sparse_grad(grads)


def distribution_strategy(optimizer):
    """The strategy the optimizer's variables were created under."""
    return optimizer._distribution_strategy


def built(optimizer) -> bool:
    """True once the optimizer has created its slots (at its first step)."""
    return bool(getattr(optimizer, "_built", False))

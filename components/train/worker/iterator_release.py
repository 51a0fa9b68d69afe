"""Release fit()'s training iterator off the chief's critical path.

Why: in this TensorFlow (2.21) deleting a tf.data iterator whose pipeline autotunes blocks until
the autotune loop's next scheduled pass, and that loop's period doubles while the iterator runs
(up to 60 s): the cancellation does not wake it. Our own pipelines turn autotuning off
(input.dataset_options), but under MultiWorkerMirroredStrategy every replica reads through a
per-device dataset that tf.distribute builds with default options, so the training iterator
still stalls the thread that drops it: when fit() returns, 7-11 s here at demo size, with no CPU
used (docs/training.md, "Input"). The wait releases the GIL, so dropping the iterator in a
background thread lets the chief evaluate and export meanwhile; the worker joins the thread
before it exits.
"""
from __future__ import annotations

import logging
import threading
import time

import tensorflow as tf

log = logging.getLogger(__name__)


class HeldIterators(tf.distribute.DistributedDataset):
    """A distributed dataset that keeps every iterator made from it until `release` drops them.

    It is what fit() is given: Keras makes its iterator with `iter()` and would otherwise delete
    it as fit() returns, on the calling thread. Everything else is the wrapped dataset's.
    """

    def __init__(self, dataset):
        self._dataset = dataset
        self._iterators: list = []

    def __iter__(self):
        iterator = iter(self._dataset)
        self._iterators.append(iterator)
        return iterator

    def __getattr__(self, name):
        return getattr(self._dataset, name)

    @property
    def element_spec(self):
        return self._dataset.element_spec

    def reduce(self, initial_state, reduce_func):
        return self._dataset.reduce(initial_state, reduce_func)

    def release(self) -> threading.Thread:
        """Drop the iterators on a started background thread; join it before the process exits."""
        iterators, self._iterators = self._iterators, []
        thread = threading.Thread(target=_drop, args=(iterators,), name="release-iterators", daemon=True)
        thread.start()
        return thread


def _drop(iterators: list) -> None:
    started = time.monotonic()
    iterators.clear()
    log.info("training iterators released in %.1f s (in the background)", time.monotonic() - started)

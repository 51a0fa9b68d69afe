"""Release fit()'s training iterator off the chief's critical path.

Why: deleting an iterator whose pipeline autotunes waits out the autotune loop's period
(input.dataset_options). Our own pipelines turn autotuning off, but under
MultiWorkerMirroredStrategy every replica reads through a per-device dataset that tf.distribute
builds with default options, so the training iterator still stalls the thread that drops it, as
fit() returns (docs/training.md, "Iterators and tf.data's autotuning"). The wait releases the
GIL, so dropping the iterator on a background thread lets the chief evaluate and export
meanwhile; the worker joins the thread before it exits.
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

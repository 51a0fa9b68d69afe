"""One MultiWorkerMirroredStrategy worker process (`python -m components.train.worker`, main.py).

input.py reads the staged shards, callbacks.py holds the per-epoch work (paced backups,
progress), chief.py is what only worker 0 does after fit (evaluate, calibrate, export,
model card), export.py writes the SavedModel, warm_start.py seeds a model from the served one.
May import `components.train.model`, the heartbeat writer of `components.train.gang.heartbeat`
and the benchmark options of `components.train.gang.lab` (the protocols between a worker and
whatever launched it) and `pipeline`; never the launchers (rule enforced by tests/test_imports.py).
"""

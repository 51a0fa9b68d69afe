"""Training stage: the multimodal CTR model trained by a MultiWorkerMirroredStrategy gang.

`run(config, paths)` is the one entry point (DAG task, CLI and tests): it starts
`config.train.workers` worker processes on this host (backend "local") or renders and
submits the Kubernetes manifests (backend "kubernetes"), and returns the chief's TrainResult.
TensorFlow is imported only inside the worker processes, never here.

Four rooms, each with one job (tests/test_imports.py enforces who may import whom):
- `model/`: what is trained (architectures, embeddings, calibration, the lazy optimizer);
- `worker/`: one MWMS worker process (`python -m components.train.worker`): input, callbacks,
  the chief's evaluation and export, warm start;
- `gang/`: the local backend: worker spec, launcher, heartbeats;
- `k8s/`: the Kubernetes backend: manifests, submission and supervision, API client.
"""
from components.train.run import run
from pipeline.contracts.staged import StagedDataError

__all__ = ["StagedDataError", "run"]

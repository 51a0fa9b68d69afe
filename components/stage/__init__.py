"""Stage step: copy a run's shards from the artifact store to the training hosts' local SSD.

Why stage: training reads every shard once per epoch; shared storage (NFS, GCS fuse) is slow
and jittery, and one straggling reader stalls a synchronous multi-worker step. A verified
local copy makes reads fast and predictable.

`run(config, paths, worker=None) -> StageResult`:
- reads `paths.examples_dir/manifest.json` (absent = preprocess output incomplete -> StageError);
- copies the shards of one worker (on a cluster each training host stages its own set) or of
  all workers (one machine), plus the manifest, into a hidden temp sibling of
  `paths.staged_dir`, hashing each file as it is written and checking size + sha256 against
  the manifest (any mismatch -> StageError, nothing published);
- publishes by rename, so a reader sees a complete staged dir or none;
- a rerun finds an already valid staged dir and keeps it (retries are cheap); a corrupt one is
  replaced;
- retention: keeps the newest `preprocess.staging_keep_runs` staged runs under staging_root
  (the current one always), and removes temp leftovers of killed runs.

Staged layout (same as the artifact store): `staged_dir/{train,eval}/part-*.tfrecord` and
`staged_dir/manifest.json`; worker i of W reads `shard_files(staged_dir, "train", i, W)`.
"""
from components.stage.run import StageError, run, verify_staged
from pipeline.contracts.manifest import shard_files

__all__ = ["StageError", "run", "shard_files", "verify_staged"]

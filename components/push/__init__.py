"""Push to TF Serving: `run(config, paths) -> PushResult` (push.force / push.force_reason /
push.allow_backfill steer it) and `rollback(config, reason, to_version=None) -> PushResult`
(see run.py, rollback.py)."""
from components.push.rollback import RollbackError, rollback
from components.push.run import PushError, run

__all__ = ["PushError", "RollbackError", "rollback", "run"]

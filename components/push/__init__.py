"""Push to TF Serving: `run(config, paths, force=, force_reason=, allow_backfill=) -> PushResult`
and `rollback(config, reason, to_version=None) -> PushResult` (see component.py, rollback.py)."""
from components.push.component import PushError, run
from components.push.rollback import RollbackError, rollback

__all__ = ["PushError", "RollbackError", "rollback", "run"]

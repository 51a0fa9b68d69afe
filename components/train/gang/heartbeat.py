"""Worker heartbeats and the launcher's progress deadline (pure Python: the launcher has no TF).

Why: a worker that hangs (frozen, stuck in I/O, deadlocked) does not exit, so the exit-code
watch never fires, and its synchronous peers block in the next collective; only the task's
execution timeout, hours later, would end it. Each worker therefore keeps one small JSON file
fresh: a thread rewrites it every `every_s` with a sequence number, the batches done so far
(train and validation) and its phase. The launcher reads them and stops the gang when

- a worker's sequence number has not changed for the deadline: the process itself is not
  running (frozen, SIGSTOPped, swapped out), named as such; or
- while fitting, no worker's step count moved for the deadline: the gang is hung. In a
  synchronous gang the peers of a hung worker block in the same step, so the counts are
  usually equal and no worker can honestly be singled out (the message says so); when they
  differ, the one furthest behind is named.

Staleness is judged on the launcher's own clock from the sequence number, never from file
mtimes, so clock skew or attribute caching on a shared filesystem cannot fake a frozen worker.
Before the first step (restore, tracing, input warm-up) and after fitting (the chief evaluates
and exports alone) steps do not move, so only the first rule applies. The file doubles as the
worker's "joined the gang" marker.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
SETUP, FIT, FINISH, DONE = "setup", "fit", "finish", "done"   # DONE: the last beat, on exit
READ_EVERY_S = 1.0      # the writers' period: the launcher reads no more often


class HeartbeatWriter:
    """A daemon thread that rewrites `path` every `every_s` with this worker's progress."""

    def __init__(self, path: Path, every_s: float = READ_EVERY_S):
        self.path, self.every_s = Path(path), every_s
        self.steps, self.phase, self.seq = 0, SETUP, 0
        self.path.parent.mkdir(parents=True, exist_ok=True)     # a pod may be the first to write there
        self._lock, self._stop = threading.Lock(), threading.Event()
        self.write()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()

    def step(self) -> None:
        self.steps += 1
        if self.phase == SETUP:
            self.phase = FIT

    def write(self) -> None:
        with self._lock:
            self.seq += 1
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(json.dumps({"seq": self.seq, "steps": self.steps, "phase": self.phase,
                                       "pid": os.getpid()}))
            os.replace(tmp, self.path)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.write()
            except OSError as err:      # a full disk or a flaky share: keep beating, say why
                log.warning("heartbeat %s not written: %s", self.path, err)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.phase = DONE
        self.write()


@dataclass(frozen=True)
class Beat:
    seq: int
    steps: int
    phase: str


def read(path: Path) -> Beat | None:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return Beat(int(data.get("seq", 0)), int(data.get("steps", 0)), str(data.get("phase", FIT)))


class ProgressWatch:
    """The launcher's side: when (on its clock) each worker's beat and the gang's steps last moved."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.seen: dict[int, tuple[int, float]] = {}      # worker -> (seq, when it changed)
        self.steps: dict[int, int] = {}
        self.steps_moved_at: float | None = None

    def check(self, beats: dict[int, Beat | None], now: float) -> tuple[int | None, str] | None:
        """(worker or None, why) when the gang must be stopped, else None. `beats`: the running
        workers' heartbeats; `now`: the launcher's monotonic clock."""
        if self.timeout_s <= 0 or not beats or any(b is None for b in beats.values()):
            return None
        # A worker that exited cleanly beats no more (the Kubernetes launcher cannot tell from
        # the files alone which pods still run; the local one passes running workers only).
        beats = {i: b for i, b in beats.items() if b.phase != DONE}
        if not beats:
            return None
        limit = f"limit train.progress_timeout_s = {self.timeout_s:.0f} s"
        for i, beat in sorted(beats.items()):
            seq, since = self.seen.get(i, (None, now))
            if beat.seq != seq:
                self.seen[i] = (beat.seq, now)
            elif now - since > self.timeout_s:
                return i, (f"worker-{i} is not running: no heartbeat for {now - since:.0f} s "
                           f"(frozen or stopped; {limit})")
        steps = {i: b.steps for i, b in beats.items()}
        if steps != self.steps or any(b.phase != FIT for b in beats.values()) or self.steps_moved_at is None:
            self.steps, self.steps_moved_at = steps, now
            return None
        if now - self.steps_moved_at <= self.timeout_s:
            return None
        stalled = f"no training progress for {now - self.steps_moved_at:.0f} s"
        if len(set(steps.values())) == 1:
            return None, (f"{stalled}: every worker stopped at step {next(iter(steps.values()))}, so the gang "
                          f"is stuck in a collective, the network or input they share ({limit})")
        behind = min(steps, key=lambda i: (steps[i], i))
        return behind, (f"{stalled} (steps per worker {[steps[i] for i in sorted(steps)]}); worker-{behind} is "
                        f"the furthest behind ({limit})")

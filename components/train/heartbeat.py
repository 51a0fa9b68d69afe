"""Worker heartbeats and the launcher's progress deadline (pure Python: the launcher has no TF).

Why: a worker that hangs (frozen, stuck in I/O, deadlocked) does not exit, so the exit-code
watch never fires, and its synchronous peers block in the next collective; only the task's
execution timeout, hours later, would end it. Each worker therefore keeps one small JSON file
fresh: a thread rewrites it every `every_s` with the steps done so far (train and validation
batches) and its phase. The launcher reads them and stops the gang when

- a worker's file is older than the deadline: the process itself is not running (frozen,
  SIGSTOPped, swapped out), named as such; or
- while every worker is fitting, no worker's step count moved for the deadline: the gang is
  hung, and the worker named is the one with the fewest steps (the one the others wait for).

After fitting the chief evaluates and exports alone; steps do not move then, so only the
first rule applies. The file doubles as the worker's "joined the gang" marker.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

FIT, FINISH = "fit", "finish"


class HeartbeatWriter:
    """A daemon thread that rewrites `path` every `every_s` with this worker's progress."""

    def __init__(self, path: Path, every_s: float = 1.0):
        self.path, self.every_s = Path(path), every_s
        self.steps, self.phase = 0, FIT
        self._stop = threading.Event()
        self.write()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()

    def step(self) -> None:
        self.steps += 1

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"steps": self.steps, "phase": self.phase, "pid": os.getpid()}))
        os.replace(tmp, self.path)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.write()

    def close(self) -> None:
        self._stop.set()


@dataclass(frozen=True)
class Beat:
    steps: int
    phase: str
    written_at: float        # wall clock (file mtime)


def read(path: Path) -> Beat | None:
    try:
        data, mtime = json.loads(Path(path).read_text()), Path(path).stat().st_mtime
    except (OSError, ValueError):
        return None
    return Beat(int(data.get("steps", 0)), str(data.get("phase", FIT)), mtime)


class ProgressWatch:
    """The launcher's side: remembers when each worker's step count last moved."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.last_steps: dict[int, int] = {}
        self.moved_at: float | None = None

    def check(self, beats: list[Beat | None], now: float) -> tuple[int, str] | None:
        """(worker, why) when the gang must be stopped, else None. `now` is wall-clock time."""
        if self.timeout_s <= 0 or any(b is None for b in beats):
            return None
        for i, beat in enumerate(beats):
            if now - beat.written_at > self.timeout_s:
                return i, (f"worker-{i} is not running: no heartbeat for {now - beat.written_at:.0f} s "
                           f"(frozen or stopped process; limit train.progress_timeout_s = {self.timeout_s:.0f} s)")
        steps = {i: b.steps for i, b in enumerate(beats)}
        if self.moved_at is None or steps != self.last_steps or any(b.phase != FIT for b in beats):
            self.last_steps, self.moved_at = steps, now
            return None
        if now - self.moved_at > self.timeout_s:
            slowest = min(steps, key=lambda i: (steps[i], -i))
            return slowest, (f"no training progress for {now - self.moved_at:.0f} s (steps per worker "
                             f"{[steps[i] for i in sorted(steps)]}); worker-{slowest} is the furthest behind "
                             f"(limit train.progress_timeout_s = {self.timeout_s:.0f} s)")
        return None

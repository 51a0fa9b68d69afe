"""Native libraries' stderr in an Airflow task log, at the severity they wrote it with.

An Airflow 3 task process's file descriptor 2 is a socket whose every line the supervisor logs
at error level. TensorFlow's C++ runtime (absl logging) writes its start-up lines there before
it reads TF_CPP_MIN_LOG_LEVEL: oneDNN, "could not find cuda drivers", cuInit on a CPU machine.
Every successful task that imports TensorFlow then shows red lines that say nothing went wrong.

`to_task_log()`, called where a task process starts (the DAG's on_execute_callback), points fd 2
at a pipe read by a thread that logs each native line through `logging` under the "native"
logger, and keeps Python's own `sys.stderr` (tracebacks, warnings) on the supervisor's socket,
so those stay errors. Nothing is dropped. A native line keeps its absl/glog severity letter:
I is info; W and E are warnings, because a library's failure that matters reaches the task as a
Python exception (the task's RECO FAILED line); F (fatal) is an error. Lines without a severity
prefix are warnings. Run from a terminal (the step CLIs), nothing is rerouted. The pipe holds
1 MiB: native code that writes more than that in one go while holding the GIL would wait for a
reader that needs the GIL (start-up lines are a few hundred bytes). What a native
library writes just before it aborts the process (an F line) can be lost with the process; the
task's failure still names the signal, and the step's CLI shows the line.
"""
from __future__ import annotations

import atexit
import fcntl
import io
import logging
import os
import re
import sys
import threading

log = logging.getLogger("native")
SEVERITY = re.compile(r"^([IWEF])\d{4} ")     # absl/glog: I0000 00:00:1796… 1234 port.cc:153] …
LEVELS = {"I": logging.INFO, "W": logging.WARNING, "E": logging.WARNING, "F": logging.ERROR}
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_routed = threading.Event()
_replaced: list = []     # the stream sys.stderr was: it owns fd 2, and closes it when collected


def level_of(line: str) -> int:
    found = SEVERITY.match(line)
    return LEVELS[found.group(1)] if found else logging.WARNING


def _forward(read_fd: int) -> None:
    with open(read_fd, "rb", buffering=0) as pipe:
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line:
                log.log(level_of(line), "%s", line)


def _writes_to_fd2(stream) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


def _retarget_handlers(new) -> None:
    """A logging handler writing to fd 2 would now write into the pipe and have its own line
    logged again through "native", endlessly: it writes to Python's stderr instead."""
    loggers = [logging.getLogger(), *(obj for obj in logging.Logger.manager.loggerDict.values()
                                      if isinstance(obj, logging.Logger))]
    for handler in (h for logger in loggers for h in logger.handlers):
        if isinstance(handler, logging.StreamHandler) and _writes_to_fd2(handler.stream):
            handler.setStream(new)


def _widen(fd: int) -> None:
    """A native writer that holds the GIL (a C++ import) blocks on a full pipe while the reader
    thread waits for the GIL: the pipe's buffer must outlast any burst at start-up. Linux lets an
    unprivileged process grow it to /proc/sys/fs/pipe-max-size (1 MiB by default)."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, 1 << 20)
    except OSError as err:
        log.debug("pipe buffer left at its default size: %s", err)


def to_task_log() -> bool:
    """Route this process's native stderr into logging; False when already routed (idempotent)."""
    if _routed.is_set():
        return False
    _routed.set()
    python_stderr = os.dup(2)
    read_fd, write_fd = os.pipe()
    _widen(write_fd)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    old, sys.stderr = sys.stderr, io.TextIOWrapper(os.fdopen(python_stderr, "wb"), line_buffering=True)
    old.flush()
    _replaced.append(old)
    _retarget_handlers(sys.stderr)
    reader = threading.Thread(target=_forward, args=(read_fd,), name="native-stderr", daemon=True)
    reader.start()
    atexit.register(_drain, reader)
    return True


def _drain(reader: threading.Thread) -> None:
    """At exit, fd 2 goes back to the socket: the pipe closes (unless a child still holds it) and
    the reader logs what is left before the process ends."""
    os.dup2(sys.stderr.fileno(), 2)
    reader.join(timeout=2.0)

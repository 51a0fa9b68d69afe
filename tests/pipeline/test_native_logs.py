"""Native stderr in a task process: each line logged at its own severity, Python's stderr kept.

A child Python process stands in for the Airflow task process (the routing rewires fd 2, which
must not happen to the test runner): its fd 2 is a file we read afterwards, as the supervisor's
socket would be, and its logging goes to a second file, as the task log would.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

from pipeline.native_logs import level_of

CHILD = textwrap.dedent("""
    import fcntl, gc, io, logging, os, stat, sys
    logging.basicConfig(filename=sys.argv[1], format="%(levelname)s %(name)s %(message)s", level=logging.INFO)
    stream = logging.StreamHandler(sys.stderr)            # would loop if left writing to fd 2
    stream.setFormatter(logging.Formatter("HANDLER %(levelname)s %(message)s"))
    logging.getLogger().addHandler(stream)
    # Airflow's task process replaces sys.stderr by a stream that owns fd 2: once routed, that
    # stream must not be collected (closing fd 2 would hand it to the next file opened).
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb"), line_buffering=True)
    from pipeline import native_logs
    assert native_logs.to_task_log() and not native_logs.to_task_log()
    gc.collect()
    assert stat.S_ISFIFO(os.fstat(2).st_mode), "fd 2 is not the pipe any more"
    assert fcntl.fcntl(2, 1032) >= 1 << 20       # F_GETPIPE_SZ: room for a burst written with the GIL held
    os.write(2, b"I0000 00:00:1796.1 17 port.cc:153] oneDNN custom operations are on.\\n"
                b"E0000 00:00:1796.2 17 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)\\n"
                b"F0000 00:00:1796.3 17 check.cc:1] Check failed: shape\\n"
                b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n")
    subprocess_line = "import os; os.write(2, b'W0000 00:00:1796.4 18 child.cc:1] from a child process\\\\n')"
    import subprocess; subprocess.run([sys.executable, "-c", subprocess_line], check=True)
    print("Traceback (most recent call last): a Python error", file=sys.stderr)
""")


def test_native_lines_are_logged_at_their_severity_and_python_stderr_stays(tmp_path):
    task_log, socket = tmp_path / "task.log", tmp_path / "fd2"
    with open(socket, "wb") as fd2:
        subprocess.run([sys.executable, "-c", CHILD, str(task_log)], stderr=fd2, check=True, timeout=60)
    logged = task_log.read_text().splitlines()
    assert "INFO native I0000 00:00:1796.1 17 port.cc:153] oneDNN custom operations are on." in logged
    assert any(line.startswith("WARNING native E0000") and "cuInit" in line for line in logged), logged
    assert any(line.startswith("ERROR native F0000") for line in logged), logged
    assert any(line.startswith("WARNING native WARNING: All log messages before absl") for line in logged), logged
    assert any(line.startswith("WARNING native W0000") and "from a child process" in line for line in logged)
    assert sum("native" in line for line in logged) == 5, logged                  # each once: no loop
    on_socket = socket.read_text().splitlines()
    assert "Traceback (most recent call last): a Python error" in on_socket      # still an error line
    native = [line for line in on_socket if "0000 00:00:1796" in line or "absl" in line]
    assert len(native) == 5 and all(line.startswith("HANDLER ") for line in native), on_socket  # via logging


def test_level_of_reads_the_severity_letter_only_where_absl_puts_it():
    assert [level_of(line) for line in ("I1204 x", "W0000 x", "E0000 x", "F0000 x", "Info: x", "I0 x")] == \
        [20, 30, 30, 40, 30, 30]


BURST = textwrap.dedent("""
    import ctypes, logging, sys
    logging.basicConfig(filename=sys.argv[1], format="%(levelname)s %(name)s %(message)s", level=logging.INFO)
    from pipeline import native_logs
    native_logs.to_task_log()
    line = b"I0000 00:00:1796.1 17 chatty.cc:1] " + b"x" * 90 + b"\\n"
    burst = line * 5000                                  # ~630 KB, ten times a default pipe's buffer
    libc = ctypes.PyDLL(None)                             # PyDLL: the call keeps the GIL, as a C++ import does
    assert libc.write(2, burst, len(burst)) == len(burst)
""")


def test_a_burst_written_with_the_gil_held_does_not_deadlock_the_task(tmp_path):
    task_log = tmp_path / "task.log"
    subprocess.run([sys.executable, "-c", BURST, str(task_log)], stderr=subprocess.DEVNULL, check=True, timeout=60)
    assert task_log.read_text().count("chatty.cc:1]") == 5000

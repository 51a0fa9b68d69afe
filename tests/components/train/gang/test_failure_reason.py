"""What a failed worker died of, read from its log (launcher.failure_reason): the line on-call
reads must say `FileNotFoundError: …`, not only "exited with code 1"."""
from components.train.gang.launcher import failure_reason

NATIVE = ("I0000 00:00:1796583135.905878   10614 port.cc:153] oneDNN custom operations are on.\n"
          "2026-12-06 18:52:28,711 w0 INFO components.train.worker.main: gang up: worker 0 of 2\n")


def test_the_exception_line_of_a_traceback_without_its_module_path():
    log = NATIVE + """Traceback (most recent call last):
  File "/work/main/components/train/worker/input.py", line 244, in make_dataset
    for batch in ds:
             ^^
tensorflow.python.framework.errors_impl.DataLossError: corrupted record at 12 [Op:IteratorGetNext]
W0000 00:00:1796583148.1 10614 coordination_service_agent.cc:1] Shutting down the coordination agent
"""
    assert failure_reason(log) == "DataLossError: corrupted record at 12 [Op:IteratorGetNext]"


def test_the_last_of_chained_tracebacks_and_only_the_first_line_of_its_message():
    log = """Traceback (most recent call last):
  File "a.py", line 1, in <module>
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "a.py", line 3, in <module>
I0000 00:00:1796583135.9 10614 port.cc:153] a native line written in the middle
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
OSError: [Errno 28] No space left on device: '/artifacts/train/backup/chief/ckpt-3.data'
  more of the message
"""
    assert failure_reason(log) == ("OSError: [Errno 28] No space left on device: "
                                   "'/artifacts/train/backup/chief/ckpt-3.data'")


def test_a_bare_exception_class_and_a_long_message():
    assert failure_reason("Traceback (most recent call last):\n  File \"a\", line 1\nKeyboardInterrupt\n") == \
        "KeyboardInterrupt"
    reason = failure_reason("Traceback (most recent call last):\nValueError: " + "x" * 1000 + "\n")
    assert reason.startswith("ValueError: xxx") and len(reason) == 400 and reason.endswith("…")


def test_a_tail_that_lost_its_traceback_header_still_names_the_error():
    """A pod's last lines (Kubernetes), or a traceback longer than the scanned end of the log."""
    tail = "    raise StageError(msg)\nStageError: shard train/part-00003 copied 0 bytes, manifest says 8912345\n"
    assert failure_reason(tail) == "StageError: shard train/part-00003 copied 0 bytes, manifest says 8912345"


def test_no_exception_no_reason():
    assert failure_reason("") == ""
    assert failure_reason(NATIVE + "WARNING: All log messages before absl::InitializeLog() are on STDERR\n") == ""
    assert failure_reason("worker-1 crashed: CUDA error: an illegal memory access was encountered\n") == ""

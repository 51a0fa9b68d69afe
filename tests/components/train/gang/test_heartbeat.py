"""The progress watch's rules on given heartbeats (the launcher tests run them on real processes)."""
from components.train.gang.heartbeat import DONE, FINISH, FIT, SETUP, Beat, HeartbeatWriter, ProgressWatch, read


def test_steps_that_stop_moving_while_fitting_trip_the_deadline():
    watch = ProgressWatch(timeout_s=10)
    for seq, now in enumerate((100.0, 105.0, 110.0)):
        assert watch.check({0: Beat(seq, 5, FIT), 1: Beat(seq, 5, FIT)}, now) is None
    worker, why = watch.check({0: Beat(9, 5, FIT), 1: Beat(9, 5, FIT)}, 111.0)
    assert worker is None and "every worker stopped at step 5" in why     # a synchronous gang: no one to blame
    uneven = ProgressWatch(timeout_s=10)
    uneven.check({0: Beat(1, 7, FIT), 1: Beat(1, 4, FIT)}, 0.0)
    assert uneven.check({0: Beat(2, 7, FIT), 1: Beat(2, 4, FIT)}, 11.0)[0] == 1   # the one behind


def test_no_steps_before_the_first_one_or_after_fitting_is_fine_while_beating():
    watch = ProgressWatch(timeout_s=10)
    for seq, now in enumerate((0.0, 30.0, 60.0)):          # restore, tracing, input warm-up
        assert watch.check({0: Beat(seq, 0, SETUP), 1: Beat(seq, 0, SETUP)}, now) is None
    for seq, now in enumerate((100.0, 130.0, 160.0), start=3):   # the chief exports alone
        assert watch.check({0: Beat(seq, 9, FINISH), 1: Beat(seq, 9, FINISH)}, now) is None


def test_a_heartbeat_that_stops_changing_names_the_worker_on_the_launchers_clock():
    watch = ProgressWatch(timeout_s=10)
    watch.check({0: Beat(1, 0, SETUP), 1: Beat(1, 0, SETUP)}, 0.0)
    assert watch.check({0: Beat(5, 0, SETUP), 1: Beat(1, 0, SETUP)}, 9.0) is None
    worker, why = watch.check({0: Beat(6, 0, SETUP), 1: Beat(1, 0, SETUP)}, 11.0)
    assert worker == 1 and "worker-1 is not running: no heartbeat for 11 s" in why
    assert ProgressWatch(timeout_s=0).check({0: Beat(1, 1, FIT)}, 1e9) is None      # off


def test_writer_counts_steps_enters_fit_on_the_first_and_survives_concurrent_writes(tmp_path):
    writer = HeartbeatWriter(tmp_path / "w0.ready", every_s=0.01)
    assert read(tmp_path / "w0.ready").phase == SETUP
    for _ in range(200):
        writer.step()
        writer.write()                  # racing the thread's own writes
    writer.close()
    beat = read(tmp_path / "w0.ready")
    assert beat.steps == 200 and beat.phase == DONE and beat.seq > 200      # the last beat says it exited
    assert read(tmp_path / "missing") is None


def test_a_worker_that_exited_is_not_a_frozen_one():
    """A non-chief exits after fitting while the chief exports: its beat stops changing, and
    only its DONE phase tells the Kubernetes launcher (which reads files, not processes) why."""
    watch = ProgressWatch(timeout_s=10)
    watch.check({0: Beat(1, 9, FINISH), 1: Beat(7, 9, DONE)}, 0.0)
    assert watch.check({0: Beat(30, 9, FINISH), 1: Beat(7, 9, DONE)}, 30.0) is None
    assert watch.check({0: Beat(30, 9, FINISH), 1: Beat(7, 9, DONE)}, 60.0)[0] == 0   # the chief froze

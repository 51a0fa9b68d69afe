"""The progress watch's rules on given heartbeats (the launcher tests run them on real processes)."""
from components.train.heartbeat import FINISH, FIT, Beat, HeartbeatWriter, ProgressWatch, read


def test_steps_that_stop_moving_while_fitting_trip_the_deadline_but_not_after_fit():
    watch = ProgressWatch(timeout_s=10)
    fitting = [Beat(5, FIT, 100.0), Beat(6, FIT, 100.0)]
    assert watch.check(fitting, 100.0) is None
    assert watch.check([Beat(5, FIT, 108.0), Beat(6, FIT, 108.0)], 108.0) is None
    assert watch.check([Beat(5, FIT, 111.0), Beat(6, FIT, 111.0)], 111.0)[0] == 0   # 11 s without a step
    exporting = ProgressWatch(timeout_s=10)
    for now in (100.0, 130.0, 160.0):   # the chief exports alone for minutes: fine while beating
        assert exporting.check([Beat(9, FINISH, now), Beat(9, FINISH, now)], now) is None
    assert exporting.check([Beat(9, FINISH, 160.0), Beat(9, FINISH, 140.0)], 160.0)[0] == 1  # stale file
    assert ProgressWatch(timeout_s=0).check([Beat(1, FIT, 0.0)], 1e9) is None                 # off


def test_writer_file_is_readable_at_once_and_counts_steps(tmp_path):
    writer = HeartbeatWriter(tmp_path / "w0.ready", every_s=0.05)
    for _ in range(3):
        writer.step()
    writer.write()
    writer.close()
    beat = read(tmp_path / "w0.ready")
    assert beat.steps == 3 and beat.phase == FIT
    assert read(tmp_path / "missing") is None

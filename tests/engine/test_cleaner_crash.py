"""kill -9 during a clean: a forked child cleans a log and dies (os._exit) at a point the test
chooses, after a step of the swap or after the n-th file rename; the parent reopens the log
as after a crash. Kafka's rule: nothing lost, nothing doubled, no orphan file, and the next
clean reaches the model."""
from __future__ import annotations

import os

import pytest

from engine.cleaner import STEPS
from engine.log import Log
from tests.engine.test_cleaner import NOW, clean, compacted_config, last_per_key, produce, read_all

KILLED, DONE, FAILED = 37, 0, 99


def _build(path: str) -> list[tuple[int, bytes | None, bytes | None]]:
    lg = Log(path, compacted_config(segment_bytes=300))
    for i in range(80):
        value = None if i % 13 == 5 else b"value-%d" % i
        produce(lg, [(b"key-%d" % (i % 9), value)])
    lg.roll()
    before = read_all(lg)
    lg.close()
    return before


def _clean_and_die(path: str, point: tuple[str, int | str]) -> int:
    """Clean in a child killed at ``point``; the child's exit code."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = FAILED
        try:
            kind, where = point
            if kind == "replace":
                real = os.replace
                calls = [0]

                def replace(src, dst):
                    real(src, dst)
                    calls[0] += 1
                    if calls[0] == where:
                        os._exit(KILLED)

                os.replace = replace

            def hook(step: str) -> None:
                if kind == "step" and step == where:
                    os._exit(KILLED)

            lg = Log(path, compacted_config(segment_bytes=300), high_watermark=2**62)
            clean(lg, NOW, hook=hook)
            code = DONE
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


POINTS = [("step", s) for s in STEPS] + [("replace", n) for n in (1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 20)]


@pytest.mark.parametrize("point", POINTS, ids=[f"{k}-{w}" for k, w in POINTS])
def test_a_kill_9_at_any_point_of_a_clean_loses_nothing_and_leaves_no_orphan(tmp_path, point):
    path = str(tmp_path / "t-0")
    before = _build(path)
    assert _clean_and_die(path, point) == KILLED
    lg = Log(path, compacted_config(segment_bytes=300), had_clean_shutdown=False, recovery_point=0,
             high_watermark=before[-1][0] + 1)
    try:
        names = os.listdir(path)
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
        logs = {n[:20] for n in names if n.endswith(".log")}
        assert all(n[:20] in logs for n in names if n.endswith((".index", ".timeindex", ".txnindex")))
        after = read_all(lg)
        offsets = [o for o, _, _ in after]
        assert offsets == sorted(set(offsets))  # nothing doubled
        assert set(after) <= set(before)  # nothing made up
        assert last_per_key(after) == last_per_key(before)  # nothing lost
        assert lg.log_end_offset == before[-1][0] + 1
        # The next clean reaches the model exactly.
        clean(lg, NOW)
        expected = sorted((off, key, value) for key, (off, value) in last_per_key(before).items())
        assert read_all(lg) == expected
    finally:
        lg.close()

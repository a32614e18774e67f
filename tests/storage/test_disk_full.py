"""A real full filesystem (a tmpfs of a few hundred KiB; root only, else skipped): index entries
and segment appends fail with ENOSPC as OSError / KafkaStorageError, never SIGBUS, and leave
the files as they were before the failed append, so recovery after space returns finds every
append that succeeded."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest

from engine.config import LogConfig
from engine.log import Log
from engine.log_dir_failure import KafkaStorageError, LogDirFailureChannel
from tests.broker.replica_nodes import records
from tests.storage import tmpfs

# Run in a child: were an index store to fault, SIGBUS would kill the test process itself.
INDEX_ON_A_FULL_DISK = textwrap.dedent("""
    import errno, os, sys
    sys.path.insert(0, {root!r})
    from ext.index import OffsetIndex, TimeIndex
    from tests.storage.tmpfs import fill

    where = sys.argv[1]
    offsets = OffsetIndex(os.path.join(where, "0.index"), 0, 1 << 20)
    times = TimeIndex(os.path.join(where, "0.timeindex"), 0, 1 << 20)
    offsets.append(0, 0)
    times.maybe_append(1, 0)   # each index now holds one page of real disk; the rest is sparse
    fill(where)
    for name, index, add in (("offset", offsets, lambda i: offsets.append(i, i)),
                             ("time", times, lambda i: times.maybe_append(i + 1, i))):
        i = 1
        while True:
            try:
                add(i)
            except OSError as e:
                print(name, index.entries, errno.errorcode[e.errno], e.filename == index.path)
                break
            i += 1
        assert index.entries == i  # unchanged by the failed entry; the last one is readable
        assert index.lookup(i - 1) == (i - 1, i - 1) if name == "offset" else index.lookup(i) == (i, i - 1)
    # A dropped index is left as after a crash; the time index's cut-short entry was zeroed.
    path = times.path
    del times
    print("reopened", TimeIndex(path, 0, 1 << 20, writable=False).entries)
""")


def test_index_entries_on_a_full_filesystem_raise_enospc_instead_of_sigbus(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tmpfs.mounted(str(tmp_path / "disk"), 256) as disk:
        child = subprocess.run([sys.executable, "-c", INDEX_ON_A_FULL_DISK.format(root=root), disk],
                               capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, f"exit {child.returncode} (-7 is SIGBUS): {child.stderr[-2000:]}"
    # Entries that land in the page already allocated succeed; the first in a new page fails.
    # The 342nd time index entry straddles the page boundary: cut short, zeroed, not counted.
    assert child.stdout.split("\n")[:3] == ["offset 512 ENOSPC True", "time 341 ENOSPC True",
                                            "reopened 341"]


def test_a_log_on_a_full_filesystem_raises_and_keeps_every_append_that_succeeded(tmp_path):
    with tmpfs.mounted(str(tmp_path / "disk"), 384) as disk:
        channel = LogDirFailureChannel(on_offline=lambda d, m: None)
        log = Log(os.path.join(disk, "t-0"), LogConfig(index_interval_bytes=256), failure_channel=channel)
        appended = 0
        with pytest.raises(KafkaStorageError) as failed:
            for _ in range(10_000):
                log.append_as_leader(records(20, tag=appended), 0)
                appended += 20
        assert failed.value.errno == errno.ENOSPC and channel.is_offline(disk)
        assert log.log_end_offset == appended > 0
        # A short write was cut off again: the file holds exactly the appends that succeeded.
        assert os.path.getsize(log.active_segment.log_path) == log.active_segment.size
        tmpfs.resize(disk, 4096)  # space returns
        log.close()
        again = Log(os.path.join(disk, "t-0"), LogConfig(index_interval_bytes=256),
                    had_clean_shutdown=False)
        assert again.log_end_offset == appended and again.truncated_on_load == 0
        again.append_as_leader(records(5), 0)
        assert again.log_end_offset == appended + 5
        again.close()

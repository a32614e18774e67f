
from ext.batch import build_batch

BASE_TS = 1_700_000_000_000


def producer_batch(n: int = 10, ts: int = BASE_TS, value_size: int = 100, key: bytes | None = b"k",
                   compression: int = 0, tag: int = 0) -> bytearray:
    """A batch as a producer sends it: base offset 0, n records with distinct values."""
    records = [
        (key, (b"%d-%d-" % (tag, i)).ljust(value_size, b"x"), [("h", b"v")], ts + i)
        for i in range(n)
    ]
    return bytearray(build_batch(records, compression=compression))


def python_calls(fn) -> int:
    """How many Python-level function calls ``fn`` makes (C calls are not counted)."""
    import sys

    calls = 0

    def profiler(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls

"""ext.index: Kafka's offset and time indexes.

The semantic tests run twice, against the mmap-backed C index and against a list-backed
reference written from Kafka's documented behaviour (uvloop-style: one test class, two
implementations); the file tests (layout, preallocation, reopen, read-only) run against
the C index only. Hypothesis checks that lookups and truncations agree with bisect.
"""
import bisect
import io
import os
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ext.index
from ext.errors import InvalidIndexError
from ext.index import OffsetIndex, TimeIndex

INT32_MAX = 2**31 - 1


def test_native_module_loaded():
    assert ext.index.__file__.endswith(".so")
    assert OffsetIndex.__module__ == TimeIndex.__module__ == "ext.index"


# ---------------------------------------------------------------- reference


class RefOffsetIndex:
    """Kafka's OffsetIndex semantics over a Python list."""

    def __init__(self, base_offset, max_entries):
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.keys, self.values = [], []

    @property
    def entries(self):
        return len(self.keys)

    @property
    def is_full(self):
        return self.entries >= self.max_entries

    @property
    def last_offset(self):
        return self.keys[-1] if self.keys else self.base_offset

    def entry(self, n):
        if not 0 <= n < self.entries:
            raise IndexError(n)
        return self.keys[n], self.values[n]

    def lookup(self, target):
        i = bisect.bisect_right(self.keys, target) - 1
        return (self.keys[i], self.values[i]) if i >= 0 else (self.base_offset, 0)

    def append(self, offset, position):
        if self.is_full:
            raise InvalidIndexError("full")
        if self.keys and offset <= self.keys[-1]:
            raise InvalidIndexError("not increasing")
        if not 0 <= offset - self.base_offset <= INT32_MAX:
            raise InvalidIndexError("relative offset")
        self.keys.append(offset)
        self.values.append(position)

    def truncate_to(self, offset):
        n = bisect.bisect_left(self.keys, offset)
        del self.keys[n:], self.values[n:]

    def truncate(self):
        self.truncate_to(-1)


class RefTimeIndex:
    """Kafka's TimeIndex semantics over a Python list."""

    def __init__(self, base_offset, max_entries):
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.timestamps, self.offsets = [], []

    @property
    def entries(self):
        return len(self.timestamps)

    @property
    def is_full(self):
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self):
        if not self.timestamps:
            return -1, self.base_offset
        return self.timestamps[-1], self.offsets[-1]

    def entry(self, n):
        if not 0 <= n < self.entries:
            raise IndexError(n)
        return self.timestamps[n], self.offsets[n]

    def lookup(self, target):
        i = bisect.bisect_right(self.timestamps, target) - 1
        return (self.timestamps[i], self.offsets[i]) if i >= 0 else (-1, self.base_offset)

    def maybe_append(self, timestamp, offset, skip_full_check=False):
        if not skip_full_check and self.is_full:
            raise InvalidIndexError("full")
        last_timestamp, last_offset = self.last_entry
        if self.timestamps and offset < last_offset:
            raise InvalidIndexError("offset went back")
        if timestamp > last_timestamp:
            if self.entries >= self.max_entries:
                raise InvalidIndexError("no slot")
            if not 0 <= offset - self.base_offset <= INT32_MAX:
                raise InvalidIndexError("relative offset")
            self.timestamps.append(timestamp)
            self.offsets.append(offset)

    def truncate_to(self, offset):
        n = bisect.bisect_left(self.offsets, offset)
        del self.timestamps[n:], self.offsets[n:]

    def truncate(self):
        self.truncate_to(-1)


# ---------------------------------------------------------------- fixtures


def _path(tmp_path, base_offset, suffix):
    return str(tmp_path / f"{base_offset:020d}.{suffix}")


@pytest.fixture(params=["native", "reference"])
def offset_index(request, tmp_path):
    """make(base_offset, max_entries) -> an offset index of the parametrised kind."""
    made = []

    def make(base_offset=100, max_entries=64):
        if request.param == "reference":
            return RefOffsetIndex(base_offset, max_entries)
        index = OffsetIndex(_path(tmp_path, base_offset, "index"), base_offset, max_entries * 8)
        made.append(index)
        return index

    yield make
    for index in made:
        index.close()


@pytest.fixture(params=["native", "reference"])
def time_index(request, tmp_path):
    made = []

    def make(base_offset=100, max_entries=64):
        if request.param == "reference":
            return RefTimeIndex(base_offset, max_entries)
        index = TimeIndex(_path(tmp_path, base_offset, "timeindex"), base_offset,
                          max_entries * 12)
        made.append(index)
        return index

    yield make
    for index in made:
        index.close()


# ---------------------------------------------------------------- offset index semantics


class TestOffsetIndexSemantics:
    def filled(self, make):
        index = make(100)
        for offset, position in [(110, 1000), (120, 2000), (130, 3000)]:
            index.append(offset, position)
        return index

    def test_empty_lookup_returns_base_offset_and_position_zero(self, offset_index):
        index = offset_index(100)
        assert index.entries == 0
        assert index.last_offset == 100
        assert index.lookup(100) == (100, 0)
        assert index.lookup(10**12) == (100, 0)

    def test_lookup_at_entry(self, offset_index):
        index = self.filled(offset_index)
        assert index.lookup(110) == (110, 1000)
        assert index.lookup(120) == (120, 2000)
        assert index.lookup(130) == (130, 3000)

    def test_lookup_between_entries_returns_floor(self, offset_index):
        index = self.filled(offset_index)
        assert index.lookup(111) == (110, 1000)
        assert index.lookup(129) == (120, 2000)

    def test_lookup_before_first_entry_returns_base(self, offset_index):
        index = self.filled(offset_index)
        assert index.lookup(109) == (100, 0)
        assert index.lookup(100) == (100, 0)
        assert index.lookup(5) == (100, 0)
        assert index.lookup(-(2**63)) == (100, 0)

    def test_lookup_after_last_entry_returns_last(self, offset_index):
        index = self.filled(offset_index)
        assert index.lookup(131) == (130, 3000)
        assert index.lookup(2**63 - 1) == (130, 3000)

    def test_entry_and_last_offset(self, offset_index):
        index = self.filled(offset_index)
        assert [index.entry(n) for n in range(3)] == [(110, 1000), (120, 2000), (130, 3000)]
        assert index.last_offset == 130
        with pytest.raises(IndexError):
            index.entry(3)
        with pytest.raises(IndexError):
            index.entry(-1)

    @pytest.mark.parametrize("offset", [130, 129, 110])
    def test_append_rejects_offset_not_larger_than_last(self, offset_index, offset):
        index = self.filled(offset_index)
        with pytest.raises(InvalidIndexError):
            index.append(offset, 9999)
        assert index.entries == 3

    @pytest.mark.parametrize("offset", [99, 100 + INT32_MAX + 1])
    def test_append_rejects_offset_outside_relative_range(self, offset_index, offset):
        index = offset_index(100)
        with pytest.raises(InvalidIndexError):
            index.append(offset, 0)
        assert index.entries == 0

    def test_append_at_base_offset_is_allowed(self, offset_index):
        index = offset_index(100)
        index.append(100, 0)
        index.append(100 + INT32_MAX, 5)
        assert index.lookup(100 + INT32_MAX) == (100 + INT32_MAX, 5)

    def test_append_rejects_full_index(self, offset_index):
        index = offset_index(0, max_entries=3)
        for n in range(3):
            assert not index.is_full
            index.append(n + 1, n)
        assert index.is_full
        with pytest.raises(InvalidIndexError):
            index.append(10, 10)
        assert index.entries == 3

    def test_truncate_to_entry_offset_drops_it_and_later(self, offset_index):
        index = self.filled(offset_index)
        index.truncate_to(120)
        assert index.entries == 1
        assert index.last_offset == 110
        assert index.lookup(125) == (110, 1000)

    def test_truncate_to_between_entries_keeps_floor(self, offset_index):
        index = self.filled(offset_index)
        index.truncate_to(125)
        assert index.entries == 2
        assert index.last_offset == 120

    def test_truncate_to_before_first_drops_all(self, offset_index):
        index = self.filled(offset_index)
        index.truncate_to(110)
        assert index.entries == 0
        assert index.lookup(200) == (100, 0)

    def test_truncate_to_past_last_keeps_all(self, offset_index):
        index = self.filled(offset_index)
        index.truncate_to(131)
        assert index.entries == 3
        index.truncate_to(10**15)
        assert index.entries == 3

    def test_append_after_truncate_reuses_slots(self, offset_index):
        index = self.filled(offset_index)
        index.truncate_to(120)
        index.append(115, 1500)
        assert [index.entry(n) for n in range(2)] == [(110, 1000), (115, 1500)]

    def test_truncate_drops_everything(self, offset_index):
        index = self.filled(offset_index)
        index.truncate()
        assert index.entries == 0
        assert index.last_offset == 100


# ---------------------------------------------------------------- time index semantics


class TestTimeIndexSemantics:
    def filled(self, make):
        index = make(100)
        for timestamp, offset in [(1000, 101), (2000, 105), (3000, 105), (4000, 120)]:
            index.maybe_append(timestamp, offset)
        return index

    def test_empty(self, time_index):
        index = time_index(100)
        assert index.entries == 0
        assert index.last_entry == (-1, 100)
        assert index.lookup(10**15) == (-1, 100)

    def test_lookup_at_between_before_after(self, time_index):
        index = self.filled(time_index)
        assert index.lookup(2000) == (2000, 105)
        assert index.lookup(2999) == (2000, 105)
        assert index.lookup(999) == (-1, 100)
        assert index.lookup(-(2**63)) == (-1, 100)
        assert index.lookup(10**15) == (4000, 120)

    def test_maybe_append_ignores_timestamp_not_greater_than_last(self, time_index):
        index = self.filled(time_index)
        index.maybe_append(4000, 130)
        index.maybe_append(3500, 130)
        assert index.entries == 4
        assert index.last_entry == (4000, 120)
        index.maybe_append(4001, 130)
        assert index.last_entry == (4001, 130)

    def test_maybe_append_allows_equal_offset(self, time_index):
        index = self.filled(time_index)
        index.maybe_append(5000, 120)
        assert index.last_entry == (5000, 120)

    def test_maybe_append_rejects_smaller_offset_even_if_not_appending(self, time_index):
        index = self.filled(time_index)
        with pytest.raises(InvalidIndexError):
            index.maybe_append(5000, 119)
        with pytest.raises(InvalidIndexError):
            index.maybe_append(10, 119)
        assert index.entries == 4

    def test_empty_index_never_appends_no_timestamp(self, time_index):
        index = time_index(100)
        index.maybe_append(-1, 100)
        assert index.entries == 0
        index.maybe_append(0, 100)
        assert index.entries == 1

    def test_is_full_reserves_one_slot_for_the_roll_entry(self, time_index):
        index = time_index(0, max_entries=3)
        index.maybe_append(10, 1)
        assert not index.is_full
        index.maybe_append(20, 2)
        assert index.is_full
        with pytest.raises(InvalidIndexError):
            index.maybe_append(30, 3)
        index.maybe_append(30, 3, skip_full_check=True)
        assert index.entries == 3
        assert index.last_entry == (30, 3)
        with pytest.raises(InvalidIndexError):
            index.maybe_append(40, 4, skip_full_check=True)
        assert index.entries == 3

    def test_truncate_to_drops_entries_with_offset_at_or_above(self, time_index):
        index = self.filled(time_index)
        index.truncate_to(105)   # both entries at offset 105 go, however the run is split
        assert index.entries == 1
        assert index.last_entry == (1000, 101)
        index.maybe_append(1500, 103)
        assert index.last_entry == (1500, 103)

    def test_truncate_to_between_entries(self, time_index):
        index = self.filled(time_index)
        index.truncate_to(110)
        assert index.entries == 3
        assert index.last_entry == (3000, 105)
        index.truncate_to(101)
        assert index.entries == 0
        assert index.last_entry == (-1, 100)


# ---------------------------------------------------------------- hypothesis vs bisect


offsets_strategy = st.lists(st.integers(0, 10**6), max_size=300, unique=True).map(sorted)


@settings(max_examples=150, deadline=None)
@given(relatives=offsets_strategy,
       targets=st.lists(st.integers(-10, 10**6 + 10), max_size=100),
       cut=st.integers(-10, 10**6 + 10))
def test_offset_index_agrees_with_reference(tmp_path_factory, relatives, targets, cut):
    base = 5000
    path = str(tmp_path_factory.mktemp("h") / "00000000000000005000.index")
    native, reference = OffsetIndex(path, base, 8 * 400), RefOffsetIndex(base, 400)
    try:
        for n, rel in enumerate(relatives):
            native.append(base + rel, n * 7)
            reference.append(base + rel, n * 7)
        probe = targets + [base + r for r in relatives] + [base + r - 1 for r in relatives]
        for target in probe:
            assert native.lookup(base + target) == reference.lookup(base + target)
            assert native.lookup(target) == reference.lookup(target)
        native.truncate_to(base + cut)
        reference.truncate_to(base + cut)
        assert native.entries == reference.entries
        assert native.last_offset == reference.last_offset
        for target in probe:
            assert native.lookup(base + target) == reference.lookup(base + target)
    finally:
        native.close()


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3)), max_size=300),
       targets=st.lists(st.integers(-5, 20000), max_size=100),
       cut=st.integers(0, 2000))
def test_time_index_agrees_with_reference(tmp_path_factory, steps, targets, cut):
    base = 0
    path = str(tmp_path_factory.mktemp("h") / "00000000000000000000.timeindex")
    native, reference = TimeIndex(path, base, 12 * 400), RefTimeIndex(base, 400)
    try:
        timestamp, offset = 0, 0
        for dt, doffset in steps:
            timestamp, offset = timestamp + dt, offset + doffset
            native.maybe_append(timestamp, offset)
            reference.maybe_append(timestamp, offset)
        assert native.entries == reference.entries
        assert native.last_entry == reference.last_entry
        probe = targets + [t for t in reference.timestamps] + [t - 1 for t in reference.timestamps]
        for target in probe:
            assert native.lookup(target) == reference.lookup(target)
        native.truncate_to(cut)
        reference.truncate_to(cut)
        assert native.entries == reference.entries
        assert native.last_entry == reference.last_entry
    finally:
        native.close()


def test_lookup_in_large_index_uses_warm_and_cold_sections(tmp_path):
    # 10k entries span the warm section (the last 8 KiB: entries 8975..9999) and the cold
    # part before it; the probes straddle its first entry.
    path = _path(tmp_path, 0, "index")
    with OffsetIndex(path, 0, 8 * 10_000) as index:
        for n in range(10_000):
            index.append(10 * n + 1, n)
        for target in [0, 1, 2, 10 * 5000 + 1, 10 * 8974 + 1, 10 * 8975, 10 * 8975 + 1,
                       10 * 8975 + 2, 10 * 8976, 10 * 8976 + 1, 10 * 9999 + 1, 10**9]:
            expected = (0, 0) if target < 1 else (10 * min((target - 1) // 10, 9999) + 1,
                                                 min((target - 1) // 10, 9999))
            assert index.lookup(target) == expected, target


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), seed=st.integers(0, 2**32 - 1),
       extra=st.lists(st.integers(-5, 3 * 3000 + 5), max_size=50))
def test_large_indexes_agree_with_reference_across_the_warm_boundary(tmp_path_factory, n,
                                                                     seed, extra):
    rng = random.Random(seed)
    relatives = sorted(rng.sample(range(3 * n), n))
    timestamps = sorted(rng.sample(range(10**6), n))
    directory = tmp_path_factory.mktemp("big")
    offsets = OffsetIndex(str(directory / "0.index"), 0, 8 * n)
    times = TimeIndex(str(directory / "0.timeindex"), 0, 12 * (n + 1))
    ref_offsets, ref_times = RefOffsetIndex(0, n), RefTimeIndex(0, n + 1)
    try:
        for rel, ts in zip(relatives, timestamps, strict=True):
            offsets.append(rel, rel * 2)
            ref_offsets.append(rel, rel * 2)
            times.maybe_append(ts, rel)
            ref_times.maybe_append(ts, rel)
        for key in relatives + [r - 1 for r in relatives] + extra:
            assert offsets.lookup(key) == ref_offsets.lookup(key)
        for key in timestamps + [t - 1 for t in timestamps] + extra:
            assert times.lookup(key) == ref_times.lookup(key)
    finally:
        offsets.close()
        times.close()


# ---------------------------------------------------------------- files


def _raw(path):
    with open(path, "rb") as f:
        return f.read()


class TestOffsetIndexFile:
    def test_new_index_is_preallocated_to_whole_entries(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        index = OffsetIndex(path, 0, 1001)
        assert os.path.getsize(path) == 1000
        assert index.max_entries == 125
        assert index.entries == 0
        index.close()

    def test_byte_layout_matches_kafka(self, tmp_path):
        path = _path(tmp_path, 1000, "index")
        entries = [(1000, 0), (1017, 4096), (1000 + INT32_MAX, INT32_MAX)]
        with OffsetIndex(path, 1000) as index:
            for offset, position in entries:
                index.append(offset, position)
            index.flush()
            expected = b"".join(struct.pack(">ii", o - 1000, p) for o, p in entries)
            assert _raw(path)[:24] == expected
            assert index.size_in_bytes == 24
        assert _raw(path) == expected     # close trims to the entries

    def test_reopen_after_clean_close_has_exact_entries(self, tmp_path):
        path = _path(tmp_path, 50, "index")
        with OffsetIndex(path, 50, 8 * 100) as index:
            for n in range(10):
                index.append(50 + 3 * n, 100 * n)
        assert os.path.getsize(path) == 80
        index = OffsetIndex(path, 50, 8 * 100)
        assert index.entries == 10
        assert index.max_entries == 10    # an existing file keeps its size
        assert index.is_full
        assert [index.entry(n) for n in range(10)] == [(50 + 3 * n, 100 * n) for n in range(10)]
        index.resize(8 * 100)
        index.append(1000, 5000)
        assert index.entries == 11
        index.close()

    def test_reopen_after_unclean_close_ignores_zero_tail(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        index = OffsetIndex(path, 0, 8 * 100)
        for n in range(1, 8):
            index.append(n * 10, n * 4096)
        index.flush()
        del index                        # no trim: the file stays preallocated
        assert os.path.getsize(path) == 800
        index = OffsetIndex(path, 0, 8 * 100)
        assert index.entries == 7
        assert index.max_entries == 100
        assert index.last_offset == 70
        assert index.lookup(45) == (40, 4 * 4096)
        index.append(80, 8 * 4096)
        index.close()
        assert os.path.getsize(path) == 64

    def test_unclean_close_with_first_entry_at_base_offset_position_zero(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        index = OffsetIndex(path, 0, 8 * 100)
        index.append(0, 0)                # an all-zero entry followed by greater keys
        index.append(5, 100)
        del index
        index = OffsetIndex(path, 0, 8 * 100)
        assert index.entries == 2
        assert index.entry(0) == (0, 0)
        index.close()

    def test_reopen_of_untouched_preallocated_file_is_empty(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        del_me = OffsetIndex(path, 0, 8 * 100)
        del del_me
        index = OffsetIndex(path, 0, 8 * 100)
        assert index.entries == 0
        assert index.lookup(10) == (0, 0)
        index.close()

    def test_reopen_counts_strictly_increasing_prefix(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        with open(path, "wb") as f:
            f.write(struct.pack(">ii", 1, 10) + struct.pack(">ii", 3, 30)
                    + struct.pack(">ii", 2, 20) + struct.pack(">ii", 9, 90))
        with OffsetIndex(path, 0) as index:
            assert index.entries == 2
            assert index.max_entries == 4

    def test_trim_to_valid_size_and_resize(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        index = OffsetIndex(path, 0, 8 * 100)
        index.append(1, 1)
        index.append(2, 2)
        index.trim_to_valid_size()
        assert os.path.getsize(path) == 16
        assert index.max_entries == 2
        assert index.is_full
        index.resize(8 * 10 + 5)
        assert os.path.getsize(path) == 80
        assert index.max_entries == 10
        assert [index.entry(n) for n in range(2)] == [(1, 1), (2, 2)]
        index.append(3, 3)
        with pytest.raises(InvalidIndexError):
            index.resize(8)              # would cut off entries
        index.close()
        assert _raw(path) == struct.pack(">iiiiii", 1, 1, 2, 2, 3, 3)

    def test_sanity_check(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        with OffsetIndex(path, 0, 800) as index:
            index.append(1, 1)
            index.sanity_check()
        bad = _path(tmp_path, 1, "index")
        with open(bad, "wb") as f:
            f.write(struct.pack(">ii", 1, 1) + b"\x00\x00\x00")
        with OffsetIndex(bad, 1) as index:
            assert index.entries == 1
            with pytest.raises(InvalidIndexError, match="multiple of 8"):
                index.sanity_check()
        negative = _path(tmp_path, 2, "index")
        with open(negative, "wb") as f:
            f.write(struct.pack(">ii", -5, 1))
        with OffsetIndex(negative, 2, writable=False) as index:
            with pytest.raises(InvalidIndexError, match="less than the base offset"):
                index.sanity_check()

    def test_read_only_open(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        with OffsetIndex(path, 0, 8 * 100) as index:
            for n in range(1, 6):
                index.append(n * 10, n * 100)
            index.flush()
            size_before = os.path.getsize(path)
            reader = OffsetIndex(path, 0, 8 * 100, writable=False)
            assert os.path.getsize(path) == size_before
            assert reader.entries == 5
            assert reader.lookup(35) == (30, 300)
            for mutate in (lambda: reader.append(60, 600), lambda: reader.truncate_to(0),
                           reader.truncate, reader.trim_to_valid_size,
                           lambda: reader.resize(8)):
                with pytest.raises(io.UnsupportedOperation):
                    mutate()
            reader.flush()
            reader.close()
            assert os.path.getsize(path) == size_before   # read-only close does not trim

    def test_read_only_open_never_creates(self, tmp_path):
        with pytest.raises(FileNotFoundError):
            OffsetIndex(_path(tmp_path, 0, "index"), 0, writable=False)
        assert not os.listdir(tmp_path)

    def test_empty_existing_file(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        open(path, "wb").close()
        with OffsetIndex(path, 0, writable=False) as index:
            assert index.entries == 0 and index.max_entries == 0
            assert index.lookup(5) == (0, 0)
        with OffsetIndex(path, 0) as index:
            assert index.is_full
            index.resize(80)
            index.append(1, 1)

    def test_closed_index_raises(self, tmp_path):
        index = OffsetIndex(_path(tmp_path, 0, "index"), 0, 80)
        index.append(1, 1)
        index.close()
        index.close()
        for call in (lambda: index.lookup(1), lambda: index.entry(0), lambda: index.last_offset,
                     lambda: index.append(2, 2), index.flush, index.sanity_check):
            with pytest.raises(ValueError, match="closed"):
                call()

    def test_rename(self, tmp_path):
        path = _path(tmp_path, 0, "index")
        index = OffsetIndex(path, 0, 80)
        index.append(1, 1)
        new_path = path + ".deleted"
        index.rename(new_path)
        assert index.path == new_path
        assert not os.path.exists(path)
        index.append(2, 2)
        index.close()
        assert _raw(new_path) == struct.pack(">iiii", 1, 1, 2, 2)

    def test_negative_base_offset_rejected(self, tmp_path):
        with pytest.raises(ValueError):
            OffsetIndex(_path(tmp_path, 0, "index"), -1)


class TestTimeIndexFile:
    def test_byte_layout_matches_kafka(self, tmp_path):
        path = _path(tmp_path, 1000, "timeindex")
        entries = [(1_700_000_000_000, 1000), (1_700_000_000_500, 1042), (2**62, 1043)]
        with TimeIndex(path, 1000, 1000) as index:
            assert os.path.getsize(path) == 996
            assert index.max_entries == 83
            for timestamp, offset in entries:
                index.maybe_append(timestamp, offset)
            assert index.size_in_bytes == 36
        assert _raw(path) == b"".join(struct.pack(">qi", t, o - 1000) for t, o in entries)

    def test_reopen_after_clean_close(self, tmp_path):
        path = _path(tmp_path, 7, "timeindex")
        with TimeIndex(path, 7) as index:
            for n in range(5):
                index.maybe_append(100 * (n + 1), 7 + n)
        with TimeIndex(path, 7) as index:
            assert index.entries == 5
            assert index.last_entry == (500, 11)
            assert index.lookup(250) == (200, 8)

    def test_reopen_after_unclean_close_ignores_zero_tail(self, tmp_path):
        path = _path(tmp_path, 7, "timeindex")
        index = TimeIndex(path, 7, 12 * 50)
        for n in range(5):
            index.maybe_append(100 * (n + 1), 7 + n)
        del index
        assert os.path.getsize(path) == 600
        with TimeIndex(path, 7, 12 * 50) as index:
            assert index.entries == 5
            assert index.max_entries == 50
            assert index.last_entry == (500, 11)
            index.maybe_append(600, 20)
            assert index.entries == 6

    def test_read_only_open(self, tmp_path):
        path = _path(tmp_path, 0, "timeindex")
        with TimeIndex(path, 0) as index:
            index.maybe_append(10, 1)
        with TimeIndex(path, 0, writable=False) as index:
            assert index.last_entry == (10, 1)
            assert index.lookup(11) == (10, 1)
            with pytest.raises(io.UnsupportedOperation):
                index.maybe_append(20, 2)

    def test_sanity_check(self, tmp_path):
        path = _path(tmp_path, 0, "timeindex")
        with open(path, "wb") as f:
            f.write(struct.pack(">qi", 10, 1) + b"\x01")
        with TimeIndex(path, 0, writable=False) as index:
            assert index.entries == 1
            with pytest.raises(InvalidIndexError, match="multiple of 12"):
                index.sanity_check()

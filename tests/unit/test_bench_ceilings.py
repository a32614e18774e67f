"""bench.e2e.ceilings at tiny sizes: every figure is there, a positive finite float; no files left."""
import math
import os

import pytest

from bench.e2e import ceilings

pytestmark = pytest.mark.timeout(30)

KEYS = {"memcpy_gb_s", "loopback_tcp_gb_s", "sendfile_gb_s", "fsync_per_s", "fsync_p99_ms",
        "rtt_100b_p50_us", "rtt_100b_p99_us", "page_cache_new_gb_s", "page_cache_overwrite_gb_s"}


def positive(value):
    return isinstance(value, float) and math.isfinite(value) and value > 0


def test_memcpy():
    assert positive(ceilings.memcpy_gb_s(0.02, nbytes=1 << 20))


@pytest.mark.processes
def test_loopback_tcp():
    assert positive(ceilings.loopback_tcp_gb_s(0.1))


@pytest.mark.processes
def test_sendfile_removes_its_file(tmp_path):
    assert positive(ceilings.sendfile_gb_s(0.1, str(tmp_path), file_bytes=3 << 20))
    assert os.listdir(tmp_path) == []


def test_fsync_removes_its_file(tmp_path):
    out = ceilings.fsync(0.05, str(tmp_path))
    assert set(out) == {"fsync_per_s", "fsync_p99_ms"}
    assert all(positive(v) for v in out.values())
    assert os.listdir(tmp_path) == []


def test_page_cache_writes_stop_at_the_limit_and_remove_their_file(tmp_path):
    out = ceilings.page_cache_writes(10.0, str(tmp_path), limit_bytes=4 << 20)
    assert set(out) == {"page_cache_new_gb_s", "page_cache_overwrite_gb_s"}
    assert all(positive(v) for v in out.values())
    assert os.listdir(tmp_path) == []


@pytest.mark.processes
def test_rtt_stops_at_max_trips():
    out = ceilings.rtt_100b(10.0, max_trips=200)
    assert set(out) == {"rtt_100b_p50_us", "rtt_100b_p99_us"}
    assert all(positive(v) for v in out.values())
    assert out["rtt_100b_p50_us"] <= out["rtt_100b_p99_us"]


@pytest.mark.processes
def test_measure(tmp_path, monkeypatch):
    monkeypatch.setattr(ceilings, "MEMCPY_BYTES", 1 << 20)
    monkeypatch.setattr(ceilings, "SENDFILE_FILE_BYTES", 2 << 20)
    monkeypatch.setattr(ceilings, "PAGE_CACHE_LIMIT", 2 << 20)
    out = ceilings.measure(0.05, str(tmp_path))
    assert set(out) == KEYS
    assert all(positive(v) for v in out.values()), out
    assert os.listdir(tmp_path) == []

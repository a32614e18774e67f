"""The live fuzz (tests/fuzz/live.py) against a real node: 14,000 mutated frames over many
connections to its broker and controller listeners, a quarter of them over TLS to its SASL_SSL
listener without authenticating (only ApiVersions and the SASL handshake may be answered there,
and after a SaslHandshake v0 the bare SASL tokens that follow it),
while a confluent-kafka client produces and consumes on the PLAINTEXT listener and another on
the SASL_SSL one. ``make fuzz`` runs 1,000,000."""
from __future__ import annotations

import asyncio

import pytest

from tests.fuzz.live import run

pytest.importorskip("confluent_kafka")
pytestmark = [pytest.mark.timeout(300)]

RSS_GROWTH_MAX = 256 << 20  # the node's memory may grow by this much under the fuzz, no more


def check(report) -> None:
    text = "\n".join(report.lines())
    assert report.crashes == 0, text
    assert report.hangs == 0, text
    assert report.tracebacks == 0 and report.errors == 0, text
    assert report.stray_lines == 0, text  # no line a client could forge (a newline in what it sent)
    for healthy in (report.healthy, report.healthy_sasl):  # PLAINTEXT, and SASL_SSL with PLAIN
        assert healthy.acked > 0 and healthy.failed == 0, text
        assert healthy.read == healthy.acked, text
    assert report.sasl_frames > 0 and report.sasl_responses > 0, text
    assert report.sasl_answered_other == 0 and report.sasl_unmatched == 0, text
    assert report.sasl_v0_handshakes > 0, text  # the SaslHandshake v0 path was taken and checked
    assert report.sasl_raw_answered > 0, text  # and its bare tokens answered bare, through every wrapper
    assert report.rss_peak - report.rss_start < RSS_GROWTH_MAX, text


def test_mutated_frames_leave_the_node_alive_serving_and_its_log_clean(tmp_path):
    report = asyncio.run(run(frames=14000, seed=13, connections=8, base_dir=str(tmp_path)))
    print("\n".join(report.lines()))
    assert report.frames >= 14000 and report.recorded > 0
    check(report)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_frames_heavy(tmp_path, seed):
    check(asyncio.run(run(frames=200000, seed=seed, connections=8, base_dir=str(tmp_path))))

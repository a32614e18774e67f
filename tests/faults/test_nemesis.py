"""The nemesis's pure parts: seeded schedules, and reading the file a refusing broker names."""
from tests.faults.nemesis import KINDS, PROCESS_KINDS, _paths_in, schedule


def test_a_schedule_is_a_function_of_its_seed_kinds_and_length():
    assert schedule(7, list(KINDS), 60) == schedule(7, list(KINDS), 60)
    assert schedule(7, list(KINDS), 60) != schedule(8, list(KINDS), 60)


def test_faults_overlap_only_as_a_process_fault_riding_on_a_network_fault():
    for seed in range(200):
        faults = schedule(seed, list(KINDS), 120)
        assert [f.at for f in faults] == sorted(f.at for f in faults)
        assert all(f.at + f.duration <= 120 for f in faults)
        for a, b in zip(faults, faults[1:]):
            if b.at < a.at + a.duration:
                assert a.kind not in PROCESS_KINDS and b.kind in PROCESS_KINDS, (seed, a, b)


def test_the_file_a_refusal_names_is_found_without_its_line_number():
    line = ("ERROR strom.broker: broker 5 failed: /tmp/q/broker-5/data/replication-offset-checkpoint:8: "
            "malformed offset checkpoint: 'jepsen 2 140:'")
    assert _paths_in(line) == ["/tmp/q/broker-5/data/replication-offset-checkpoint"]
    assert _paths_in("cannot read '/tmp/q/meta.properties' (bad)") == ["/tmp/q/meta.properties"]

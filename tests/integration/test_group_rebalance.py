"""Every client: a group of 3 consumers rebalances when one leaves and when one joins, with
every partition owned by exactly one member.

Each driver's ``GroupMember`` (tests/integration/clients/__init__.py) is a long-lived
member whose assignment is what the client itself reported at its latest rebalance. The
group is balanced when every member owns at least one partition and the members' sets are
disjoint and cover the topic, and stays so for ``STABLE_S`` (so a snapshot taken halfway
through a rebalance does not count). Each client takes about 5-7 s, so all five run in
the default suite.
"""
import time
import uuid

import pytest

from .clients import DRIVERS, driver
from .clients import confluent as reference

pytestmark = [
    pytest.mark.timeout(240),
]

PARTITIONS = 6
BALANCE_TIMEOUT_S = 45.0
STABLE_S = 1.0


def _client_param(name):
    module = driver(name)
    return pytest.param(module, id=name, marks=pytest.mark.skipif(
        not module.AVAILABLE, reason=f"{name} is not installed (make setup installs it)"))


CLIENTS = [_client_param(name) for name in DRIVERS]


def _owned(members):
    return [m.assignment() for m in members]


def _is_balanced(owned):
    every = [p for mine in owned for p in mine]
    return all(owned) and sorted(every) == list(range(PARTITIONS))


def wait_balanced(members, what, node=None, group=None, timeout=BALANCE_TIMEOUT_S):
    """Until the members' assignments stay balanced for ``STABLE_S``; fail with what each
    member reported, and what the coordinator logged of ``group``, otherwise. Returns the
    assignments."""
    deadline = time.monotonic() + timeout
    since = None
    while True:
        owned = _owned(members)
        now = time.monotonic()
        if _is_balanced(owned):
            since = since if since is not None else now
            if now - since >= STABLE_S:
                return owned
        else:
            since = None
        if now >= deadline:
            reports = "\n".join(f"  member {i}: owns {sorted(mine)}; {m.history()}"
                                for i, (m, mine) in enumerate(zip(members, owned)))
            coordinator = _group_log(node, group)
            pytest.fail(f"{what}: not balanced over {PARTITIONS} partitions in {timeout} s\n{reports}"
                        f"\n  the coordinator's log of the group:\n{coordinator}")
        time.sleep(0.1)


def _group_log(node, group, lines=40) -> str:
    if node is None:
        return "    (not given)"
    with open(node.log_path, errors="replace") as f:
        mine = [line.rstrip() for line in f if f"group {group}" in line]
    return "\n".join("    " + line for line in mine[-lines:]) or "    (nothing)"


@pytest.mark.parametrize("client", CLIENTS)
def test_group_rebalances_when_members_leave_and_join(shared_node, client):
    bootstrap = shared_node.bootstrap
    topic = f"t-{uuid.uuid4().hex[:12]}"
    group = f"g-{topic}"
    reference.create_topic(bootstrap, topic, partitions=PARTITIONS)
    reference.produce(bootstrap, topic, [(None, f"m-{p}-{i}".encode(), [], p)
                                         for p in range(PARTITIONS) for i in range(3)])
    members = []
    try:
        for _ in range(3):
            members.append(client.GroupMember().start(bootstrap, topic, group))
        wait_balanced(members, "3 members", shared_node, group)

        members.pop(0).close()  # leaves the group
        wait_balanced(members, "2 members after one left", shared_node, group)

        members.append(client.GroupMember().start(bootstrap, topic, group))
        wait_balanced(members, "3 members after one joined", shared_node, group)
    finally:
        errors = close_all(members)
    assert not errors, f"members that did not leave cleanly: {errors}"


def close_all(members) -> list[str]:
    """Close every member (each bounded; process members are killed if they hang)."""
    errors = []
    for member in members:
        try:
            member.close()
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
    return errors

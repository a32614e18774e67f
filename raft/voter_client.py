"""The replica's own voter changes (KIP-853): admin RPCs it sends to the leader itself.

Automatic endpoint discovery: a voter sends UpdateRaftVoter (its listeners and its kraft.version
range) to each new leader — at start and whenever (leader, epoch) changes — until that leader
acknowledges it. Only a follower sends it. With kraft.version 1 the leader writes the change to
the voter set in the log; with kraft.version 0 it only learns this voter's directory id and
range, which an upgrade to kraft.version 1 needs (raft/kraft_upgrade.py).

Auto-join (``controller.quorum.auto.join.enable``): a controller that is an observer (its replica
key, id and directory id, is not in the voter set) first removes the voter with its id and
another directory id, if any (RemoveRaftVoter: that disk was replaced), then adds itself
(AddRaftVoter with a 30 s timeout). The voter set changes through the log, so after each attempt
the task looks again after a backoff rather than trusting the answer.

One task runs both, woken by leader changes; failed attempts are retried with a backoff that
doubles from controller.quorum.retry.backoff.ms up to the fetch timeout.
"""
from __future__ import annotations

import asyncio
import logging

from . import messages as m
from .peers import ADMIN
from .quorum_state import Follower
from .voters import KRAFT_VERSION_MAX, KRAFT_VERSION_MIN, Voter

log = logging.getLogger("strom.raft")

AUTO_JOIN_TIMEOUT_MS = 30_000  # KIP-853: AddVoter's TimeoutMs for auto-join


class VoterClient:
    def __init__(self, driver) -> None:
        self.driver = driver
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.acknowledged: tuple[int, int] | None = None  # (leader, epoch) that acknowledged UpdateVoter
        self._backoff_ms = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="raft-voter-client")

    def wake(self) -> None:
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        q = self.driver.config.quorum
        while not self.driver.closed:
            self._wake.clear()
            retry = await self._maybe_update_voter()
            retry = await self._maybe_auto_join() or retry
            timeout = None
            if retry:
                self._backoff_ms = min(q.fetch_timeout_ms, max(q.retry_backoff_ms, self._backoff_ms * 2))
                timeout = self._backoff_ms / 1000
            else:
                self._backoff_ms = 0
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _maybe_update_voter(self) -> bool:
        """True to look again later."""
        d = self.driver
        c, core = d.config, d.core
        s = core.state
        if not isinstance(s, Follower) or not core.quorum.is_voter:
            return False
        if not c.endpoints:
            return False
        if self.acknowledged == (s.leader_id, s.epoch):
            return False
        voter = Voter(c.node_id, c.directory_id, c.endpoints, KRAFT_VERSION_MIN, KRAFT_VERSION_MAX)
        answer = await d.request(s.leader_id, m.UpdateVoterRequest(s.epoch, voter), ADMIN)
        if answer is not None and answer.error_code == m.NONE:
            self.acknowledged = (s.leader_id, s.epoch)
            return False
        log.info("raft: node %d: UpdateVoter to leader %d in epoch %d: %s", c.node_id, s.leader_id, s.epoch,
                 _outcome(answer))
        return True

    async def _maybe_auto_join(self) -> bool:
        d = self.driver
        c, core = d.config, d.core
        s = core.state
        if not c.auto_join or c.directory_id is None or not c.endpoints:
            return False
        if core.quorum.is_voter or not isinstance(s, Follower) or core.kraft_version < 1:
            return False
        stale = core.voter_set.get(c.node_id)
        if stale is not None and stale.directory_id != c.directory_id:
            request = m.RemoveVoterRequest(c.node_id, stale.directory_id)
        else:
            request = m.AddVoterRequest(Voter(c.node_id, c.directory_id, c.endpoints), AUTO_JOIN_TIMEOUT_MS)
        answer = await d.request(s.leader_id, request, ADMIN)
        log.info("raft: node %d auto-join: %s to leader %d: %s", c.node_id, type(request).__name__,
                 s.leader_id, _outcome(answer))
        return True


def _outcome(answer: m.VoterChangeResponse | None) -> str:
    if answer is None:
        return "no answer"
    if answer.error_code == m.NONE:
        return "done"
    return f"error {answer.error_code}" + (f": {answer.error_message}" if answer.error_message else "")

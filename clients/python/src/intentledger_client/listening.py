"""The tenant's results topic as one client reads it: which partitions (those its runs go
to), from where, and what was read before a call was there to take it.

A reader per partition, started once, at the end of its partition before the first proposal
that needs it is sent. While the topic does not exist (it is created with the tenant's first
answer), calls wait together and their partitions are read from the start once it does
(everything in a topic created after the client looked was written after it looked). What
went by before a call was registered — a resumed handle's answers, a duplicate's original's
settled states — is read again for that call alone (``catch_up``), up to where the live
reader is; the live reader takes everything after.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from intentledger_client.readers import PartitionReader, catch_up, partitions_of, when_it_exists
from intentledger_client.routing import Call, Router
from intentledger_client.topics import partition_for


class Listener:
    def __init__(self, options: dict[str, Any], topic: str) -> None:
        self._options = options
        self.topic = topic
        self.router = Router(on_duplicate=self.look_back)
        self._partitions: list[int] | None = None
        self._readers: dict[int, asyncio.Task[PartitionReader]] = {}
        self._homeless: list[Call] = []
        """Calls proposed while the topic did not exist: read from its start once it does."""
        self._adopting: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def start(self, admin: AIOKafkaAdminClient) -> None:
        self._admin = admin
        self._partitions = await partitions_of(admin, self.topic)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for started in self._readers.values():
            with contextlib.suppress(Exception):  # one that never started has nothing to stop
                await (await started).stop()

    @property
    def partitions(self) -> set[TopicPartition]:
        return {TopicPartition(self.topic, p) for p, t in self._readers.items() if t.done()}

    async def place(self, calls: list[Call], look_back_from: int | None = None) -> None:
        """Have the partition of the calls' run read (all of one run); each call's handle
        learns it and the offset its answers are from. With ``look_back_from``, what went by
        before is read again for them from there."""
        if self._partitions is None and self._adopting is None:
            found = await partitions_of(self._admin, self.topic)
            if self._partitions is None and self._adopting is None:  # still, after the await
                if found is None:
                    self._adopting = self._spawn(self._adopt_homeless())
                else:
                    self._partitions = found
        if self._partitions is None:  # read from the start once it exists, by the adopter
            self._homeless.extend(calls)
            return
        partition = partition_for(_states_run(calls[0]).encode(), self._partitions)
        reader = await self._reader(partition, at_end=True)
        for call in calls:
            call.placed(partition, reader.next_offset if look_back_from is None else None)
        if look_back_from is not None and look_back_from < reader.next_offset:
            self._catching_up(calls, self._catch_up(calls, reader, look_back_from))

    def _reader(self, partition: int, *, at_end: bool) -> asyncio.Task[PartitionReader]:
        """The partition's one reader, started once (again, if starting it failed: its error
        went to the calls that needed it, the next call tries anew)."""
        started = self._readers.get(partition)
        if started is None or (started.done() and (started.cancelled()
                                                   or started.exception() is not None)):
            started = asyncio.ensure_future(self._start_reader(partition, at_end))
            self._readers[partition] = started
        return started

    async def _start_reader(self, partition: int, at_end: bool) -> PartitionReader:
        reader = PartitionReader(AIOKafkaConsumer(**self._options, group_id=None,
                                                  enable_auto_commit=False),
                                 TopicPartition(self.topic, partition), self.router)
        await reader.start(at_end=at_end)
        return reader

    async def _adopt_homeless(self) -> None:
        """Once the topic exists, read each waiting call's partition from its start."""
        found = await when_it_exists(self._admin, self.topic, lambda: self._closed)
        if found is None:
            return
        homeless, self._homeless = self._homeless, []
        for partition in {partition_for(c.handle.run_id.encode(), found) for c in homeless}:
            self._reader(partition, at_end=False)  # before anyone can start one at the end
        self._partitions, self._adopting = found, None
        for call in homeless:
            partition = partition_for(call.handle.run_id.encode(), found)
            await self._readers[partition]
            call.placed(partition, None)

    def look_back(self, call: Call) -> None:
        """A duplicate: its original's states were read before, if ever, on the partition of
        the original's run (another than this call's when the key was first used in another
        run: that partition is read from now on too): from its start (its retention) up to
        where its live reader is."""
        if self._partitions is not None:
            partition = partition_for(_states_run(call).encode(), self._partitions)
            self._catching_up([call], self._look_back(call, partition))

    async def _look_back(self, call: Call, partition: int) -> None:
        reader = await self._reader(partition, at_end=True)
        await self._catch_up([call], reader, 0)

    async def _catch_up(self, calls: list[Call], reader: PartitionReader, start: int) -> None:
        consumer = AIOKafkaConsumer(**self._options, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await catch_up(consumer, reader.partition, self.router, calls, start, reader.next_offset)

    def _catching_up(self, calls: list[Call], work: Coroutine[Any, Any, None]) -> None:
        """A re-read for ``calls``, cancelled once they stop waiting (``Router.unregister``)."""
        task = self._spawn(work)
        for call in calls:
            call.catch_ups.add(task)
            task.add_done_callback(call.catch_ups.discard)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task


def _states_run(call: Call) -> str:
    """The run whose partition carries the call's states: its intent's (a duplicate's original
    may be another run's), else its own."""
    return call.handle.intent_run_id or call.handle.run_id

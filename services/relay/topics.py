"""Creating a tenant's results topic the first time the relay has an answer for it.

Tenants' topics are not known at start: the intake and the projection name
``agent.results.<tenant>`` for whichever tenant a run belongs to. A missing one is created
explicitly, with the family's partitions and configuration, before anything is published to
it: a broker that auto-creates topics would otherwise make it with its own default (one
partition here), and a secure broker refuses to auto-create at all (the relay's Kafka user
holds Create on the prefix ``agent.results.``, k8s/base/kafka-users.yaml). Only topics under
``creates_prefix`` are created; any other missing topic stays an error, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from shared.messaging.admin import ensure_results_topics

log = logging.getLogger(__name__)


class TopicCreator:
    def __init__(self, bootstrap: str, creates_prefix: str, replication: int = 1) -> None:
        self._bootstrap = bootstrap
        self._prefix = creates_prefix
        self._replication = replication
        self._known: set[str] = set()
        """Topics this process saw exist (or created): asked about once each."""

    async def ensure(self, topics: Iterable[str]) -> None:
        unknown = [topic for topic in dict.fromkeys(topics)
                   if topic.startswith(self._prefix) and topic not in self._known]
        if not unknown:
            return
        created = await ensure_results_topics(self._bootstrap, unknown, self._replication)
        if created:
            log.info("created results topics %s", ", ".join(created))
        self._known.update(unknown)

"""The relay creates a tenant's results topic before its first publish to it: only topics under
its prefix, each asked about once per process."""

from __future__ import annotations

from services.relay import topics
from services.relay.topics import TopicCreator


async def test_only_topics_under_the_prefix_are_created_and_each_is_asked_about_once(monkeypatch):
    asked: list[list[str]] = []

    async def ensure(bootstrap, names, replication):
        asked.append(list(names))
        return [name for name in names if name.endswith("new")]

    monkeypatch.setattr(topics, "ensure_results_topics", ensure)
    creator = TopicCreator("kafka:9092", "agent.results.", replication=3)
    await creator.ensure(["agent.results.acme", "ledger.intake", "agent.results.new",
                          "agent.results.acme"])
    await creator.ensure(["agent.results.acme", "agent.results.new", "ledger.intake"])
    await creator.ensure(["agent.results.globex"])
    assert asked == [["agent.results.acme", "agent.results.new"], ["agent.results.globex"]]

"""How long an inbox row must live: never less than the longest retention of the topics it
deduplicates, plus a margin; for ever if a topic keeps its records for ever."""

from shared.messaging.retention import RetentionSettings, horizon

SETTINGS = RetentionSettings(inbox_s=3600, inbox_margin_s=60, dead_letters_s=7)


def test_the_configured_age_holds_when_every_topic_keeps_less():
    assert horizon(SETTINGS, {"a": 600.0, "b": 1200.0}).inbox_s == 3600


def test_a_topic_kept_longer_than_the_configured_age_raises_the_horizon():
    assert horizon(SETTINGS, {"a": 600.0, "b": 86_400.0}).inbox_s == 86_400 + 60


def test_a_topic_kept_for_ever_keeps_the_inbox_for_ever():
    limits = horizon(SETTINGS, {"a": 600.0, "b": None})
    assert (limits.inbox_s, limits.dead_letters_s) == (None, 7)

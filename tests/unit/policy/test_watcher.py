"""Hot reload: a valid edit becomes the version in force once recorded; a bad one never does."""

from __future__ import annotations

import asyncio

import pytest

from shared.policy import Policy, PolicyError, PolicyWatcher

from .builders import EXAMPLE_POLICY

GOOD = EXAMPLE_POLICY.read_text(encoding="utf-8")
CHANGED = GOOD.replace("capability_ttl_seconds: 300", "capability_ttl_seconds: 120")


@pytest.fixture
def policy_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD, encoding="utf-8")
    return path


class Recorder:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.versions: list[str] = []
        self.fail = fail
        self.calls = 0

    async def __call__(self, policy: Policy) -> None:
        self.calls += 1
        if self.fail:
            raise self.fail
        self.versions.append(policy.version)


def test_a_bad_file_at_start_stops_the_process(tmp_path):
    (tmp_path / "policy.yaml").write_text("rules: [\n", encoding="utf-8")
    with pytest.raises(PolicyError):
        PolicyWatcher(tmp_path / "policy.yaml")


async def test_a_valid_edit_is_recorded_then_activated(policy_file):
    watcher, recorded = PolicyWatcher(policy_file), Recorder()
    first = watcher.current.version
    assert await watcher.reload(recorded) is None  # unchanged: nothing to do
    policy_file.write_text(CHANGED, encoding="utf-8")
    activated = await watcher.reload(recorded)
    assert activated is watcher.current and activated.version != first
    assert activated.capability_ttl_seconds == 120 and recorded.versions == [activated.version]


async def test_a_bad_edit_keeps_the_version_in_force_until_the_file_is_fixed(policy_file):
    watcher = PolicyWatcher(policy_file)
    before = watcher.current
    policy_file.write_text(GOOD.replace("effect: allow", "effect: allw", 1), encoding="utf-8")
    assert await watcher.reload() is None and watcher.current is before
    policy_file.unlink()
    assert await watcher.reload() is None and watcher.current is before
    policy_file.write_text(CHANGED, encoding="utf-8")
    assert (await watcher.reload()).version == watcher.current.version != before.version


async def test_a_version_that_could_not_be_recorded_is_not_activated(policy_file):
    watcher = PolicyWatcher(policy_file)
    before = watcher.current
    policy_file.write_text(CHANGED, encoding="utf-8")
    with pytest.raises(ConnectionError):
        await watcher.reload(Recorder(fail=ConnectionError("database away")))
    assert watcher.current is before


async def test_watch_reloads_on_its_interval_and_survives_a_database_outage(policy_file):
    watcher = PolicyWatcher(policy_file, interval_s=0.01)
    failing = Recorder(fail=ConnectionError("database away"))
    task = asyncio.create_task(watcher.watch(failing))
    try:
        policy_file.write_text(CHANGED, encoding="utf-8")
        await _until(lambda: failing.calls >= 2)  # two intervals tried and failed
        assert watcher.current.capability_ttl_seconds == 300  # not recorded, not active
        failing.fail = None
        await _until(lambda: watcher.current.capability_ttl_seconds == 120)
        assert failing.versions == [watcher.current.version]
    finally:
        task.cancel()


async def _until(condition) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0.01)

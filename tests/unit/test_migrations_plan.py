"""Which SQL runs, in which order, and how an edited migration is recognised."""

from __future__ import annotations

from pathlib import Path

from shared.db.migrations import load, plan_for

DEMO_MIGRATIONS = Path(__file__).resolve().parents[2] / "intentledger" / "demo" / "migrations"


def test_the_shared_messaging_tables_come_first():
    assert plan_for()[0].version == "messaging/0001_outbox_inbox"


def test_a_service_plan_appends_its_own_migrations_after_the_shared_ones():
    versions = [m.version for m in plan_for(DEMO_MIGRATIONS)]
    assert versions[0] == "messaging/0001_outbox_inbox"
    assert "service/0001_pings" in versions
    assert all(v.startswith("messaging/") for v in versions[:len(plan_for())])


def test_load_takes_only_numbered_sql_files_in_order(tmp_path):
    for name in ["0002_b.sql", "0010_c.sql", "0001_a.sql", "notes.sql", "0003_d.sql.bak",
                 "003_short.sql", "README.md", "00004_long.sql"]:
        (tmp_path / name).write_text(f"-- {name}\n")
    versions = [m.version for m in load("svc", tmp_path)]
    assert versions == ["svc/0001_a", "svc/0002_b", "svc/0010_c"]


def test_the_checksum_changes_when_the_sql_changes(tmp_path):
    migration = tmp_path / "0001_a.sql"
    migration.write_text("CREATE TABLE a (id int);\n")
    before = load("svc", tmp_path)[0]
    assert before.sql == "CREATE TABLE a (id int);\n"
    migration.write_text("CREATE TABLE a (id bigint);\n")
    after = load("svc", tmp_path)[0]
    assert after.version == before.version
    assert after.checksum != before.checksum


def test_the_checksum_does_not_depend_on_the_file_name_or_the_moment(tmp_path):
    """An applied migration is compared by content alone, on every later start."""
    (tmp_path / "0001_a.sql").write_text("CREATE TABLE a (id int);\n")
    (tmp_path / "0002_b.sql").write_text("CREATE TABLE a (id int);\n")
    first, second = load("svc", tmp_path)
    assert first.checksum == second.checksum == load("svc", tmp_path)[0].checksum

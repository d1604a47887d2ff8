"""The tool JVMs' class archive (``shared.infra.class_archive``) without a JVM: the first run
is told to write one, a successful run's is kept, a failed run's dropped, and every later run
maps it; a cache nobody may write to only costs the speed-up. A real JVM's use of the flags:
``tests/infra/test_local_infra.py``."""

from __future__ import annotations

from pathlib import Path

from shared.infra.class_archive import QUIET, sharing

TOOL = "kafka.admin.ConfigCommand"


def _java(tmp_path: Path, build: str = "17.0.17") -> str:
    java = tmp_path / f"jdk-{build}" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"a JVM of build {build}")
    return str(java)


def _flag(flags: list[str], name: str) -> Path | None:
    found = [flag.split("=", 1)[1] for flag in flags if flag.startswith(f"-XX:{name}=")]
    return Path(found[0]) if found else None


def test_the_first_run_writes_an_archive_that_every_later_run_maps(tmp_path):
    folder, java = tmp_path / "archives", _java(tmp_path)
    flags, finish = sharing(folder, java, TOOL)
    written = _flag(flags, "ArchiveClassesAtExit")
    assert written is not None and written.parent == folder and _flag(flags, "SharedArchiveFile") is None
    assert flags[:len(QUIET)] == QUIET
    written.write_bytes(b"classes")  # what the JVM does at its exit

    finish(True)

    later, _ = sharing(folder, java, TOOL)
    mapped = _flag(later, "SharedArchiveFile")
    assert mapped is not None and mapped.read_bytes() == b"classes"
    assert _flag(later, "ArchiveClassesAtExit") is None
    assert sorted(path.name for path in folder.iterdir()) == [mapped.name]  # nothing half-written left


def test_a_failed_run_leaves_no_archive_and_the_next_run_writes_one_again(tmp_path):
    folder, java = tmp_path / "archives", _java(tmp_path)
    flags, finish = sharing(folder, java, TOOL)
    _flag(flags, "ArchiveClassesAtExit").write_bytes(b"classes of a run that failed")
    finish(False)
    assert list(folder.iterdir()) == []
    again, _ = sharing(folder, java, TOOL)
    assert _flag(again, "ArchiveClassesAtExit") is not None


def test_a_run_whose_jvm_wrote_nothing_keeps_nothing(tmp_path):
    folder, java = tmp_path / "archives", _java(tmp_path)
    _, finish = sharing(folder, java, TOOL)
    finish(True)
    assert list(folder.iterdir()) == []


def test_two_runs_writing_at_once_each_write_their_own_file_and_one_whole_archive_stays(tmp_path):
    folder, java = tmp_path / "archives", _java(tmp_path)
    (first, finish_first), (second, finish_second) = (sharing(folder, java, TOOL),
                                                      sharing(folder, java, TOOL))
    assert _flag(first, "ArchiveClassesAtExit") != _flag(second, "ArchiveClassesAtExit")
    _flag(first, "ArchiveClassesAtExit").write_bytes(b"first")
    _flag(second, "ArchiveClassesAtExit").write_bytes(b"second")
    finish_first(True)
    finish_second(True)
    [archive] = folder.iterdir()
    assert archive.read_bytes() == b"second"


def test_each_tool_and_each_jvm_build_has_its_own_archive(tmp_path):
    folder = tmp_path / "archives"
    java, other_build = _java(tmp_path), _java(tmp_path, "21.0.9")
    names = set()
    for jvm, tool in ((java, TOOL), (java, "org.apache.kafka.tools.AclCommand"), (other_build, TOOL)):
        flags, finish = sharing(folder, jvm, tool)
        _flag(flags, "ArchiveClassesAtExit").write_bytes(tool.encode())
        finish(True)
        names.add(_flag(sharing(folder, jvm, tool)[0], "SharedArchiveFile").name)
    assert len(names) == 3


def test_a_cache_that_cannot_be_written_runs_the_tool_without_an_archive(tmp_path):
    occupied = tmp_path / "a file"
    occupied.write_text("not a folder")
    flags, finish = sharing(occupied / "archives", _java(tmp_path), TOOL)
    assert flags == QUIET
    finish(True)


def test_a_jvm_that_cannot_be_looked_at_runs_the_tool_without_an_archive(tmp_path):
    flags, finish = sharing(tmp_path / "archives", str(tmp_path / "no-such-jdk" / "java"), TOOL)
    assert flags == QUIET
    finish(True)
    assert not (tmp_path / "archives").exists()

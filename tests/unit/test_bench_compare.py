"""The A/B harness's B side is a copy of the tree taken when the A/B starts
(``bench/e2e/compare.py``): what an edit made later does not reach."""

from __future__ import annotations

import subprocess

from bench.e2e import compare


def _git(tree, *arguments: str) -> None:
    subprocess.run(["git", "-C", str(tree), *arguments], check=True, capture_output=True)


def test_b_is_the_tree_as_it_was_when_the_ab_started(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    (tree / "services").mkdir(parents=True)
    (tree / "services" / "hop.py").write_text("COST = 2\n")
    (tree / ".gitignore").write_text(".venv/\n")
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "a")
    (tree / "services" / "hop.py").write_text("COST = 1\n")  # changed, not committed
    (tree / "services" / "new.py").write_text("NEW = True\n")  # not even added
    (tree / ".venv").mkdir()
    (tree / ".venv" / "big").write_text("ignored")
    monkeypatch.setattr(compare, "ROOT", tree)

    described = compare._snapshot(tmp_path / "b")
    (tree / "services" / "hop.py").write_text("COST = 0\n")  # an edit while the A/B runs

    assert (tmp_path / "b" / "services" / "hop.py").read_text() == "COST = 1\n"
    assert (tmp_path / "b" / "services" / "new.py").exists()
    assert not (tmp_path / "b" / ".venv").exists()
    assert described.startswith("this tree (") and described.endswith("changes not committed)")

"""The one deletion guard (t2exp.infra.contained): every delete in src/ goes through it, and it
removes nothing that does not lie inside the root it is given."""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import pytest

from helpers.paths import ROOT
from t2exp.infra import contained
from t2exp.infra.contained import OutsideRoot, inside, remove_file, remove_tree, safe_segment

SRC = ROOT / "src"
GUARD = Path(contained.__file__).resolve()
DELETERS = {"rmtree", "unlink", "remove", "removedirs"}  # shutil.rmtree, Path.unlink, os.remove/unlink/removedirs


def deletion_calls(path: Path) -> list[str]:
    """``file:line call`` for every call in ``path`` that deletes a file or a tree: ``x.rmtree(...)``,
    ``x.unlink(...)`` (a Path or os), ``os.remove(...)``/``os.removedirs(...)``, and any of those
    names imported bare (``from shutil import rmtree``, ``from os import remove as rm``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    bare = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil", "pathlib")
        for alias in node.names
        if alias.name in DELETERS
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        hit = (
            isinstance(f, ast.Attribute)
            and (f.attr in ("rmtree", "unlink") or (f.attr in DELETERS and isinstance(f.value, ast.Name) and f.value.id == "os"))
            or isinstance(f, ast.Name)
            and f.id in bare
        )
        if hit:
            found.append(f"{path}:{node.lineno} {ast.unparse(f)}")
    return found


def test_every_delete_in_src_goes_through_the_guard() -> None:
    modules = sorted(SRC.rglob("*.py"))
    assert len(modules) > 50 and GUARD in modules
    found = [hit for m in modules if m.resolve() != GUARD for hit in deletion_calls(m)]
    assert not found, "delete through t2exp.infra.contained (remove_file/remove_tree), not directly:\n" + "\n".join(found)
    assert len(deletion_calls(GUARD)) == 2  # the guard's own rmtree and unlink: the walker sees them


def test_the_walker_catches_a_delete_added_to_a_module(tmp_path: Path) -> None:
    copy = tmp_path / "cache.py"
    shutil.copyfile(SRC / "t2exp" / "infra" / "cache.py", copy)
    assert deletion_calls(copy) == []
    with copy.open("a", encoding="utf-8") as f:
        f.write(
            "\n\ndef _sweep(p):\n    shutil.rmtree(p)\n    Path(p).unlink()\n    os.remove(p)\n    os.unlink(p)\n"
            "    from shutil import rmtree as gone\n    gone(p)\n    [].remove(p)\n"
        )
    found = deletion_calls(copy)
    assert [hit.rsplit(" ", 1)[1] for hit in found] == ["shutil.rmtree", "Path(p).unlink", "os.remove", "os.unlink", "gone"], found


def test_the_guard_removes_inside_its_root_only(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "tree" / "sub").mkdir(parents=True)
    (root / "tree" / "sub" / "f").write_text("x")
    (root / "file").write_text("x")
    outside.mkdir()
    (outside / "precious").write_text("keep")
    for bad in (root / ".." / "outside", outside, root, root / "tree" / ".." / "..", "/"):
        with pytest.raises(OutsideRoot, match="refusing to delete it: it is not inside"):
            remove_tree(bad, root, ignore_errors=True)  # refused whatever ignore_errors says
    with pytest.raises(OutsideRoot):
        remove_file(outside / "precious", root, missing_ok=True)
    (root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutsideRoot):
        remove_file(root / "link" / "precious", root)  # through a link: outside
    remove_file(root / "link", root)  # the link itself lies inside: it goes, its target stays
    assert (outside / "precious").read_text() == "keep" and not os.path.lexists(root / "link")

    remove_tree(root / "tree", root)
    remove_file(root / "file", root)
    assert sorted(os.listdir(root)) == []
    remove_file(root / "file", root, missing_ok=True)  # missing_ok / ignore_errors keep their meaning
    remove_tree(root / "tree", root, ignore_errors=True)
    with pytest.raises(FileNotFoundError):
        remove_file(root / "file", root)
    with pytest.raises(FileNotFoundError):
        remove_tree(root / "tree", root)
    assert inside(root / "a" / "b", root) == (root / "a" / "b").resolve()


@pytest.mark.parametrize(
    ("name", "segment"),
    [
        ("..", "_.."),
        (".", "_."),
        ("a/b", "a_b"),
        ("../x", "_.._x"),
        ("/etc", "_etc"),
        (".hidden", "_.hidden"),
        ("t2exp", "t2exp"),
        ("my run 1", "my_run_1"),
        ("", "_"),
    ],
)
def test_safe_segment(name: str, segment: str) -> None:
    assert safe_segment(name) == segment and contained.is_plain_segment(segment)

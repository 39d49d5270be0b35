"""Paths that stay inside a root: a name that is one plain path segment, and the one place in
t2exp that deletes files or trees, only after resolving them and checking they lie inside a given
root (tests/infra/test_contained.py fails if any other module calls ``shutil.rmtree``, ``Path.unlink``,
``os.remove`` or ``os.unlink``).

A name from a file or a user (a condition, a table, an experiment) becomes a folder under a
root; absolute, with ``..`` or a separator it would point elsewhere, and a delete of it would
remove what is not ours."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from t2exp.errors import T2ExpError

# letters, digits and _ . - ; not starting with . or - (no hidden name, no option, never . or ..)
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
SEGMENT_RULE = "one plain path segment: letters, digits and _ . -, not starting with . or -"


class OutsideRoot(T2ExpError):
    """A delete (or a write) of a path that does not lie inside the root it was meant for."""


def is_plain_segment(name: str) -> bool:
    """``name`` is one plain path segment (:data:`SEGMENT_RULE`): safe as a folder under a root."""
    return bool(_SEGMENT.fullmatch(name))


def safe_segment(name: str) -> str:
    """``name`` made one plain path segment: every run of other characters becomes ``_``, and a
    leading ``.`` or ``-`` (``..``, ``.hidden``) gets a ``_`` before it."""
    seg = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    return seg if is_plain_segment(seg) else "_" + seg


def _location(path: Path) -> Path:
    """Where the entry ``path`` names lies: its folder resolved (symlinks, ``..``), its own name
    kept (a symlink is the link, not its target: deleting it deletes the link)."""
    if path.name in ("", ".."):  # "/", "a/..": the folder itself
        return path.resolve()
    return path.parent.resolve() / path.name


def inside(path: str | Path, root: str | Path, action: str = "delete") -> Path:
    """``path``'s location when it lies strictly inside ``root`` (both resolved); else raises
    :class:`OutsideRoot` (``action``: what was refused, for its message)."""
    where, top = _location(Path(path)), Path(root).resolve()
    if where == top or not where.is_relative_to(top):
        raise OutsideRoot(f"{path}: refusing to {action} it: it is not inside {top} (it resolves to {where})")
    return where


def remove_file(path: str | Path, root: str | Path, *, missing_ok: bool = False) -> None:
    """``Path(path).unlink(missing_ok=...)``, only inside ``root``."""
    inside(path, root).unlink(missing_ok=missing_ok)


def remove_tree(path: str | Path, root: str | Path, *, ignore_errors: bool = False) -> None:
    """``shutil.rmtree(path, ignore_errors=...)``, only inside ``root`` (the refusal is raised
    whatever ``ignore_errors`` says)."""
    shutil.rmtree(inside(path, root), ignore_errors=ignore_errors)

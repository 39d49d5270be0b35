"""MkDocs hook (``hooks:`` in mkdocs.yml): fills the generated parts of the pages.

A page asks for a generated part with an HTML comment on a line of its own:

- ``<!-- t2exp:groups -->``: every config group, its default and options;
- ``<!-- t2exp:options GROUP -->``: the option table of ``conf/GROUP/`` (``config_tables.option_table``);
- ``<!-- t2exp:schema GROUP -->``: the schema dataclasses the group's options name, one table each;
- ``<!-- t2exp:schema-class module.Class [prefix] -->``: one dataclass's table;
- ``<!-- t2exp:expected NAME -->``: the results table of ``expected/NAME.yaml``;
- ``<!-- t2exp:expected-index -->``: every expected-numbers file.

The conf dir is the one the app reads (``t2exp.infra.paths.CONF_DIR``), the expected-numbers folder
the one ``t2exp reproduce`` reads. A config group that no page shows, or an unknown directive,
fails the build.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import config_tables as ct
import expected_tables as et
from mkdocs.exceptions import PluginError

DIRECTIVE = re.compile(r"^<!--\s*t2exp:([\w-]+)(?:\s+([^>]*?))?\s*-->\s*$", re.MULTILINE)
_shown: set[str] = set()
_pages: dict[str, str] = {}


def _dirs() -> tuple[Path, Path]:
    from t2exp.evaluation.expected import default_expected_dir
    from t2exp.infra.paths import CONF_DIR

    return CONF_DIR, default_expected_dir()


def on_files(files: Any, config: Any) -> Any:
    """Which page shows which group (for the links of the groups table)."""
    _pages.clear()
    _shown.clear()
    for f in files.documentation_pages():
        text = Path(f.abs_src_path).read_text(encoding="utf-8")
        for m in DIRECTIVE.finditer(text):
            if m.group(1) == "options" and m.group(2):
                _pages.setdefault(m.group(2).strip(), f.src_uri)
    return files


def _relative(target: str, page_uri: str) -> str:
    import posixpath

    return posixpath.relpath(target, posixpath.dirname(page_uri) or ".")


def _render(kind: str, arg: str, page_uri: str) -> str:
    conf_dir, expected_dir = _dirs()
    if kind == "groups":
        return ct.groups_table(conf_dir, {g: _relative(p, page_uri) for g, p in _pages.items()})
    if kind == "options":
        if arg not in ct.groups(conf_dir):
            raise PluginError(f"{page_uri}: t2exp:options {arg}: no such config group in {conf_dir}")
        _shown.add(arg)
        return ct.option_table(conf_dir, arg)
    if kind == "schema":
        return ct.schema_section(ct.group_schemas(conf_dir, arg))
    if kind == "schema-class":
        path, _, prefix = arg.partition(" ")
        module, _, name = path.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        return ct.schema_section(ct.with_nested([cls]), prefix=prefix.strip())
    if kind == "expected":
        return et.results_table(expected_dir, arg)
    if kind == "expected-index":
        return et.index_table(expected_dir)
    raise PluginError(f"{page_uri}: unknown directive t2exp:{kind}")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def replace(m: re.Match[str]) -> str:
        try:
            return _render(m.group(1), (m.group(2) or "").strip(), page.file.src_uri)
        except PluginError:
            raise
        except Exception as exc:  # a malformed option or expected file: the build fails naming it
            raise PluginError(f"{page.file.src_uri}: t2exp:{m.group(1)} {m.group(2) or ''}: {type(exc).__name__}: {exc}") from exc

    return DIRECTIVE.sub(replace, markdown)


def on_env(env: Any, config: Any, files: Any) -> Any:
    """After every page's Markdown: each config group has a page."""
    conf_dir, _ = _dirs()
    missing = [g for g in ct.groups(conf_dir) if g not in _shown]
    if missing:
        raise PluginError(f"config groups without a docs page (a `<!-- t2exp:options GROUP -->` line): {', '.join(missing)}")
    return env

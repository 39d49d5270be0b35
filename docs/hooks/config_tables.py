"""The configuration pages' tables, generated from what the app itself reads: the option YAML files
of a conf dir (``t2exp.infra.paths.CONF_DIR`` when the site is built) and the typed schema (the
dataclasses of ``t2exp.config``). Nothing here is a hand-kept list of options: add a YAML to
``conf/<group>/`` and its row appears.

An option's row reads its ``meta:`` block when it has one (``display_name``, ``family``,
``in_paper``, ``licence``, ``params``: ``t2exp.infra.option_meta``; at the top of the file or under the group's
key) and otherwise the file's leading comment. Every function takes the conf dir as an argument
(``tests/project/test_docs.py`` adds an option to a copy of it and sees the table change).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import textwrap
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from t2exp.cli.argv import default_options, root_defaults
from t2exp.infra.option_meta import META_FIELDS, read_meta

META_KEYS = tuple(k for k in META_FIELDS if k != "order")
META_LABELS = {
    "display_name": "name",
    "family": "family",
    "in_paper": "in the paper",
    "licence": "licence",
    "params": "parameters",
    "revision": "revision",
}
SKIPPED_KEYS = ("defaults", "_target_", "meta")
MAX_LIST = 4
# groups with no default option, added with +GROUP=NAME
ADDED_GROUPS = ("experiment", "rung", "tune_space")
# groups that are part of one option of another group: how an option of theirs is chosen
PICKED_WITH = {
    "reranker": "Choose one with `rag_method=reranker reranker=<option>` (the group belongs to `rag_method=reranker`)",
    "protocol_method": "The option `paper_<method>` is chosen by `protocol=paper rag_method=<method>`, not by hand",
}
MAX_TEXT = 60


@dataclass
class Option:
    """One option YAML of a config group."""

    group: str
    name: str
    path: Path
    comment: str
    meta: dict[str, Any]
    package: str
    data: dict[str, Any]
    defaults: list[Any] = field(default_factory=list)
    text: str = ""

    @property
    def description(self) -> str:
        return str(self.meta.get("description") or self.comment)


# --- reading a conf dir ---------------------------------------------------------------------------
def groups(conf_dir: Path) -> list[str]:
    """Every config group of ``conf_dir`` (folders holding option YAMLs; ``hydra/launcher`` for nested ones)."""
    found = {str(p.parent.relative_to(conf_dir)) for p in conf_dir.rglob("*.yaml") if p.parent != conf_dir}
    return sorted(found)


def _packages(conf_dir: Path) -> dict[str, str]:
    """Groups composed at another package by the root defaults list (``protocol_method@rag_method``)."""
    out: dict[str, str] = {}
    for entry in root_defaults(conf_dir):
        if isinstance(entry, dict):
            for key in entry:
                name = str(key).removeprefix("optional ").strip()
                if "@" in name:
                    group, package = name.split("@", 1)
                    out[group] = package
    return out


def leading_comment(text: str) -> str:
    """The comment block that opens a YAML file, as one paragraph (Hydra's ``# @package`` line left out)."""
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("#"):
            break
        body = stripped.lstrip("#").strip()
        if body.startswith("@package"):
            continue
        lines.append(body)
    return " ".join(" ".join(lines).split())


_COMMAND = re.compile(r"\s(?:python3? -m |\.venv\S*/bin/python |bash |docker run |OPENAI_API_KEY=)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`])")


def summary(text: str, sentences: int = 2) -> str:
    """The opening of an option's leading comment for its table row: the first paragraph (up to a blank
    comment line or an indented example), cut before the first command line, at most two sentences."""
    para: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("#"):
            break
        raw = stripped[1:]
        body = raw.strip()
        if body.startswith("@package"):
            continue
        if not body:
            if para:
                break
            continue
        if raw.startswith("   ") and para:  # an indented example
            break
        para.append(body)
    flat = " " + " ".join(" ".join(para).split())
    m = _COMMAND.search(flat)
    if m:
        flat = flat[: m.start()]
    parts = _SENTENCE.split(flat.strip())
    if len(parts) > 1 and parts[-1].endswith(":") and len(parts) <= sentences:  # "Use:" before a cut-off command
        parts = parts[:-1]
    out = " ".join(parts[:sentences]).strip()
    if out.endswith((":", ";", ",")):
        out = out[:-1].rstrip() + "."
    return out


def load_option(conf_dir: Path, group: str, path: Path) -> Option:
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        data = {}
    header = re.search(r"^#\s*@package\s+(\S+)", text, re.MULTILINE)
    package = header.group(1) if header else _packages(conf_dir).get(group, group.replace("/", "."))
    meta = read_meta(data, group.split("/")[-1])  # the app's own reader (a report orders by it)
    meta.pop("order", None)  # a report's row order, no column of the docs
    return Option(
        group=group,
        name=path.stem,
        path=path,
        comment=summary(text),
        meta=meta,
        package=package,
        data=data,
        defaults=list(data.get("defaults") or []),
        text=text,
    )


def options(conf_dir: Path, group: str) -> list[Option]:
    """The options of ``group``, by name."""
    folder = conf_dir / group
    return [load_option(conf_dir, group, p) for p in sorted(folder.glob("*.yaml"))]


# --- what an option sets --------------------------------------------------------------------------
def _value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        if len(v) > MAX_LIST:
            return f"[{len(v)} items]"
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict) and not v:
        return "{}"
    text = str(v)
    if "\n" in text:
        text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _flatten(node: Any, prefix: str) -> Iterable[tuple[str, str]]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            if key in SKIPPED_KEYS or (key == "meta" and isinstance(value, dict)):
                continue
            yield from _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, _value(node)


def settings(opt: Option) -> list[str]:
    """``key=value`` for every value the option sets, with the keys as the command line names them."""
    prefix = "" if opt.package == "_global_" else opt.package
    pairs = [(k, v) for k, v in _flatten(opt.data, prefix) if not k.endswith(".name") and k != "name"]
    return [f"{k}={v}" for k, v in pairs]


def schema_names(opt: Option) -> list[str]:
    """The ``/schema/<group>/<name>`` entries of the option's defaults list."""
    out = []
    for entry in opt.defaults:
        if isinstance(entry, str) and entry.startswith("/schema/"):
            out.append(entry.split("@", 1)[0].removeprefix("/schema/"))
    return out


def inherits(opt: Option) -> list[str]:
    """The rest of the defaults list: options it extends, and groups it switches."""
    out = []
    for entry in opt.defaults:
        if isinstance(entry, str):
            if entry.startswith("/schema/") or entry == "_self_":
                continue
            out.append(f"extends {entry.split('@', 1)[0]}")
        elif isinstance(entry, dict):
            for key, value in entry.items():
                group = str(key).removeprefix("override ").strip().lstrip("/").split("@", 1)[0]
                out.append(f"{group} → {value}")
    return out


# --- Markdown -------------------------------------------------------------------------------------
def cell(text: str) -> str:
    """Text safe inside a Markdown table cell (pipes, HTML, link brackets, emphasis); a code span
    keeps its text as written (a backslash there is shown, not read), only its pipes escaped."""
    parts = re.split(r"(`[^`]*`)", " ".join(str(text).split()))
    return "".join(
        part.replace("|", "\\|") if part.startswith("`") and part.endswith("`") and len(part) > 1 else _plain(part) for part in parts
    )


def _plain(text: str) -> str:
    for a, b in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("[", "\\["), ("]", "\\]"), ("*", "\\*")):
        text = text.replace(a, b)
    return text


def code(text: str) -> str:
    """A code span in a table cell."""
    text = str(text).replace("|", "\\|")
    ticks = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _schema_label(name: str) -> str:
    cls = schema_registry().get(tuple(name.split("/", 1)))  # type: ignore[arg-type]
    return f"[`{cls.__name__}`](#{cls.__name__.lower()})" if cls is not None else code(name)


def option_table(conf_dir: Path, group: str) -> str:
    """The option table of one group: every ``conf/<group>/*.yaml``, its description (meta or leading
    comment), its schema and what it sets."""
    opts = options(conf_dir, group)
    if not opts:
        return f"*No options in `{group}/`.*\n"
    default = default_options(conf_dir).get(group)
    meta_keys = [k for k in META_KEYS if any(k in o.meta for o in opts)]
    meta_keys += sorted({k for o in opts for k in o.meta if k not in META_KEYS and k != "description"})
    has_schema = any(schema_names(o) for o in opts)
    head = ["option", *(META_LABELS.get(k, k) for k in meta_keys), "description"]
    head += ["schema"] if has_schema else []
    head += ["sets"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in opts:
        name = code(o.name) + (" (default)" if o.name == default else "")
        cells = [name, *(cell(_value(o.meta[k])) if k in o.meta else "" for k in meta_keys), cell(o.description)]
        if has_schema:
            cells.append(", ".join(_schema_label(s) for s in schema_names(o)))
        sets = [cell(x) for x in inherits(o)] + [code(s) for s in settings(o)]
        cells.append("<br>".join(sets) if sets else "–")
        rows.append("| " + " | ".join(cells) + " |")
    plus = "+" if group in ADDED_GROUPS else ""
    pick = PICKED_WITH.get(group, f"Choose one with `{plus}{group}=<option>`")
    out = ["\n".join(rows), "", f"{pick}; each row is a file in `conf/{group}/`, shown whole below.", ""]
    for o in opts:
        out.append(f'??? example "`conf/{group}/{o.path.name}`"')
        out.append("")
        out.append("    ```yaml")
        out.extend(f"    {line}".rstrip() for line in o.text.rstrip().splitlines())
        out.append("    ```")
        out.append("")
    return "\n".join(out)


def groups_table(conf_dir: Path, pages: dict[str, str] | None = None) -> str:
    """Every group of the conf dir, its default and its options, linked to its page when one is given."""
    pages = pages or {}
    default = default_options(conf_dir)
    rows = ["| group | default | options |", "|---|---|---|"]
    for g in groups(conf_dir):
        label = f"[`{g}`]({pages[g]})" if g in pages else code(g)
        names = ", ".join(code(o.name) for o in options(conf_dir, g))
        rows.append(f"| {label} | {code(default[g]) if g in default else '–'} | {names} |")
    return "\n".join(rows) + "\n"


# --- the typed schema -----------------------------------------------------------------------------
def schema_registry() -> dict[tuple[str, str], type]:
    """``(group, name) -> dataclass`` as the app registers them in Hydra's ConfigStore."""
    from t2exp.config import SCHEMAS

    return dict(SCHEMAS)


def group_schemas(conf_dir: Path, group: str) -> list[type]:
    """The schema dataclasses the group's options name, each after its dataclass bases."""
    registry = schema_registry()
    named: list[type] = []
    for o in options(conf_dir, group):
        for s in schema_names(o):
            cls = registry.get(tuple(s.split("/", 1)))  # type: ignore[arg-type]
            if cls is not None and cls not in named:
                named.append(cls)
    return with_nested(named)


def with_nested(classes: Iterable[type]) -> list[type]:
    """The classes, each after its dataclass bases, then the dataclasses their fields hold (``bm25``, ``sampling``)."""
    ordered: list[type] = []
    for cls in classes:
        for base in reversed(cls.__mro__):
            if dataclasses.is_dataclass(base) and base not in ordered:
                ordered.append(base)
    for cls in list(ordered):
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
                if dataclasses.is_dataclass(value) and type(value) not in ordered:
                    ordered.extend(c for c in with_nested([type(value)]) if c not in ordered)
    return ordered


def _field_comments(cls: type) -> dict[str, str]:
    """The comment on each field's line, and the comment lines right above it, from the source."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    out: dict[str, str] = {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    for node in body.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            n = node.lineno - 1
            while n >= 1 and lines[n - 1].strip().startswith("#"):
                above.insert(0, comments.get(n, ""))
                n -= 1
            parts = [*above, comments.get(node.lineno, "")]
            out[node.target.id] = " ".join(p for p in parts if p)
    return out


def _default(f: dataclasses.Field) -> str:
    from omegaconf import MISSING

    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value == MISSING:
        return "required"
    if dataclasses.is_dataclass(value):
        return f"[`{type(value).__name__}`](#{type(value).__name__.lower()})"
    return code(_value(value))


def _type(f: dataclasses.Field) -> str:
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    return code(t.replace("typing.", ""))


def rst_to_md(text: str) -> str:
    """A docstring's reST to Markdown: ``x`` -> `x`, roles dropped."""
    text = re.sub(r":(?:mod|func|class|meth|attr|data|obj):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def schema_table(cls: type, prefix: str = "") -> str:
    """A dataclass's own fields (not its bases'): key, type, default and the source's comment."""
    own = [
        f
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if not any(
            dataclasses.is_dataclass(b) and f.name in {x.name for x in dataclasses.fields(b)}  # type: ignore[arg-type]
            for b in cls.__mro__[1:]
        )
    ]
    comments = _field_comments(cls)
    bases = [b.__name__ for b in cls.__bases__ if dataclasses.is_dataclass(b)]
    parts = []
    doc = inspect.getdoc(cls) or ""
    if doc and not doc.startswith(f"{cls.__name__}("):
        parts.append(rst_to_md(" ".join(doc.split("\n\n")[0].split())) + "\n")
    if bases:
        parts.append("Extends " + ", ".join(f"[`{b}`](#{b.lower()})" for b in bases) + ": its keys too.\n")
    if not own:
        parts.append("No keys of its own.\n")
        return "\n".join(parts)
    rows = ["| key | type | default | notes |", "|---|---|---|---|"]
    for f in own:
        rows.append(f"| {code(prefix + f.name)} | {_type(f)} | {_default(f)} | {cell(rst_to_md(comments.get(f.name, '')))} |")
    parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def schema_section(classes: Iterable[type], level: int = 3, prefix: str = "") -> str:
    """One heading and table per dataclass."""
    out = []
    for cls in classes:
        out.append(f"{'#' * level} {cls.__name__}\n\n<small>`{cls.__module__}.{cls.__qualname__}`</small>\n\n{schema_table(cls, prefix)}")
    return "\n".join(out)

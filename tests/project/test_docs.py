"""The documentation's generated parts (docs/hooks/): an option table is built from the option YAMLs
of the conf dir it is given (an option added to a copy of conf/ appears in it, with its meta block
or its leading comment), every config group has a page, and the results tables render from the
expected-numbers files. ``mkdocs build --strict`` itself runs in CI beside the tests (.ci/run)."""

from __future__ import annotations

import importlib
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers.paths import ROOT
from t2exp.infra.paths import CONF_DIR

DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def hooks() -> tuple[ModuleType, ModuleType]:
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        return importlib.import_module("config_tables"), importlib.import_module("expected_tables")
    finally:
        sys.path.remove(str(DOCS / "hooks"))


def test_an_added_option_yaml_changes_the_table(tmp_path: Path, hooks: tuple[ModuleType, ModuleType]) -> None:
    ct, _ = hooks
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    before = ct.option_table(conf, "rag_method")
    assert "`bm25f` (default)" in before and "lexical_only" not in before

    (conf / "rag_method" / "lexical_only.yaml").write_text(
        "# BM25 alone over the document body, for a test.\n"
        "defaults:\n  - /schema/rag_method/hybrid@_here_\n  - _self_\n\n"
        "_target_: t2exp.methods.hybrid.Hybrid\nname: lexical_only\nalpha: 0.0\n",
        encoding="utf-8",
    )
    after = ct.option_table(conf, "rag_method")
    row = next(line for line in after.splitlines() if line.startswith("| `lexical_only`"))
    assert "BM25 alone over the document body, for a test." in row
    assert "[`HybridConfig`](#hybridconfig)" in row and "`rag_method.alpha=0.0`" in row
    rows = [line for line in after.splitlines() if line.startswith("| `")]
    assert len(rows) == len([line for line in before.splitlines() if line.startswith("| `")]) + 1
    assert '??? example "`conf/rag_method/lexical_only.yaml`"' in after  # the file, shown whole below the table

    # a meta block is read when present: its keys become columns, its description wins over the comment
    (conf / "rag_method" / "lexical_only.yaml").write_text(
        "# the comment\n_target_: t2exp.methods.hybrid.Hybrid\nname: lexical_only\n"
        "meta:\n  display_name: Lexical only\n  family: lexical\n  in_paper: false\n  licence: Apache-2.0\n",
        encoding="utf-8",
    )
    table = ct.option_table(conf, "rag_method")
    assert table.splitlines()[0].startswith("| option | name | family | in the paper | licence | description |")
    row = next(line for line in table.splitlines() if line.startswith("| `lexical_only`"))
    assert "| Lexical only | lexical | false | Apache-2.0 | the comment |" in row and "meta" not in row.split("| the comment |")[1]


def test_a_new_group_is_listed(tmp_path: Path, hooks: tuple[ModuleType, ModuleType]) -> None:
    ct, _ = hooks
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "judge").mkdir()
    (conf / "judge" / "strict.yaml").write_text("# A made-up group.\nlevel: 2\n", encoding="utf-8")
    assert "judge" in ct.groups(conf)
    assert "| `judge` | – | `strict` |" in ct.groups_table(conf)
    assert "`judge.level=2`" in ct.option_table(conf, "judge")


def test_the_way_to_choose_an_option_composes(hooks: tuple[ModuleType, ModuleType]) -> None:
    """The line under each group's option table says how to choose an option; that command line,
    with the group's first option, composes (a group that is part of one option of another names it)."""
    import shlex

    from helpers.app import compose_cfg

    ct, _ = hooks
    for group in ct.groups(CONF_DIR):
        if group.startswith("hydra/"):
            continue
        table = ct.option_table(CONF_DIR, group)
        pick = re.search(r"(?:Choose one with|is chosen by) `([^`]*<(?:option|method)>[^`]*)`", table)
        assert pick, f"{group}: no 'Choose one with `...`' line"
        option = ct.options(CONF_DIR, group)[0].name
        overrides = shlex.split(pick.group(1).replace("<option>", option).replace("<method>", option.removeprefix("paper_")))
        if group in ("rung", "tune_space"):
            overrides.insert(0, "+experiment=beyond_tune")
        compose_cfg(*overrides)


def test_schema_tables_come_from_the_dataclasses(hooks: tuple[ModuleType, ModuleType]) -> None:
    ct, _ = hooks
    classes = [c.__name__ for c in ct.group_schemas(CONF_DIR, "rag_method")]
    assert classes[0] == "RagMethodConfig" and {"HybridConfig", "MetadataHybridConfig", "LexicalConfig"} <= set(classes)
    from t2exp.config.schema import ContextConfig

    table = ct.schema_table(ContextConfig, "context.")
    assert "| `context.documents` | `int \\| None` | `1` |" in table  # the field, its type, its default and its comment
    assert "best first (null: all k)" in table


def test_every_config_group_has_a_page(hooks: tuple[ModuleType, ModuleType]) -> None:
    ct, _ = hooks
    directive = re.compile(r"^<!--\s*t2exp:options\s+(\S+)\s*-->", re.MULTILINE)
    shown = {m.group(1) for p in DOCS.rglob("*.md") for m in directive.finditer(p.read_text(encoding="utf-8"))}
    assert set(ct.groups(CONF_DIR)) <= shown


def test_results_tables_render_from_the_expected_files(hooks: tuple[ModuleType, ModuleType]) -> None:
    _, et = hooks
    md = et.results_table(ROOT / "expected", "reproduction")
    assert "| base, paper | 28.1 [25.5, 30.9] | 28.1 |" in md
    assert "`python -m t2exp +experiment=reproduction protocol=paper rag_method=base embedder.dtype=float32`" in md
    index = et.index_table(ROOT / "expected")
    assert "`t2exp reproduce main_job`" in index and "CI runs `default-retrieval`" in index


# a file or module the docs name in a code span: `src/t2exp/...py`, `t2exp/...py`, `tests/...py`, `conf/...yaml`,
# `t2exp.module.name`; MLflow tags that look like module paths are not modules
FILE = re.compile(
    r"`((?:src/)?t2exp/[\w/]+\.py|(?:tests|benchmarks|scripts)/[\w/.-]+\.(?:py|sh)"
    r"|conf/[\w/]+\.yaml|prompts/[\w/]+\.(?:j2|jsonl|md))`"
)
MODULE = re.compile(r"`(t2exp(?:\.\w+)+)`")
TAGS = {"version", "error", "resumed_from", "rerun", "tuned_on", "reported_on", "kind", "predictions", "log"}  # MLflow tags, t2exp.log


def _exists(dotted: str) -> bool:
    """``t2exp.a.b[.name]``: a module or package of src/t2exp, or a top-level name defined in one."""
    import ast

    parts = dotted.split(".")
    base = ROOT / "src"
    for i in range(len(parts), 0, -1):
        path = base.joinpath(*parts[:i])
        for module in (path.with_suffix(".py"), path / "__init__.py"):
            if module.is_file():
                if i == len(parts):
                    return True
                tree = ast.parse(module.read_text(encoding="utf-8"))
                names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
                names |= {
                    t.id
                    for n in tree.body
                    if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                    if isinstance(t, ast.Name)
                }
                names |= {a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
                names |= {
                    e.value
                    for n in tree.body
                    if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
                    and isinstance(n.value, (ast.List, ast.Tuple))
                    for e in n.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }  # lazy names of __all__
                return parts[i] in names
    return False


def test_the_files_and_modules_the_docs_name_exist() -> None:
    missing = []
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for m in FILE.finditer(text):
            path = m.group(1)
            candidates = [ROOT / path, ROOT / "src" / path]
            if not any(p.exists() for p in candidates):
                missing.append(f"{page.relative_to(ROOT)}: {path}")
        for m in MODULE.finditer(text):
            dotted = m.group(1)
            if dotted.split(".")[1] in TAGS:
                continue
            if not _exists(dotted):
                missing.append(f"{page.relative_to(ROOT)}: {dotted}")
    assert not missing, "\n".join(missing)


# a fenced bash or python block that the line `<!-- runnable -->` precedes: every command of a bash block
# is run by test_the_runnable_blocks_run, the experiment app's with SMALL and the marker's own overrides
# added (`<!-- runnable: rag_method=hybrid -->`: one method where a sweep would index with several;
# later overrides win); a python block is run as a script
RUNNABLE = re.compile(r"^<!-- runnable(?::([^>]*))? -->\n```(bash|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SMALL = ["dataset.limit=2", "generator=none"]
# what a reader copies from an earlier command's output into a later command: the placeholder, and
# the line of the output that gives it (the latest one printed on the same page)
PRINTED = {
    "<cell run id>": re.compile(r"^MLflow run (\w{32}) in experiment", re.MULTILINE),
    "<parent run id>": re.compile(r"sweep done: MLflow parent run (\w{32})"),
    "<score run id>": re.compile(r"logged MLflow run (\w{32})"),
    "<predictions file>": re.compile(r"^predictions: (\S+)", re.MULTILINE),
}


def runnable_commands() -> list[tuple[str, list[str], list[str]]]:
    """(page, argv, the marker's overrides) of every command in a runnable block of the README and
    the docs pages; a python block is one argv ``["python", "-c", SOURCE]``."""
    import shlex

    out = []
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for extra, language, block in RUNNABLE.findall(page.read_text(encoding="utf-8")):
            name = str(page.relative_to(ROOT))
            if language == "python":
                out.append((name, ["python", "-c", block], []))
                continue
            for line in block.replace("\\\n", " ").splitlines():
                argv = shlex.split(re.sub(r"<[\w ]+>", lambda m: f"'{m.group(0)}'", line), comments=True)  # a placeholder: one word
                if argv:
                    out.append((name, argv, extra.split()))
    return out


def test_the_runnable_blocks_run(tmp_path: Path, warm_cache: Path) -> None:
    """Each command of a runnable block, in order, in one fresh working directory (a report reads the
    sweeps before it), in process: ``python -m t2exp``/``t2exp`` lines as typed, the app's with
    ``dataset.limit=2 generator=none`` and the test's warm embedding cache added, a placeholder
    (``<cell run id>``) filled from what an earlier command of the page printed; a python block as
    a script."""
    import os

    from helpers.command import cli
    from helpers.tracking import seed_tracking
    from t2exp.__main__ import main
    from t2exp.cli import COMMANDS

    commands = runnable_commands()
    assert {page for page, _, _ in commands} >= {"README.md", "docs/reproduction.md", "docs/compare.md"}
    seed_tracking(tmp_path / "mlruns")
    printed: dict[tuple[str, str], str] = {}
    ran: dict[tuple[str, ...], str] = {}
    for page, argv, extra in commands:
        if argv[:2] == ["python", "-c"]:
            cwd = os.getcwd()
            try:
                os.chdir(tmp_path)
                exec(compile(argv[2], page, "exec"), {"__name__": "__main__"})
            finally:
                os.chdir(cwd)
            continue
        prefix = 3 if argv[:3] == ["python", "-m", "t2exp"] else 1 if argv[0] == "t2exp" else 0
        assert prefix, f"{page}: {shlex_join(argv)}: a runnable block holds t2exp commands only"
        args = [printed.get((page, a), a) for a in argv[prefix:]]
        unfilled = [a for a in args if a.startswith("<") and a.endswith(">")]
        assert not unfilled, f"{page}: {shlex_join(argv)}: no earlier command of the page printed {unfilled}"
        if not args or args[0] not in COMMANDS:  # the experiment app
            args += [*SMALL, *extra, f"paths.cache={warm_cache}", "tracking.traces=false"]
            if tuple(args) in ran:  # the same run, as another page shows it: ran once, its output read again
                output = ran[tuple(args)]
            else:
                proc = cli(main, args, cwd=tmp_path)
                assert proc.returncode == 0, f"{page}: {shlex_join(argv)} -> exit {proc.returncode}\n{proc.stderr[-3000:]}"
                output = ran[tuple(args)] = proc.stdout + proc.stderr
        else:
            proc = cli(main, args, cwd=tmp_path)
            assert proc.returncode == 0, f"{page}: {shlex_join(argv)} -> exit {proc.returncode}\n{proc.stderr[-3000:]}"
            output = proc.stdout + proc.stderr
        for placeholder, line in PRINTED.items():
            for found in line.findall(output):
                printed[(page, placeholder)] = found


def shlex_join(argv: list[str]) -> str:
    import shlex

    return shlex.join(argv)


# what a reader of the site should not meet: issue numbers, work-session history, Markdown escapes
# shown as text (a backslash before a bracket in a generated table)
NOT_FOR_READERS = {"an issue number": r"(?i)\bissues? #?\d", "session history": r"(?i)session", "a shown escape": r"\\\["}


def test_the_built_site_speaks_to_users(tmp_path: Path) -> None:
    """``mkdocs build --strict`` as CI runs it; the pages' text holds none of NOT_FOR_READERS."""
    import html
    import os
    import subprocess

    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = []
    for page in sorted(site.rglob("*.html")):
        markup = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        text = html.unescape(re.sub(r"<[^>]+>", " ", markup))
        for what, pattern in NOT_FOR_READERS.items():
            found += [
                f"{page.relative_to(site)}: {what}: …{text[max(0, m.start() - 60) : m.end() + 30]!r}…" for m in re.finditer(pattern, text)
            ]
    assert len(list(site.rglob("*.html"))) > 20 and not found, "\n".join(found)

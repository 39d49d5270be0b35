"""The package layout: a folder per stage, a bottom layer that imports no stage, no reach into
another package's private module. Read from the source with ``ast`` (imports inside functions
count too), so a new module that breaks a rule fails here, not in review."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from helpers.paths import ROOT

PACKAGE = ROOT / "src" / "t2exp"
# the package's entry point (`python -m t2exp`, the commands in cli/) and its error types
LOOSE = {"__init__", "__main__", "errors"}
STAGES = {"data", "index", "methods", "answering", "generators", "evaluation", "tracking", "pipeline", "text", "cli"}
COMPONENTS = {"embedders", "stores", "methods", "rerankers", "generators"}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every t2exp module ``path`` imports (``from a import b`` counts as ``a.b`` when b is a module)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "t2exp")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "t2exp" and node.level == 0:
            for a in node.names:
                sub = PACKAGE.parent / (node.module.replace(".", "/") + f"/{a.name}")
                out.add(f"{node.module}.{a.name}" if sub.with_suffix(".py").exists() or sub.is_dir() else node.module)
    return out


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def test_only_the_entry_points_are_loose_modules():
    loose = {p.stem for p in PACKAGE.glob("*.py")}
    assert loose == LOOSE, f"a module outside the stage folders: {sorted(loose - LOOSE)}"
    assert STAGES | COMPONENTS <= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_reaches_into_another_packages_private_module(name):
    own = name.rsplit(".", 1)[0] if MODULES[name].name != "__init__.py" else name
    for imported in _imports(MODULES[name]):
        parts = imported.split(".")
        private = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
        if private:
            owner = ".".join(parts[: private[0]])
            assert own == owner or own.startswith(owner + "."), f"{name} imports {imported}, private to {owner}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("t2exp.infra")))
def test_infra_is_the_bottom_layer(name):
    """infra/ serves every stage and calls none: it imports only itself and t2exp.errors."""
    for imported in _imports(MODULES[name]):
        assert imported.startswith("t2exp.infra") or imported == "t2exp.errors", f"{name} imports {imported}"


def test_the_checks_read_imports_inside_functions():
    """The reader itself: an import inside a function counts (a cycle or a climb hidden there)."""
    nested = {
        name: [
            m
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.FunctionDef)
            for m in ast.walk(n)
            if isinstance(m, ast.ImportFrom) and (m.module or "").startswith("t2exp")
        ]
        for name, path in MODULES.items()
    }
    name, found = next((n, f) for n, f in sorted(nested.items()) if f)
    assert all(m.module in " ".join(_imports(MODULES[name])) for m in found)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (node -> the nodes it imports), or None."""
    from graphlib import CycleError, TopologicalSorter

    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) is not None and _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("level", ["module", "package"])
def test_no_import_cycles(level):
    """Modules, and the stage packages (data, index, methods, ...), import each other without a
    cycle, counting imports inside functions: the packages form layers, so a reader can start at
    the bottom (infra, text, data) and climb."""
    key = (lambda m: m) if level == "module" else _package
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        graph.setdefault(key(name), set()).update(key(i) for i in _imports(path) if i in MODULES and key(i) != key(name))
    cycle = _cycle(graph)
    assert cycle is None, f"an import cycle between {level}s: {' -> '.join(cycle)}"


# cell keys of four configs as the tree before the stage-package move computed them (7a95d51): a run
# recorded then resumes now only if its key is the same (moving a class that a _target_ names, or
# a default into another module, must not change it)
# the cells with a generator: the keys since a generator's install hint (what to pip install when its
# weights are missing) left the key, as every operational key has
RECORDED_KEYS = {
    (): "cd4fab49b50d3fec",
    ("rag_method=hybrid", "generator=none"): "88c20689671f3eeb",
    # e5 then loaded the hub's latest weights; its pinned revision now is another cell (on purpose), so
    # the run recorded then is named by the revision it had
    ("rag_method=reranker", "embedder=e5", "embedder.revision=null", "k=5"): "0c44f57f1da82a42",
    ("protocol=paper", "rag_method=hybrid"): "5996cffc586845b3",
}


@pytest.mark.parametrize("overrides", sorted(RECORDED_KEYS), ids=lambda o: " ".join(o) or "default")
def test_runs_recorded_before_the_move_keep_their_cell_key(overrides):
    from omegaconf import OmegaConf

    from helpers.app import compose_cfg
    from t2exp.pipeline.identity import cell_key

    cfg = compose_cfg(*overrides, "paths.work=/w", "paths.cache=/w/c", "paths.models=/m")
    key = cell_key(OmegaConf.to_container(cfg, resolve=True), "data-fingerprint")
    assert key == RECORDED_KEYS[overrides], (
        "the cell key changed: runs recorded before would not resume (if a prompt template or a default changed on purpose, "
        "record the new key here)"
    )


def test_importing_t2exp_registers_nothing():
    """Importing t2exp (or its evaluation API) leaves Hydra's ConfigStore as it was: the schemas
    are registered by what composes (``t2exp.config.register``: the app, t2exp score). A fresh
    interpreter, because this one has composed long ago."""
    import subprocess
    import sys

    probe = (
        "from hydra.core.config_store import ConfigStore\n"
        "import t2exp, t2exp.evaluation, t2exp.evaluation.metrics, t2exp.config\n"
        "before = 't2exp_schema.yaml' in ConfigStore.instance().repo\n"
        "t2exp.config.register()\n"
        "print(before, 't2exp_schema.yaml' in ConfigStore.instance().repo)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120).stdout.split()
    assert out == ["False", "True"]


def test_one_helper_makes_a_message_one_line():
    """errors.one_line is the one helper that makes a message one line (no hand-written
    ``' '.join(str(exc).split())[:N]``): collapse whitespace, cut with an ellipsis."""
    import re

    from t2exp.errors import one_line

    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 10, 5) == "xxxx…" and one_line("short", 5) == "short"
    twin = re.compile(r"""["']\s["']\.join\(str\([^()]*\)(\.split\([^()]*\)\[0\])?\.split\(\)\)""")
    files = [p for p in PACKAGE.rglob("*.py") if p.name != "errors.py"]  # errors.py holds the helper
    assert [str(p.relative_to(PACKAGE)) for p in files if twin.search(p.read_text(encoding="utf-8"))] == []


HYDRA_INTERNAL = re.compile(r"\bhydra\._internal\b|\bfrom\s+hydra\s+import\s+[^\n]*\b_internal\b")


def _hydra_internal_users(root: Path) -> list[str]:
    """The files under ``root`` that name Hydra's private package ``hydra._internal``."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if HYDRA_INTERNAL.search(p.read_text(encoding="utf-8")))


def test_one_module_uses_hydra_internals():
    """Hydra's private ``hydra._internal`` (its argv parser, basic sweeper, main Hydra, reporter) is
    reached through ``t2exp.infra.hydra_internals`` only: a Hydra release that moves them breaks
    one file (the package and its ``hydra_plugins``, imports and strings alike)."""
    assert _hydra_internal_users(PACKAGE.parent) == ["t2exp/infra/hydra_internals.py"]


def test_a_use_of_hydra_internals_is_found(tmp_path):
    (tmp_path / "a.py").write_text('X = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"\n')
    (tmp_path / "b.py").write_text("from hydra import _internal\n")
    (tmp_path / "c.py").write_text("from hydra.core import plugins  # hydra_internal is no module\n")
    assert _hydra_internal_users(tmp_path) == ["a.py", "b.py"]

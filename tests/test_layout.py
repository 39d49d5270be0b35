"""The package layout: a folder per stage, a bottom layer that imports no stage, no reach into
another package's private module. Read from the source with ``ast`` (imports inside functions
count too), so a new module that breaks a rule fails here, not in review."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "t2exp"
# the package's entry points: `python -m t2exp` and the three documented commands
LOOSE = {"__init__", "__main__", "errors", "score", "compare", "report"}
STAGES = {"data", "index", "methods", "answering", "generators", "evaluation", "tracking", "pipeline"}
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
    mod = MODULES["t2exp.pipeline.cell"]
    src = mod.read_text(encoding="utf-8")
    nested = [m for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef)
              for m in ast.walk(n) if isinstance(m, ast.ImportFrom) and (m.module or "").startswith("t2exp")]
    assert nested and all(f"{m.module}" in " ".join(_imports(mod)) for m in nested)

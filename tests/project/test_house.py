"""House rules read off the source tree: the pipeline reads its components through their
declared protocols, never ``getattr`` with a default; tests take shared helpers from tests/helpers/,
never from conftest.py, and import without try/except."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import t2exp
from helpers.paths import TESTS

SRC = Path(t2exp.__file__).parent
# getattr with a default in pipeline/ on what is no component: an Optuna direction, an enum or a
# string (tuning.py)
NOT_COMPONENTS = {("tuning.py", "direction")}


def getattr_defaults(folder: Path) -> list[tuple[str, str]]:
    """``(file, object)`` of every ``getattr(object, name, default)`` under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 3:
                found.append((path.relative_to(folder).as_posix(), ast.unparse(node.args[0])))
    return found


def test_the_pipeline_reads_components_through_their_protocols():
    assert set(getattr_defaults(SRC / "pipeline")) - NOT_COMPONENTS == set()


def test_a_getattr_default_is_caught(tmp_path):
    (tmp_path / "experiment.py").write_text("n = getattr(parts.embedder, 'batch_size', 256)\nm = getattr(x, 'y')\n")
    assert getattr_defaults(tmp_path) == [("experiment.py", "parts.embedder")]


def test_the_protocols_declare_what_the_pipeline_reads():
    from t2exp.embedders import Embedder
    from t2exp.generators import Generator
    from t2exp.index.store import Store
    from t2exp.methods import RagMethod

    assert "batch_size" in Embedder.__annotations__
    assert "inserted" in Store.__annotations__
    assert "batch_size" in Generator.__annotations__
    assert {"needs_index", "needs_generator", "needs_reranker"} <= set(RagMethod.__annotations__)


def test_a_method_class_without_its_flags_is_one_config_error():
    from t2exp.errors import ConfigError
    from t2exp.pipeline.build import build_method

    with pytest.raises(ConfigError, match=r"rag_method._target_=collections.OrderedDict: a method class declares needs_index"):
        build_method({"_target_": "collections.OrderedDict", "name": "x"})


def test_plain_hits_and_rankings_read_alike():
    from t2exp.methods import Ranking

    plain = [("a", 1.0)]
    ranked = Ranking(plain, dense={"a": 0.5}, depth=1)
    assert Ranking.of(ranked) is ranked
    assert (Ranking.of(plain).dense, Ranking.of(plain).depth, list(Ranking.of(plain))) == ({}, None, plain)


def catches_import_error(node: ast.Try) -> bool:
    """Whether a handler of ``node`` catches ImportError (or ModuleNotFoundError, or anything)."""
    names = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
    for handler in node.handlers:
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if handler.type is None or any(isinstance(t, ast.Name) and t.id in names for t in types):
            return True
    return False


def import_faults(source: str) -> list[str]:
    """What a test module must not do with its imports: take helpers from ``conftest`` (they live in
    tests/helpers/; conftest.py holds only fixtures and hooks) or wrap an import in ``try``/``except ImportError``
    (a missing optional package is ``pytest.importorskip``; tests/ is on the path, so one name works)."""
    faults = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "conftest":
            faults.append(f"line {node.lineno}: from conftest import")
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "conftest" for a in node.names):
            faults.append(f"line {node.lineno}: import conftest")
        elif (
            isinstance(node, ast.Try)
            and catches_import_error(node)
            and any(isinstance(n, ast.Import | ast.ImportFrom) for stmt in node.body for n in ast.walk(stmt))
        ):
            faults.append(f"line {node.lineno}: an import inside try/except ImportError")
    return faults


def test_tests_import_helpers_plainly():
    found = {p.relative_to(TESTS).as_posix(): f for p in sorted(TESTS.rglob("*.py")) if (f := import_faults(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_an_import_from_conftest_or_in_try_is_caught():
    source = "from conftest import cli\nimport conftest\ntry:\n    from tests.fakes import X\nexcept ImportError:\n    pass\n"
    assert import_faults(source) == [
        "line 1: from conftest import",
        "line 2: import conftest",
        "line 3: an import inside try/except ImportError",
    ]
    fine = "from helpers.app import run_app\npytest.importorskip('openai')\ntry:\n    import x\nfinally:\n    pass\n"
    assert import_faults(fine) == []


# --- the walk of a run ----------------------------------------------------------------------------
def stays(modules: list[str]) -> list[str]:
    """``modules`` with each run of one module collapsed into one stay."""
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def climbs_back(walk: list[str]) -> int:
    """How often the walk goes from a module A to another B and straight back to A: stays i and
    i + 2 in the same module (A → B → A)."""
    return sum(walk[i] == walk[i + 2] for i in range(len(walk) - 2))


def test_stays_and_climbs_back_are_counted_so():
    walk = stays(["cell", "cell", "stop", "cell", "build", "build", "steps", "build"])
    assert walk == ["cell", "stop", "cell", "build", "steps", "build"]
    assert climbs_back(walk) == 2


def pipeline_walk(args: list[str], tmp_path: Path) -> list[tuple[str, str]]:
    """``(module, function)`` of every function of a ``t2exp.pipeline`` module (comprehensions and
    generator resumes included) entered, in order, from the call of ``t2exp.pipeline.cell.run`` to its return,
    in a real in-process ``python -m t2exp <args>`` (``sys.setprofile``: calls in other packages
    and in other threads are not seen)."""
    import sys

    from helpers.app import run_app

    entered: list[tuple[str, str]] = []
    inside = [False]

    def profile(frame, event, arg):
        module = frame.f_globals.get("__name__", "")
        is_run = module == "t2exp.pipeline.cell" and frame.f_code.co_name == "run"
        if event == "call" and (inside[0] or is_run) and module.startswith("t2exp.pipeline."):
            inside[0] = True
            entered.append((module.removeprefix("t2exp.pipeline."), frame.f_code.co_name))
        elif event == "return" and is_run:
            inside[0] = False

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        run_app(args, tmp_path / "cache", tmp_path / "track")
    finally:
        sys.setprofile(before)
    return entered


def test_a_cell_walks_load_key_build_steps_log_without_climbing_back(tmp_path):
    """A cell reads top to bottom (load → key, once → build → steps → log). Its walk through
    ``pipeline/`` (:func:`pipeline_walk` of a retrieval-only run, one question in each of the two
    bundled subsets, collapsed into :func:`stays`) computes the key once, starts and ends in the
    signal handling, and has at most 25 stays and 6 climbs back (:func:`climbs_back`): no steps
    reaching into the writer's tally and progress bar, no tally spans recorded from outside it."""
    entered = pipeline_walk(["generator=none", "dataset.limit=1"], tmp_path)
    assert [f for _, f in entered if f == "cell_key"] == ["cell_key"]  # the key, once
    walk = stays([m for m, _ in entered])
    assert walk[:2] == ["cell", "stop"] and walk[-1] == "stop", walk  # signal handling around the whole cell
    assert len(walk) <= 25 and climbs_back(walk) <= 6, f"{len(walk)} stays, {climbs_back(walk)} climbs back: {' → '.join(walk)}"


# --- one comparison engine -------------------------------------------------------------------------
# what only the engine (t2exp.evaluation.paired) does: pair two runs' questions, compare the pair,
# and correct the p-values of the pairs compared together
ENGINE_STEPS = ("pair_predictions", "compare_values", "holm")


def callers(folder: Path, names: tuple[str, ...]) -> set[tuple[str, str, str]]:
    """``(file, function, name)`` of every call of one of ``names`` under ``folder``."""
    found = set()
    for path in sorted(folder.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
                        found.add((path.relative_to(folder).as_posix(), fn.name, node.func.id))
    return found


def test_runs_are_paired_compared_and_holm_corrected_by_one_engine():
    assert callers(SRC, ENGINE_STEPS) == {
        ("evaluation/paired.py", "compare_pairs", "pair_predictions"),
        ("evaluation/paired.py", "compare", "compare_values"),
        ("evaluation/paired.py", "compare_pairs", "holm"),
    }


def test_a_second_place_that_corrects_p_values_is_caught(tmp_path):
    (tmp_path / "pairs.py").write_text("def build(ps):\n    return [holm(ps), other(ps)]\n")
    assert callers(tmp_path, ENGINE_STEPS) == {("pairs.py", "build", "holm")}


# --- one cell path, one record ---------------------------------------------------------------------
def test_a_cell_is_loaded_keyed_and_built_in_one_place():
    """A whole cell and one shard of a sharded cell share one prelude (``collect`` loads a cell to
    merge it, and building alone loads one when it is given none)."""
    assert callers(SRC, ("load_cell", "build_components")) == {
        ("pipeline/cell.py", "run_cell", "load_cell"),
        ("pipeline/cell.py", "run_cell", "build_components"),
        ("pipeline/build.py", "build_components", "load_cell"),
        ("cli/collect.py", "collect", "load_cell"),
    }


def test_an_unsharded_cell_is_the_one_shard_layout_run_by_one_path(tmp_path):
    """An unsharded cell is shard 0 of 1: its files are the cell's own, and a cell's run is logged
    from one place whether it is whole or one shard of a sharded cell."""
    from omegaconf import OmegaConf

    from t2exp.pipeline.predictions import PREDICTIONS_FILE
    from t2exp.pipeline.shards import Layout, shard_of

    assert shard_of(OmegaConf.create({"shards": None, "shard": None})) == (0, 1)
    assert Layout(tmp_path, 1).predictions(0) == tmp_path / PREDICTIONS_FILE
    assert Layout(tmp_path, 3).predictions(0) != tmp_path / PREDICTIONS_FILE
    assert Layout(tmp_path, 1).lock("k", 0) == "cell-k"
    assert callers(SRC, ("run_and_log",)) == {("pipeline/cell.py", "_answer", "run_and_log")}


def test_a_run_and_a_merge_score_a_cell_through_one_function():
    assert callers(SRC, ("score_cell",)) == {
        ("pipeline/steps.py", "run_steps", "score_cell"),
        ("pipeline/shard_merge.py", "merge_cell", "score_cell"),
    }


def rewritten_args(folder: Path) -> list[tuple[str, str]]:
    """``(file, object)`` of every assignment to ``object.args`` under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]:
                if isinstance(target, ast.Attribute) and target.attr == "args":
                    found.append((path.relative_to(folder).as_posix(), ast.unparse(target.value)))
    return found


def test_no_exception_message_is_rewritten_in_place():
    """An error that says more is a new exception; a log record's arguments are the logging
    filter's to clean."""
    assert rewritten_args(SRC) == [("infra/redaction.py", "record")]


def test_an_exception_rewritten_in_place_is_caught(tmp_path):
    (tmp_path / "cell.py").write_text("try:\n    run()\nexcept Exception as exc:\n    exc.args = ('more',)\n    raise\n")
    assert rewritten_args(tmp_path) == [("cell.py", "exc")]


def test_each_question_is_scored_once_and_its_row_read_back_as_written(tmp_path):
    """A run computes each question's metrics once, when its row is made, and scores the rows it
    made; a row read back from ``predictions.jsonl`` (a resume, a merge) is the line it was."""
    import json
    import sys

    from t2exp.evaluation import metrics

    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is metrics.question_metrics.__code__:
            calls.append(frame.f_locals["gold_context"])

    from helpers.app import run_app

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        run_app(["generator=none", "dataset.limit=1"], tmp_path / "cache", tmp_path / "track")
    finally:
        sys.setprofile(before)
    (path,) = (tmp_path / "cache" / "runs").glob("*/predictions.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(calls) == len(lines) == 2  # one question of each bundled subset
    from t2exp.evaluation.scoring.cell_rows import Prediction

    for line in lines:
        row = json.loads(line)
        assert json.dumps(Prediction.from_json(row).to_json(), ensure_ascii=False) == line


_DOTTED = r"\bt2exp(?:\.[A-Za-z_]\w*)+"


def _unresolved(path: str) -> bool:
    """``t2exp.a.b.c`` names no module, or no attribute chain of the longest module it starts with."""
    import importlib

    parts = path.split(".")
    for i in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return True
        return False
    return True


def test_every_dotted_path_of_a_module_named_in_code_configs_and_docs_imports():
    """A ``t2exp.<module>...`` path in a docstring, a message, a config comment or a docs page
    names a module (and the class or function in it) that exists. Dotted names whose second part is
    no module of the package (MLflow tags such as ``t2exp.cell_key``, the file ``t2exp.log``) are
    not paths."""
    import re

    from helpers.paths import ROOT

    modules = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    files = [*SRC.rglob("*.py"), *(ROOT / "conf").rglob("*.yaml"), *(ROOT / "docs").rglob("*.md")]
    named = {(m, f.relative_to(ROOT)) for f in files for m in re.findall(_DOTTED, f.read_text(encoding="utf-8"))}
    broken = sorted(f"{f}: {m}" for m, f in named if m.split(".")[1] in modules and _unresolved(m))
    assert broken == []


def test_a_dotted_path_that_names_nothing_is_caught():
    assert _unresolved("t2exp.data.loader.Question") and _unresolved("t2exp.nothing_here")
    assert not _unresolved("t2exp.data.records.Question") and not _unresolved("t2exp.answering.safe_exec.safe_exec")


# --- size limits -----------------------------------------------------------------------------------
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 300, 60


def long_modules(folder: Path) -> set[str]:
    """Modules under ``folder`` of more than :data:`MAX_MODULE_LINES` lines."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*.py") if p.read_text(encoding="utf-8").count("\n") > MAX_MODULE_LINES}


def long_functions(folder: Path) -> set[str]:
    """``file:function`` of every function (method, nested function) under ``folder`` longer than
    :data:`MAX_FUNCTION_LINES` lines, its decorators and signature included."""
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                found.add(f"{path.relative_to(folder).as_posix()}:{node.name}")
    return found


def test_no_module_over_300_lines_and_no_function_over_60():
    assert long_modules(SRC) == set()
    assert long_functions(SRC) == set()


def test_a_long_module_and_a_long_function_are_caught(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "big.py").write_text(f"def f():\n{body}\n\n\ndef g():\n    return 1\n" + "\n" * 240)
    assert long_modules(tmp_path) == {"big.py"} and long_functions(tmp_path) == {"big.py:f"}


# --- lock names ------------------------------------------------------------------------------------


def hand_made_lock_names(folder: Path) -> set[str]:
    """``file:line`` of every lock taken under a name written in place (a string or an f-string)
    rather than built by :func:`t2exp.infra.cache.lock_name`."""
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("build_lock", "cell_lock"):
                names = node.args[1:2] + [k.value for k in node.keywords if k.arg == "key"]
                if any(isinstance(n, ast.Constant | ast.JoinedStr) for n in names):
                    found.add(f"{path.relative_to(folder).as_posix()}:{node.lineno}")
    return found


def test_every_lock_name_is_built_by_one_helper():
    assert hand_made_lock_names(SRC) == set()


def test_a_lock_named_in_place_is_caught(tmp_path):
    (tmp_path / "x.py").write_text('with cell_lock(d, f"cell-{key}"):\n    pass\nwith build_lock(d, lock_name("model", t)):\n    pass\n')
    assert hand_made_lock_names(tmp_path) == {"x.py:1"}


# --- names with one meaning ------------------------------------------------------------------------
def defined_twice(folder: Path) -> dict[str, list[str]]:
    """Class and type-alias names (CapWords) bound at module level in more than one module under
    ``folder``: one name, one thing (a second meaning, or a copy of the first)."""
    where: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names = [node.name] if isinstance(node, ast.ClassDef) else [t.id for t in targets if isinstance(t, ast.Name)]
            for name in names:
                if name[0].isupper() and not name.isupper():
                    where.setdefault(name, []).append(path.relative_to(folder).as_posix())
    return {name: files for name, files in where.items() if len(files) > 1}


def test_a_class_or_type_name_is_defined_once():
    assert defined_twice(SRC) == {}


def test_a_name_defined_twice_is_caught(tmp_path):
    (tmp_path / "a.py").write_text("Hits = list[tuple[str, float]]\nclass Table: ...\nLIMIT = 3\n")
    (tmp_path / "b.py").write_text("Hits = list[tuple[str, float]]\nclass Tables: ...\nLIMIT = 3\n")
    assert defined_twice(tmp_path) == {"Hits": ["a.py", "b.py"]}


# --- MLflow in one room: one client opener, the t2exp.* tag names ----------------------------------
MLFLOW_ROOM = "infra/mlflow_store.py"
NOT_TAGS = {"log", "json"}  # the files t2exp.log (reproduce) and t2exp.json (a lexical index)


def mlflow_outside(folder: Path) -> list[str]:
    """``file:line: what`` of each ``MlflowClient(`` call and each ``t2exp.<tag>`` string (not a
    docstring, a logger's name or a module path) under ``folder`` outside the MLflow room."""
    import re

    modules = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    found = []
    for path in sorted(folder.rglob("*.py")):
        name = path.relative_to(folder).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        documented = (n for n in ast.walk(tree) if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and ast.get_docstring(n))
        skip = {id(n.body[0].value) for n in documented}
        for node in ast.walk(tree):
            called = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
            called = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else called
            skip |= {id(a) for a in node.args} if called == "getLogger" else set()
            if called == "MlflowClient":
                found.append(f"{name}:{node.lineno}: MlflowClient(")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                tags = set(re.findall(r"\bt2exp\.(\w+)(?![.\w])", node.value)) - modules - NOT_TAGS
                found += [f"{name}:{node.lineno}: t2exp.{t}" for t in sorted(tags)]
    return [f for f in found if not f.startswith(MLFLOW_ROOM + ":")]


def test_mlflow_is_opened_and_its_tags_are_named_in_one_room():
    assert mlflow_outside(SRC) == []


def test_a_second_client_or_a_tag_literal_is_caught(tmp_path):
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "mlflow_store.py").write_text('C = MlflowClient(tracking_uri=u)\nT = "t2exp.cell_key"\n')
    (tmp_path / "cli.py").write_text(
        '"""Reads ``t2exp.cell_key``."""\nimport logging\nlog = logging.getLogger("t2exp.cli")\n'
        'c = mlflow.MlflowClient(tracking_uri=u)\nw = f"tags.`t2exp.sweep_dir` = {x}"\np = "t2exp.cli.score"\nf = "t2exp.log"\n'
    )
    assert mlflow_outside(tmp_path) == ["cli.py:4: MlflowClient(", "cli.py:5: t2exp.sweep_dir"]


# --- the architecture page is drawn from the code ---------------------------------------------------
def architecture_drift(src: Path, page: str) -> tuple[set[str], set[str]]:
    """Modules under ``src`` the page does not name (by their path or its end: ``module.py`` in
    its folder's table), and ``*.py`` names on the page that no module under ``src`` has."""
    import re

    modules = {p.relative_to(src).as_posix() for p in src.rglob("*.py") if p.name != "__init__.py"}
    named = set(re.findall(r"`([\w/]+\.py)`", page))
    unnamed = {m for m in modules if not any(m == n or m.endswith(f"/{n}") for n in named)}
    basenames = {m.rsplit("/", 1)[-1] for m in modules} | {"__init__.py"}
    stale = {n for n in named if n.rsplit("/", 1)[-1] not in basenames}
    return unnamed, stale


def test_the_architecture_page_names_every_module_and_only_modules_that_exist():
    from helpers.paths import ROOT

    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert architecture_drift(SRC, page) == (set(), set())


def test_a_module_the_page_leaves_out_or_a_module_gone_is_caught(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "loader.py").write_text("")
    (tmp_path / "data" / "rows.py").write_text("")
    assert architecture_drift(tmp_path, "`loader.py` reads; `gone.py` went") == ({"data/rows.py"}, {"gone.py"})

"""One owner for every default: the schema dataclass. An option YAML states only what differs from
what it inherits (its schema, or the option it extends); a constructor that a ``_target_`` names
has no default that differs from its schema's; the run-level helpers take theirs from the schema."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import MISSING, OmegaConf

from helpers.app import compose_cfg
from t2exp.config import SCHEMAS
from t2exp.config.components import target_class
from t2exp.config.schema import Config, DatasetConfig
from t2exp.infra.paths import CONF_DIR

GROUPS = ("dataset", "embedder", "store", "reranker", "generator", "rag_method")
# groups whose options take their schema from the root config's field, not from their defaults list
ROOT_FIELD_SCHEMAS = {"dataset": DatasetConfig}


def _raw(conf: Path, group: str, name: str) -> dict:
    return yaml.safe_load((conf / group / f"{name}.yaml").read_text()) or {}


def _is_global(conf: Path, group: str, name: str) -> bool:
    """An option whose header says ``# @package _global_``: its keys sit at the root (``rag_method: {...}``,
    ``document: {...}``), its schemas at the package its defaults list names (``@rag_method``)."""
    return any(line.strip() == "# @package _global_" for line in (conf / group / f"{name}.yaml").read_text().splitlines()[:3])


def _nest(package: str, values: dict) -> dict:
    for part in reversed([p for p in package.split(".") if p and p != "_here_"]):
        values = {part: values}
    return values


def _inherited(conf: Path, group: str, name: str) -> dict:
    """What an option would be without its own keys: its defaults list (schemas, other options of
    the group) merged in order; a ``_global_`` option starts from the root schema's run-level keys."""
    out: dict = _schema_values(ROOT_FIELD_SCHEMAS[group]) if group in ROOT_FIELD_SCHEMAS else {}
    if _is_global(conf, group, name):
        out = {k: v for k, v in _schema_values(Config).items() if k not in GROUPS}
    for entry in _raw(conf, group, name).get("defaults", []):
        if not isinstance(entry, str) or entry == "_self_":
            continue  # a nested group (rag_method=reranker's reranker) is checked as its own option
        if entry.startswith("/schema/"):
            spec, _, package = entry.partition("@")
            _, _, g, n = spec.split("/")
            out = _merge(out, _nest(package, _schema_values(SCHEMAS[(g, n)])))
        else:
            parent = _inherited(conf, group, entry)
            out = _merge(out, _merge(parent, {k: v for k, v in _raw(conf, group, entry).items() if k != "defaults"}))
    return out


def _schema_values(schema: type) -> dict:
    return OmegaConf.to_container(OmegaConf.structured(schema), resolve=False)


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _restated(own: dict, inherited: dict, path: str = "") -> list[str]:
    found = []
    for key, value in own.items():
        if key == "defaults":
            continue
        if isinstance(value, dict) and isinstance(inherited.get(key), dict):
            found += _restated(value, inherited[key], f"{path}{key}.")
        elif key in inherited and not isinstance(value, dict) and inherited[key] == value:
            found.append(f"{path}{key}={value!r}")
    return found


def restated_defaults(conf: Path) -> list[str]:
    """Every key an option YAML (or the root config.yaml) sets to the value it already inherits, as
    ``group/option: key=value``."""
    root = {k: v for k, v in (yaml.safe_load((conf / "config.yaml").read_text()) or {}).items() if k != "hydra"}
    return [f"config: {item}" for item in _restated(root, _schema_values(Config))] + [
        f"{group}/{f.stem}: {item}"
        for group in GROUPS
        for f in sorted((conf / group).glob("*.yaml"))
        for item in _restated(_raw(conf, group, f.stem), _inherited(conf, group, f.stem))
    ]


def test_no_option_yaml_restates_what_it_inherits():
    assert restated_defaults(CONF_DIR) == []


def test_a_restated_default_is_caught(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    with (conf / "embedder" / "minilm.yaml").open("a") as f:
        f.write("batch_size: 32\n")  # SentenceTransformerConfig's own default
    with (conf / "generator" / "qwen_coder_0_5b.yaml").open("a") as f:
        f.write("sampling:\n  max_tokens: 96\n")  # what it inherits from qwen_coder_1_5b
    with (conf / "dataset" / "finqa.yaml").open("a") as f:
        f.write("fold_role: eval\n")  # DatasetConfig's
    with (conf / "config.yaml").open("a") as f:
        f.write("context:\n  documents: 1\n")  # ContextConfig's
    bm25f = conf / "rag_method" / "bm25f.yaml"  # a `@package _global_` option: its schema sits at rag_method
    bm25f.write_text(bm25f.read_text().replace("  name: bm25f\n", "  name: bm25f\n  candidate_depth: 50\n"))
    with bm25f.open("a") as f:
        f.write("query:\n  template: '{question}'\n")  # QueryConfig's, at the root
    assert restated_defaults(conf) == [
        "config: context.documents=1",
        "dataset/finqa: fold_role='eval'",
        "embedder/minilm: batch_size=32",
        "generator/qwen_coder_0_5b: sampling.max_tokens=96",
        "rag_method/bm25f: rag_method.candidate_depth=50",
        "rag_method/bm25f: query.template='{question}'",
    ]


def _options() -> list[tuple[str, str]]:
    return [(group, f.stem) for group in GROUPS if group != "dataset" for f in sorted((CONF_DIR / group).glob("*.yaml"))]


def _composed(group: str, name: str):
    overrides = ["rag_method=reranker", f"reranker={name}"] if group == "reranker" else [f"{group}={name}"]
    return compose_cfg(*overrides)[group]


def constructor_drift(target, schema: type) -> list[str]:
    """Parameters of ``target`` whose default differs from the schema field of the same name, and
    those with a default (other than None) that no schema field owns: a value only the constructor knows."""
    defaults = {}
    for f in dataclasses.fields(schema):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = f.default_factory()
    drift = []
    for p in inspect.signature(target).parameters.values():
        if p.default is inspect.Parameter.empty:
            continue
        if p.name not in defaults:
            if p.default is not None:
                drift.append(f"{p.name}: constructor {p.default!r}, not in the schema")
            continue
        if defaults[p.name] == MISSING or dataclasses.is_dataclass(defaults[p.name]):
            continue  # sampling: a nested schema, turned into a Sampling by the app
        if p.default is None and defaults[p.name] in ([], {}):
            continue  # None for an empty list or dict: the usual spelling of a mutable default
        if p.default != defaults[p.name]:
            drift.append(f"{p.name}: constructor {p.default!r}, schema {defaults[p.name]!r}")
    return drift


def constructors(target: str) -> list:
    """What a ``_target_`` builds: the class it names, or every backend behind ``make_generator``."""
    from t2exp.generators.factory import BACKENDS, make_generator

    cls = target_class(target)
    return list(BACKENDS.values()) if cls is make_generator else [cls]


@pytest.mark.parametrize(("group", "name"), _options(), ids=lambda v: v)
def test_constructor_defaults_equal_the_schemas(group, name):
    node = _composed(group, name)
    schema = OmegaConf.get_type(node)
    if "_target_" not in node or schema is None or not dataclasses.is_dataclass(schema):
        pytest.skip(f"{group}={name}: no _target_ with a schema (retrieval only)")
    assert {c.__name__: constructor_drift(c, schema) for c in constructors(node._target_)} == {
        c.__name__: [] for c in constructors(node._target_)
    }


def test_every_generator_backend_is_checked():
    from t2exp.generators.vllm_backend import VLLMGenerator
    from t2exp.generators.vllm_server import VLLMServerGenerator

    assert {VLLMGenerator, VLLMServerGenerator} <= set(constructors("t2exp.generators.factory.make_generator"))


def test_a_constructor_default_that_drifts_is_caught():
    from t2exp.config.generators import TransformersGeneratorConfig

    def make(name, max_context_tokens: int = 8192, threads: int = 0, retries: int = 3, hint: str | None = None): ...

    assert constructor_drift(make, TransformersGeneratorConfig) == [
        "max_context_tokens: constructor 8192, schema 16384",
        "retries: constructor 3, not in the schema",
    ]


def test_run_level_helpers_take_their_defaults_from_the_schema():
    """The objects the app builds from ``context``, ``query`` and ``generator`` settings default to
    the schema's values (a test, an API user or a benchmark that builds them bare gets what the
    command line gets)."""
    from t2exp.answering.context import ContextShaper
    from t2exp.config.generators import GeneratorConfig
    from t2exp.config.schema import ContextConfig, QueryConfig
    from t2exp.methods.queries import QueryBuilder
    from t2exp.pipeline.steps import Settings

    cfg = compose_cfg()
    assert dataclasses.asdict(ContextShaper()) == dataclasses.asdict(ContextConfig()) == OmegaConf.to_container(cfg.context)
    assert ContextShaper().documents == 1  # the default run's generator reads the best document
    assert ContextShaper().mode == "focused"
    assert dataclasses.asdict(QueryBuilder()) == dataclasses.asdict(QueryConfig())
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert fields["grounding"] == GeneratorConfig.grounding == "check"
    assert fields["demos_k"] == GeneratorConfig.demos_k


def test_the_report_orders_every_shipped_method():
    """The report's method order is read from the options' own meta blocks: every rag_method option
    (bm25f, the default, too) has an order, none shared, the paper's methods first in its Table 3 order."""
    from t2exp.evaluation.reporting.tables import method_order
    from t2exp.infra.option_meta import option_metas

    metas = option_metas(CONF_DIR, "rag_method")
    assert {n for n, m in metas.items() if m.order is None} == set()
    assert len({m.order for m in metas.values()}) == len(metas)
    assert method_order() == (
        "pretrained_only",
        "oracle",
        "base",
        "hybrid",
        "reranker",
        "hyde",
        "summarization",
        "sumcontext",
        "bm25",
        "metadata_hybrid",
        "bm25f",
    )
    assert [n for n in method_order() if metas[n].in_paper] == list(method_order()[:8])


def test_a_new_option_takes_its_place_from_its_meta(tmp_path):
    from t2exp.infra.option_meta import display_order, option_metas

    shutil.copytree(CONF_DIR / "rag_method", tmp_path / "rag_method")
    (tmp_path / "rag_method" / "mine.yaml").write_text("name: mine\nmeta:\n  order: 0\n  display_name: Mine\n")
    (tmp_path / "rag_method" / "later.yaml").write_text("name: later\n")  # no meta: after every ordered one
    order = display_order(option_metas(tmp_path, "rag_method"))
    assert order[0] == "mine" and order[-1] == "later"


def test_meta_is_no_part_of_a_cell_or_a_constructor():
    """Editing a display name re-runs nothing: the cell key and the params leave meta out, and no
    constructor receives it."""
    from t2exp.pipeline.build import to_dict
    from t2exp.pipeline.identity import cell_key, without_meta

    plain = to_dict(compose_cfg("rag_method=hybrid"))
    renamed = to_dict(compose_cfg("rag_method=hybrid", "rag_method.meta.display_name=Other"))
    assert plain["rag_method"]["meta"]["display_name"] == "Hybrid BM25"
    assert cell_key(plain) == cell_key(renamed)
    assert "meta" not in without_meta(plain)["rag_method"]
    from t2exp.pipeline.build import build_method

    assert build_method(renamed["rag_method"]).name == "hybrid"  # Hybrid.__init__ takes no meta


def test_one_resampling_default_for_every_command():
    """A run's CIs, t2exp score, compare and report draw the same number of resamples with the
    same seed: stats.N_BOOT / CI_SEED, nowhere a literal."""
    from t2exp.cli import compare as compare_cli
    from t2exp.cli import report as report_cli
    from t2exp.cli import score as score_cli
    from t2exp.evaluation import comparisons, metrics, paired, stats
    from t2exp.evaluation.reporting import build

    def defaults(fn, *names):
        sig = inspect.signature(fn)
        return [sig.parameters[n].default for n in names]

    seen = {
        "compare --n-boot/--seed": [compare_cli.build_parser().get_default(d) for d in ("n_boot", "seed")],
        "report --n-boot/--seed": [report_cli.build_parser().get_default(d) for d in ("n_boot", "seed")],
        "score --bootstrap/--seed": [score_cli.build_parser().get_default(d) for d in ("bootstrap", "seed")],
        "compare_runs": defaults(comparisons.compare_runs, "n_boot", "seed"),
        "compare": defaults(paired.compare, "n_boot", "seed"),
        "compare_pairs": defaults(paired.compare_pairs, "n_boot", "seed"),
        "report": defaults(build.report, "n_boot", "seed"),
        "make_report": defaults(build.make_report, "n_boot", "seed"),
        "paired_bootstrap": defaults(stats.paired_bootstrap, "n_boot", "seed"),
        "permutation_test": defaults(stats.permutation_test, "n_perm", "seed"),
        "aggregate": defaults(metrics.aggregate, "n_boot", "seed"),
        "bootstrap_ci": defaults(metrics.bootstrap_ci, "n_boot", "seed"),
    }
    assert {k: v for k, v in seen.items() if v != [stats.N_BOOT, stats.CI_SEED]} == {}


def test_a_run_ci_and_a_paired_ci_share_one_resampler():
    # bootstrap_ci of x is the paired bootstrap of (x, 0): same resamples, same percentiles
    from t2exp.evaluation.metrics import bootstrap_ci
    from t2exp.evaluation.stats import paired_bootstrap

    xs = [1.0, 0.0, 0.5, 1.0, 0.0, 0.25, 1.0]
    lo, hi = bootstrap_ci(xs)
    b = paired_bootstrap(xs, [0.0] * len(xs))
    assert (lo, hi) == pytest.approx((100 * b.ci_low, 100 * b.ci_high), rel=1e-12)


def test_a_plugin_option_without_a_schema_may_carry_meta():
    """An untyped option (a plugin's YAML) is checked key by key against its constructor; its
    meta block is for readers and passes (build leaves it out)."""
    from omegaconf import OmegaConf

    from t2exp.config.components import build
    from t2exp.config.rules import check_untyped
    from t2exp.errors import ConfigError

    node = OmegaConf.create({"_target_": "t2exp.methods.base.Base", "name": "mine", "meta": {"display_name": "Mine", "order": 0}})
    check_untyped("rag_method", node)
    assert build(node, "rag_method").name == "mine"
    with pytest.raises(ConfigError, match="rag_method.metta is not a setting"):
        check_untyped("rag_method", OmegaConf.create({"_target_": "t2exp.methods.base.Base", "name": "mine", "metta": {}}))


# a schema default restated as a literal in code, read by ``ast``: a fallback (``cfg.get("k", 3)``,
# ``getattr(cfg, "k", 3)``), a parameter default (``def f(k: int = 3)``), a keyword argument
# (``Sampling(max_tokens=160)``), a function named for the setting that returns it (``def common_k():
# return 3``) or the metric it names (``"mrr_at_3"``); code reads the owner (``Config.k``, ...)
def owned() -> dict[str, object]:
    from t2exp.config.generators import AUX_MAX_TOKENS, GeneratorConfig
    from t2exp.config.schema import TrackingConfig

    return {
        "k": Config.k,
        "answer_mode": GeneratorConfig.answer_mode,
        "max_tokens": AUX_MAX_TOKENS,
        "trace_limit": TrackingConfig.trace_limit,
    }


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is not None


def _restates(node: ast.AST, own: dict[str, object]) -> bool:
    """Whether ``node`` restates an owned default (or the metric that names k): any literal as a
    fallback for an owned name; as a parameter default or a keyword argument, the owned value."""
    if isinstance(node, ast.Constant):
        return node.value == f"mrr_at_{Config.k}"
    if isinstance(node, ast.Call):
        args = node.args
        name = args[0] if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and len(args) == 2 else None
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(args) == 3:
            name = args[1]
        if isinstance(name, ast.Constant) and name.value in own and _literal(args[-1]):
            return True
        return any(k.arg in own and _literal(k.value) and k.value.value == own[k.arg] for k in node.keywords)  # type: ignore[attr-defined]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        a = node.args
        params = [*zip(a.args[len(a.args) - len(a.defaults) :], a.defaults, strict=True), *zip(a.kwonlyargs, a.kw_defaults, strict=True)]
        if any(p.arg in own and _literal(d) and d.value == own[p.arg] for p, d in params):  # type: ignore[union-attr]
            return True
        named = [n for n in own if n in node.name.split("_") or node.name.endswith(n)]
        returns = [r.value for r in ast.walk(node) if isinstance(r, ast.Return)]
        return any(_literal(r) and r.value == own[n] for n in named for r in returns)  # type: ignore[union-attr]
    return False


def literal_fallbacks(src: Path) -> list[str]:
    """``file:line: code`` of every restated default under ``src`` (config/, the owner, left out)."""
    own, found = owned(), []
    for p in sorted(src.rglob("*.py")):
        rel = p.relative_to(src).as_posix()
        if rel.startswith("config/"):
            continue
        text = p.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if _restates(node, own):
                found.append((node.lineno, f"{rel}:{node.lineno}: {lines[node.lineno - 1].strip()}"))
    return [line for _, line in sorted(found)]


def test_fallbacks_read_the_schema():
    """``k``, the answer mode, the auxiliary length and the trace limit have one owner, the schema;
    code that needs a fallback reads it there (``Config.k``, ``GeneratorConfig.answer_mode``, ...)."""
    import t2exp

    assert literal_fallbacks(Path(t2exp.__file__).parent) == []


def test_a_literal_fallback_is_caught(tmp_path):
    (tmp_path / "tracking").mkdir()
    code = [
        "def f(k: int = 3): ...",
        "k = cfg.get('k', 3)",
        'k = cfg.get("k", 3)',
        'k = getattr(cfg, "k", 3)',
        'metric = "mrr_at_3"',
        "def common_k(runs):",
        "    return 3",
        "s = Sampling(max_tokens=160)",
        'mode = cfg.get("answer_mode", "direct")',
        "fine = cfg.get('k', None), f(k=Config.k), cfg.get('other', 3), 'mrr_at_5 or mrr_at_3'",
    ]
    (tmp_path / "tracking" / "x.py").write_text("\n".join(code) + "\n")
    assert [line.split(":")[1] for line in literal_fallbacks(tmp_path)] == ["1", "2", "3", "4", "5", "6", "8", "9"]


def test_the_loader_takes_the_dataset_settings_without_defaults_of_its_own():
    """``load_subsets`` reads every ``dataset.*`` setting and the run's seed, and defaults none of
    them: ``DatasetConfig`` owns the defaults (``dataset_args`` fills them in for a caller without
    a composed config)."""
    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import load_subsets, loader_args

    params = inspect.signature(load_subsets).parameters
    fields = {f.name for f in dataclasses.fields(DatasetConfig)} - {"name"} | {"seed"}
    assert set(params) == fields == set(loader_args(compose_cfg())) == set(dataset_args(subsets=["FinQA"]))
    assert {n for n, p in params.items() if p.default is not inspect.Parameter.empty} == set()
    assert dataset_args(subsets=["FinQA"])["fold_role"] == DatasetConfig.fold_role and dataset_args(subsets=[])["seed"] == Config.seed

"""The fault probes: bad input a user can give, each a `python -m t2exp` command line run through its
entry point in this process (``helpers.command.cli``), started from an empty directory (outputs go under
the working directory, so "nothing written" is checked there; tests/app/test_reliability_e2e.py runs
one bad input as a real process, the console entry's exit status and stderr included).

Each probe must end with exit status 2 and one `t2exp: error:` line naming what is wrong, no
traceback; the ones caught before the run starts must leave the directory empty, the ones met
while running must leave a FAILED MLflow run carrying the same line. The kill / resume / lock /
endpoint-outage / secret-leak probes run real processes too, in tests/app/test_reliability_e2e.py;
docs/reliability.md counts both.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from helpers.command import cli
from helpers.paths import ROOT

pytestmark = pytest.mark.slow
FINQA = ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet"


def _duplicate_id(d: Path) -> list[str]:
    df = pd.read_parquet(FINQA).head(4)
    df.loc[1, "id"] = df.loc[0, "id"]
    df.to_parquet(d / "data" / "FinQA_test.parquet")
    return ["dataset=finqa", f"dataset.path={d / 'data'}"]


def _empty_questions(d: Path) -> list[str]:
    df = pd.read_parquet(FINQA).head(3)
    df["question"] = ""
    df.to_parquet(d / "data" / "FinQA_test.parquet")
    return ["dataset=finqa", f"dataset.path={d / 'data'}"]


def _orphans(d: Path) -> list[str]:
    df = pd.read_parquet(FINQA)
    ctx = list(dict.fromkeys(df.context_id))[:4]
    dev, test = df[df.context_id.isin(ctx[:2])].copy(), df[df.context_id.isin(ctx[2:])].copy()
    dev["split"], test["split"] = "dev", "test"
    dev.to_parquet(d / "data" / "FinQA_dev.parquet")
    test.to_parquet(d / "data" / "FinQA_test.parquet")
    return ["dataset=finqa", f"dataset.path={d / 'data'}", "dataset.corpus_splits=[test]"]


def _damaged_cache(d: Path) -> list[str]:
    path = d / ".t2exp_cache" / "embeddings.sqlite"
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        con.executemany("INSERT INTO kv VALUES (?, ?)", [(f"k{i}", os.urandom(512)) for i in range(2000)])
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek((size // 4096 // 2) * 4096)
        f.write(b"\xff" * 4096)
    return ["dataset=finqa", "dataset.limit=2"]


def _user_option(text: str, group: str = "rag_method", name: str = "mine"):
    """A user's own option YAML in a config directory of theirs (``text``: its lines after the
    built-in option it copies, or a whole untyped option), added with ``hydra.searchpath``."""

    def setup(d: Path) -> list[str]:
        (d / "my_conf" / group).mkdir(parents=True)
        base = (ROOT / "conf" / group / "hybrid.yaml").read_text(encoding="utf-8") if text.startswith("+") else ""
        (d / "my_conf" / group / f"{name}.yaml").write_text(base + text.lstrip("+"), encoding="utf-8")
        return [f"{group}={name}", f"hydra.searchpath=[file://{d / 'my_conf'}]"]

    return setup


def _config_dir_option(d: Path) -> list[str]:
    """The same, through the app's ``--config-dir``: a misspelt key in the option's meta: block."""
    (d / "my_conf" / "rag_method").mkdir(parents=True)
    text = (ROOT / "conf" / "rag_method" / "hybrid.yaml").read_text(encoding="utf-8").replace("  family:", "  famly:")
    (d / "my_conf" / "rag_method" / "mine.yaml").write_text(text, encoding="utf-8")
    return ["--config-dir", str(d / "my_conf"), "rag_method=mine"]


def _other_subset_only(d: Path) -> list[str]:
    pd.read_parquet(ROOT / "data" / "t2ragbench" / "TAT-DQA_dev.parquet").head(3).to_parquet(d / "data" / "TAT-DQA_dev.parquet")
    return ["dataset=finqa", f"dataset.path={d / 'data'}"]


@dataclass
class Probe:
    name: str
    args: list[str]
    says: str  # a part of the one error line
    setup: Callable[[Path], list[str]] | None = None
    before_run: bool = True  # caught in the pre-flight: nothing may be written
    env: dict[str, str] = field(default_factory=dict)


PROBES = [
    Probe("k below 1", ["k=0"], "k=0 is invalid"),
    Probe("alpha out of range", ["rag_method.alpha=1.5"], "rag_method.alpha=1.5 is invalid"),
    Probe("alpha not a number", ["rag_method.alpha=abc"], "rag_method.alpha=abc is invalid; allowed: a number"),
    Probe("unknown top-level key", ["+foo=1"], "foo is not a setting of Config"),
    Probe("unknown method key", ["rag_method=hybrid", "+rag_method.alpah=0"], "rag_method.alpah is not a setting of HybridConfig"),
    Probe("unknown generator key", ["generator=none", "+generator.foo=1"], "generator.foo is not a setting"),
    Probe("misspelt key", ["rag_method.alfa=0.3"], "rag_method.alfa is not a setting"),
    Probe("HyDE without a generator", ["rag_method=hyde", "generator=none"], "generator='none' is invalid"),
    Probe("candidates below k", ["rag_method=reranker", "rag_method.candidates=2"], "rag_method.candidates=2 is invalid"),
    Probe("missing data directory", ["dataset.path=/no/such/dir"], "dataset.path='/no/such/dir' is invalid"),
    Probe("a bad sweep cell", ["-m", "k=3,0"], "k=0 is invalid"),
    Probe(
        "a swept secret",
        ["-m", "generator=openai_compat", "generator.model=m", "generator.api_key=sk-test-AAAAAAA,sk-test-BBBBBBB"],
        "generator.api_key is invalid as a sweep",
    ),
    Probe("API embedder without a key", ["embedder=openai"], "embedder.api_key=None is invalid"),
    Probe("unknown answer mode", ["generator.answer_mode=guess"], "generator.answer_mode='guess' is invalid"),
    Probe("instruction without {query}", ["query.instruction=plain"], "query.instruction='plain' is invalid"),
    Probe("duplicate id in a data file", [], "duplicates", setup=_duplicate_id),
    Probe("every question empty", [], "column 'question' is empty in all 3 rows", setup=_empty_questions),
    Probe("corpus splits without the gold contexts", [], "leaves out the gold context", setup=_orphans),
    Probe("damaged page in the embedding cache", [], "not a usable SQLite cache", setup=_damaged_cache, before_run=False),
    Probe(
        "misspelt key in a user's typed option YAML",
        [],
        "rag_method/mine.yaml (the option rag_method=mine): rag_method.alpah "
        "is not a setting of HybridConfig; allowed: _target_, name, meta, alpha",
        setup=_user_option("+alpah: 0.3\n"),
    ),
    Probe(
        "misspelt key in the meta: block of a user's option (--config-dir)",
        [],
        "rag_method.meta.famly is not a setting of OptionMeta; allowed: display_name, family",
        setup=_config_dir_option,
    ),
    Probe(
        "misspelt key in the meta: block of an untyped plugin option",
        [],
        "rag_method.meta.famly is not a setting of OptionMeta",
        setup=_user_option("_target_: t2exp.methods.base.Base\nname: mine\nmeta:\n  famly: dense\n"),
    ),
    Probe(
        "a data directory without the subset's files",
        [],
        "no FinQA file found there (looked for FinQA_<split>.parquet",
        setup=_other_subset_only,
    ),
    Probe(
        "a local embedder path that is not there",
        ["embedder=e5", "embedder.model=./models/e5", "rag_method=base"],
        "embedder.model='./models/e5' is invalid: no such directory",
    ),
    Probe(
        "uncached hub model offline",
        ["embedder=e5", "rag_method=base", "dataset=finqa", "dataset.limit=2"],
        "hf download",
        before_run=False,
    ),
]


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_probe(probe: Probe, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    args = [*probe.args, *(probe.setup(tmp_path) if probe.setup else [])]
    if not any(a.startswith("generator=") for a in args):
        args.append("generator=none")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "T2EXP_PARENT_RUN_ID"}
    env.update({"HF_HUB_OFFLINE": "1", **probe.env})
    before = {p.name for p in tmp_path.iterdir()}
    from t2exp.__main__ import main

    proc = cli(main, args, cwd=tmp_path, env=env, replace_env=True)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("t2exp: error:") and probe.says in line, line
    assert "sk-test-" not in proc.stderr + proc.stdout  # a secret never reaches the output
    written = {p.name for p in tmp_path.iterdir()} - before
    if probe.before_run:
        assert written == set(), written  # no outputs/, multirun/, mlruns/ or cache
    else:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
        (run,) = client.search_runs([client.get_experiment_by_name("t2exp").experiment_id])
        assert run.info.status == "FAILED" and probe.says in run.data.tags["t2exp.error"]

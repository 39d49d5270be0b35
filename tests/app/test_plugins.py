"""Adding a component is one module + one YAML: a RAG method defined in a test-local module and a
test-local config directory (``hydra.searchpath``), with nothing under ``src/`` or ``conf/``
touched, runs in a sweep next to a built-in method, is validated like one, and shows up in
``t2exp report`` and ``t2exp score``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.app import app_overrides
from helpers.paths import ROOT
from helpers.tracking import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.full]  # the plugin is found by a real process's import path

PLUGIN = '''
"""A lexical-only method: the corpus's bm25s index, top-k, no dense model at query time."""
from t2exp.methods import RetrievingMethod


class LexicalOnly(RetrievingMethod):
    def __init__(self, name: str = "lexical_only", depth: int = 10) -> None:
        super().__init__(name)
        self.depth = depth

    def retrieve(self, questions, index, k):
        hits = index.bm25s.search([q.question for q in questions], max(k, self.depth))
        return [h[:k] for h in hits]
'''

YAML = """\
# A plugin method: no schema of its own, so its constructor's signature is the check.
_target_: t2exp_plugin_demo.LexicalOnly
name: lexical_only
depth: 10
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plugin")
    (root / "t2exp_plugin_demo.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    (root / "conf" / "rag_method").mkdir(parents=True)
    (root / "conf" / "rag_method" / "lexical_only.yaml").write_text(YAML, encoding="utf-8")
    return root


def _run(module: str, args: list[str], plugin: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{module} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def test_a_method_from_a_local_module_and_yaml_joins_sweeps_reports_and_scoring(plugin, shared_cache, tmp_path):
    search = f"hydra.searchpath=[file://{plugin / 'conf'}]"
    # validated like a built-in: a key its constructor does not take is one line, before any work
    bad = _run(
        "t2exp",
        ["rag_method=lexical_only", "+rag_method.dept=3", "generator=none", search, *app_overrides(shared_cache, tmp_path / "bad")],
        plugin,
        check=False,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "dept" in bad.stderr.strip().splitlines()[-1]

    _run(
        "t2exp",
        ["-m", "rag_method=base,lexical_only", "generator=none", "dataset.limit=8", search, *app_overrides(shared_cache, tmp_path)],
        plugin,
    )
    client, runs = mlflow_runs(tmp_path)
    parent = next(r for r in runs if r.data.tags.get("t2exp.sweep") == "parent")
    by_method = {r.data.params["rag_method.name"]: r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"}
    assert set(by_method) == {"base", "lexical_only"}
    lex = by_method["lexical_only"].data.metrics
    assert 0 < lex["FinQA/mrr_at_3"] <= 100 and lex["FinQA/questions"] == 8
    assert by_method["lexical_only"].data.params["rag_method._target_"] == "t2exp_plugin_demo.LexicalOnly"

    # the report's table has a row for it, with its logged value
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rep = _run("t2exp", ["report", parent.info.run_id, "--tracking-uri", uri, "--out", str(tmp_path / "report"), "--no-log"], plugin)
    row = next(line for line in rep.stdout.splitlines() if line.startswith("|") and "lexical_only" in line)
    assert f"{lex['FinQA/mrr_at_3']:.1f}" in row

    # re-scoring its predictions reproduces its logged retrieval metrics
    path = client.download_artifacts(by_method["lexical_only"].info.run_id, "predictions.jsonl", str(tmp_path))
    out = _run("t2exp", ["score", path, "--dataset", "bundled", "--limit", "8", "--format", "json"], plugin)
    scored = json.loads(out.stdout)
    assert scored["metrics"]["FinQA/mrr_at_3"] == pytest.approx(lex["FinQA/mrr_at_3"], abs=1e-4)  # logged: 4 decimals

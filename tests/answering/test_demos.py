"""Retrieved demonstrations (t2exp.answering.demos): which pool questions are shown, and never the question's own."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from helpers.app import run_app
from helpers.paths import ROOT
from helpers.tracking import mlflow_runs
from t2exp.answering.answers import build_messages
from t2exp.answering.demos import Demo, DemoPool
from t2exp.answering.prompts import PromptLibrary
from t2exp.errors import ConfigError


def _pool(*rows: tuple[str, str, str]) -> DemoPool:
    return DemoPool([Demo(i, c, "FinQA", q, f"answer = {n}") for n, (i, c, q) in enumerate(rows)])


POOL = _pool(
    ("d1", "c1", "What was the percentage change in net sales from 2018 to 2019?"),
    ("d2", "c2", "What was the average dividend yield over 2017 to 2019?"),
    ("d3", "c3", "Which year had higher gross margin for Acme Corp?"),
    ("d4", "c4", "What portion of total debt does interest expense represent?"),
)


def test_the_most_alike_questions_are_shown_best_last():
    chosen = POOL.select("What is the percentage change in order intake from 2018 to 2019?", 2)
    assert [d.id for d in chosen][-1] == "d1"  # "percentage change" shares the rarest words
    assert len(chosen) == 2
    assert [d.id for d in POOL.select("What was the average yield on dividends?", 1)] == ["d2"]


def test_numbers_do_not_make_questions_alike():
    # only the years are shared with d1; the words point at d4
    assert [d.id for d in POOL.select("What portion of 2018 2019 debt is interest?", 1)] == ["d4"]


def test_never_the_question_itself_nor_its_document():
    q = "What was the percentage change in net sales from 2018 to 2019?"
    assert "d1" not in [d.id for d in POOL.select(q, 4, exclude_id="d1")]
    assert "d1" not in [d.id for d in POOL.select(q, 4, exclude_context="c1")]
    assert "d1" in [d.id for d in POOL.select(q, 4)]


def test_the_company_name_does_not_pick_the_demonstration():
    q = "What was the change for Acme Corp?"
    assert POOL.select(q, 1)[0].id == "d3"  # "acme corp" are the rarest shared words
    assert POOL.select(q, 1, company="Acme Corp")[0].id == "d1"


def test_the_demonstrations_are_the_same_in_every_process():
    """Two demonstrations whose scores tie exactly: a plain float sum over a set of words came out
    one ulp apart in some processes (string hashes, hence set order, differ per interpreter), so the
    order of finqa_dev_49's demonstrations depended on PYTHONHASHSEED (0 vs 11)."""
    import os
    import subprocess
    import sys

    code = (
        "import pandas as pd; from t2exp.answering.demos import DemoPool; p = DemoPool.load('prompts', 'code_tune'); "
        "df = pd.read_parquet('data/t2ragbench/FinQA_dev.parquet'); r = df[df['id'] == 'finqa_dev_49'].iloc[0]; "
        "print([d.id for d in p.select(r['question'], 3, r['id'], r['context_id'], str(r['company_name'] or ''))])"
    )
    outs = {
        seed: subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "11")
    }
    assert outs["0"] == outs["11"]
    assert outs["0"].count("_dev_") == 3


def test_pool_files_are_checked_with_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"generator.demos='nope': no file .*nope.jsonl; pools there: none"):
        DemoPool.load(tmp_path, "nope")
    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "bad.jsonl").write_text(json.dumps({"id": "x", "context_id": "c", "question": "q?"}) + "\n")
    with pytest.raises(ConfigError, match=r"generator.demos='bad': .*bad.jsonl entry 1 lacks answer"):
        DemoPool.load(tmp_path, "bad")
    (tmp_path / "demos" / "broken.jsonl").write_text("{\n")
    with pytest.raises(ConfigError, match=r"generator.demos='broken': .*broken.jsonl: line 1: not valid JSON"):
        DemoPool.load(tmp_path, "broken")


def test_the_shipped_pool_loads_and_holds_no_report_sample_question():
    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import load_subsets

    pool = DemoPool.load(ROOT / "prompts", "code_tune")
    report = load_subsets(
        **dataset_args(subsets=["FinQA", "TAT-DQA"], source="local", path=str(ROOT / "data" / "t2ragbench"), limit=200, seed=0)
    )
    asked = {q.id for s in report for q in s.questions}
    assert len(pool.demos) >= 50
    assert not asked & {d.id for d in pool.demos}


def test_the_demo_template_shows_each_demonstration_before_the_excerpts():
    demos = POOL.select("What was the percentage change in net sales?", 2)
    (_, user) = build_messages(PromptLibrary(ROOT / "prompts"), "code", "Q?", ["| a | 1 |"], "answer_code_demos", demos)
    text = user["content"]
    for d in demos:
        assert f"Question: {d.question}\n```python\n{d.answer}\n```" in text
    assert text.index(demos[-1].answer) < text.index("Now the real excerpts.") < text.index("| a | 1 |")
    (_, plain) = build_messages(PromptLibrary(ROOT / "prompts"), "code", "Q?", ["| a | 1 |"], "answer_code_demos")
    assert "answered correctly" not in plain["content"]


def test_a_changed_pool_is_a_new_cell(tmp_path):
    from t2exp.pipeline.identity import prompts_fingerprint

    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "p.jsonl").write_text('{"id": "a"}\n')
    before = prompts_fingerprint(tmp_path)
    (tmp_path / "demos" / "p.jsonl").write_text('{"id": "b"}\n')
    assert prompts_fingerprint(tmp_path) != before


@pytest.mark.slow
def test_a_run_shows_demonstrations_from_other_documents_only(shared_cache, tmp_path):
    """End to end: with ``generator.demos`` each prompt holds ``demos_k`` pool questions, and a
    pool entry of the asked question's own document never reaches its prompt."""
    from fakes.openai_server import FakeOpenAIServer

    data = pd.read_parquet(ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet")
    prompts = tmp_path / "prompts"
    shutil.copytree(ROOT / "prompts", prompts, ignore=shutil.ignore_patterns("demos"))
    (prompts / "demos").mkdir()
    # a pool of every question's own wording, so each question's best match is its own document's entry
    lines = [
        json.dumps({"id": f"pool-{r.id}", "context_id": r.context_id, "question": r.question, "answer": f"answer = {i}"})
        for i, r in enumerate(data.itertuples())
    ]
    (prompts / "demos" / "mine.jsonl").write_text("\n".join(lines) + "\n")
    with FakeOpenAIServer(model="m", reply=lambda messages: "```python\nanswer = 1\n```") as srv:
        run_app(
            [
                "generator=openai_compat",
                "generator.model=m",
                f"generator.base_url={srv.base_url}",
                "generator.answer_mode=code",
                "generator.prompt=answer_code_demos",
                "generator.demos=mine",
                "generator.demos_k=2",
                f"paths.prompts={prompts}",
                "rag_method=oracle",
                "dataset=finqa",
                "dataset.limit=3",
            ],
            shared_cache,
            tmp_path,
        )
        sent = [r["messages"][-1]["content"] for r in srv.requests]
    client, (run,) = mlflow_runs(tmp_path)
    assert run.data.params.get("generator.demos") == "mine"
    by_question = {r.question: r.context_id for r in data.itertuples()}
    of_document: dict[str, set[str]] = {}
    for r in data.itertuples():
        of_document.setdefault(r.context_id, set()).add(r.question)
    own = {r.question: of_document[r.context_id] for r in data.itertuples()}  # the questions of its own document
    assert len(sent) == 3
    for text in sent:
        asked = text.rsplit("Question: ", 1)[1].split("\n", 1)[0]
        assert asked in by_question
        shown = [q for q in by_question if f"Question: {q}\n```python" in text]
        assert len(shown) == 2
        assert not set(shown) & own[asked]


@pytest.mark.slow
def test_demos_with_a_template_that_shows_none_is_a_one_line_error(shared_cache, tmp_path):
    """``generator.demos`` with the plain code template would silently show nothing: refused, naming the fix."""
    proc = run_app(
        [
            "generator=openai_compat",
            "generator.model=m",
            "generator.base_url=http://127.0.0.1:9/v1",
            "generator.answer_mode=code",
            "generator.demos=code_tune",
            "rag_method=oracle",
            "dataset=finqa",
            "dataset.limit=1",
        ],
        shared_cache,
        tmp_path,
        check=False,
    )
    assert proc.returncode == 2
    err = [ln for ln in proc.stderr.splitlines() if "generator.demos" in ln]
    assert err and "'answer_code' shows no demonstrations" in err[-1] and "generator.prompt=answer_code_demos" in err[-1]
    assert "Traceback" not in proc.stderr


def test_template_variables_are_what_it_reads():
    lib = PromptLibrary(ROOT / "prompts")
    assert "demos" in lib.variables("answer_code_demos")
    assert "demos" not in lib.variables("answer_code") and {"question", "contexts"} <= lib.variables("answer_code")

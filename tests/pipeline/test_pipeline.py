"""End to end through ``python -m t2exp`` (real Hydra, real models, real LanceDB, real MLflow)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.app import run_app
from helpers.paths import ROOT
from helpers.tracking import mlflow_runs

pytestmark = pytest.mark.slow


def _sweep_children(tracking_dir, n):
    """The child runs of the one sweep logged in ``tracking_dir``, after checking that there are
    ``n`` of them under a single FINISHED parent."""
    client, runs = mlflow_runs(tracking_dir)
    parents = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"]
    assert len(children) == n and len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in children)
    return client, children


def _artifact_rows(client, run_id, name="predictions.jsonl"):
    path = client.download_artifacts(run_id, name)
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def test_retrieval_sweep_reuses_index_and_logs_everything(tmp_path, warm_cache):
    fresh = warm_cache  # its own cache (the corpora's vectors in it), so the first cell really builds the index
    run_app(["-m", "rag_method=base,hybrid", "generator=none", "dataset.limit=40"], fresh, tmp_path)
    client, runs = _sweep_children(tmp_path, 2)
    by_method = {r.data.params["rag_method.name"]: r for r in runs}
    for r in runs:
        assert r.info.status == "FINISHED"
        m = r.data.metrics
        for subset in ("FinQA", "TAT-DQA", "avg"):
            for name in ("mrr_at_3", "recall_at_1", "recall_at_3", "recall_at_5"):
                assert f"{subset}/{name}" in m, f"{subset}/{name}"
        assert "avg/nm" not in m  # generator=none: no NM
        assert m["FinQA/questions"] == 40 and m["FinQA/corpus_size"] == 299 and m["TAT-DQA/corpus_size"] == 274
        # weighted average = question-weighted mean of the subsets
        expected = (m["FinQA/mrr_at_3"] * 40 + m["TAT-DQA/mrr_at_3"] * 40) / 80
        assert m["avg/mrr_at_3"] == pytest.approx(expected)
        rows = _artifact_rows(client, r.info.run_id)
        assert len(rows) == 80 and all(len(x["retrieved"]) == 5 for x in rows)
    # the second cell (hybrid) found the index the first (base) built
    assert by_method["hybrid"].data.metrics["FinQA/index_cache_hit"] == 1.0
    assert by_method["hybrid"].data.metrics["TAT-DQA/index_cache_hit"] == 1.0
    assert by_method["hybrid"].data.metrics["FinQA/index_inserted"] == 0.0  # reopened: zero inserts
    assert by_method["base"].data.metrics["FinQA/index_inserted"] == 299.0
    # retrieval metrics recomputed from the artifact equal the logged ones
    rows = _artifact_rows(client, by_method["hybrid"].info.run_id)
    finqa = [x for x in rows if x["subset"] == "FinQA"]
    mrr = 100 * sum(x["mrr_at_3"] for x in finqa) / len(finqa)
    assert by_method["hybrid"].data.metrics["FinQA/mrr_at_3"] == pytest.approx(mrr, abs=1e-4)
    # re-scoring the run's own artifact with t2exp.score reproduces every logged metric exactly
    from t2exp.evaluation import score
    from t2exp.tracking.mlflow_run import DISPLAY_DECIMALS

    logged = by_method["hybrid"].data.metrics
    result = score(client.download_artifacts(by_method["hybrid"].info.run_id, "predictions.jsonl"), dataset="bundled", limit=40)
    compared = 0
    for name, value in result.metrics.items():
        if name in logged and "/" in name:
            assert round(value, DISPLAY_DECIMALS) == logged[name], name  # logged values are rounded for display
            compared += 1
    assert compared >= 3 * 4 * 3  # 3 tables x 4 retrieval metrics x (mean, ci_low, ci_high)


def test_local_files_outside_the_bundle(shared_cache, tmp_path):
    src = pd.read_parquet(ROOT / "data" / "t2ragbench" / "TAT-DQA_dev.parquet")
    ctx = src.drop_duplicates("context_id").head(30)
    rows = src[src.context_id.isin(ctx.context_id)].head(20).copy()
    rows["split"] = "test"
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rows.to_parquet(data_dir / "TAT-DQA_test.parquet")
    run_app(["dataset=tatdqa", f"dataset.path={data_dir}", "rag_method=base", "k=5", "generator=none"], shared_cache, tmp_path)
    _, runs = mlflow_runs(tmp_path)
    (run,) = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"]
    assert run.data.metrics["TAT-DQA/questions"] == 20
    assert run.data.metrics["TAT-DQA/corpus_size"] == rows.context_id.nunique()
    assert "TAT-DQA/mrr_at_5" in run.data.metrics
    assert "TAT-DQA_test.parquet" in run.data.params["dataset.source_files.TAT-DQA"]


def test_bad_file_gives_one_line_error(shared_cache, tmp_path):
    src = pd.read_parquet(ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet").head(5)
    bad = tmp_path / "FinQA_test.parquet"
    src.drop(columns=["question"]).to_parquet(bad)
    proc = run_app(["dataset=finqa", f"dataset.path={bad}", "generator=none"], shared_cache, tmp_path, check=False)
    assert proc.returncode == 2
    err_lines = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()]
    assert err_lines and str(bad) in err_lines[-1] and "question" in err_lines[-1] and "row 0" in err_lines[-1]
    assert "Traceback" not in proc.stderr


def test_unknown_option_fails_with_hydras_message(shared_cache, tmp_path):
    proc = run_app(["rag_method=nope"], shared_cache, tmp_path, check=False)
    assert proc.returncode != 0
    assert "Could not find 'rag_method/nope'" in proc.stderr


def test_generation_oracle_and_pretrained_only(shared_cache, tmp_path):
    """Generation through each method's wiring, one question per method, against the stand-in
    OpenAI-compatible server (the offline models generate in tests/generators/ and, end to end, in
    tests/app/test_progress.py)."""
    from fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(model="m", reply=lambda messages: "Final answer: 7") as srv:
        run_app(
            [
                "-m",
                "rag_method=oracle,pretrained_only",
                "dataset=finqa",
                "dataset.limit=1",
                "generator=openai_compat",
                "generator.model=m",
                f"generator.base_url={srv.base_url}",
            ],
            shared_cache,
            tmp_path,
        )
        assert len(srv.requests) == 2  # one question per method
    client, runs = _sweep_children(tmp_path, 2)
    by_method = {r.data.params["rag_method.name"]: r for r in runs}
    oracle = by_method["oracle"].data.metrics
    assert oracle["FinQA/mrr_at_3"] == 100.0 and oracle["FinQA/recall_at_1"] == 100.0
    assert "FinQA/nm" in oracle and oracle["prompt_tokens"] > 0 and oracle["completion_tokens"] > 0
    pre = by_method["pretrained_only"].data.metrics
    assert "FinQA/nm" in pre and "FinQA/mrr_at_3" not in pre
    rows = _artifact_rows(client, by_method["oracle"].info.run_id)
    assert all(r["generation"] for r in rows)
    assert {"id", "subset", "context_id", "retrieved", "generation", "prediction", "gold", "nm"} <= set(rows[0])
    lb = _artifact_rows(client, by_method["oracle"].info.run_id, "leaderboard.jsonl")
    assert set(lb[0]) == {"id", "subset", "context_id", "prediction"}


def test_qwq_through_an_openai_compatible_server(shared_cache, tmp_path):
    """`python -m t2exp generator=qwq32b generator.backend=openai generator.base_url=...` end to end
    against a local server speaking the chat-completions wire format (reasoning model output)."""
    from fakes.openai_server import FakeOpenAIServer

    def reply(messages):
        return "<think>The table says revenue was 42 and I should double check it.</think>\nFinal answer: 42"

    with FakeOpenAIServer(model="Qwen/QwQ-32B-AWQ", reply=reply) as srv:
        run_app(
            [
                "generator=qwq32b",
                "generator.backend=openai",
                f"generator.base_url={srv.base_url}",
                "rag_method=oracle",
                "dataset=finqa",
                "dataset.limit=3",
            ],
            shared_cache,
            tmp_path,
        )
        assert len(srv.requests) == 3 and not srv.errors
        req = srv.requests[0]
        assert req["model"] == "Qwen/QwQ-32B-AWQ" and req["temperature"] == 0.0 and req["max_tokens"] == 8192
    client, runs = mlflow_runs(tmp_path)
    (run,) = runs
    m = run.data.metrics
    assert m["reasoning_tokens"] > 0 and m["truncated_generations"] == 0 and m["prompt_tokens"] > 0
    rows = _artifact_rows(client, run.info.run_id)
    assert [r["prediction"] for r in rows] == [42.0, 42.0, 42.0]
    assert all("<think>" not in r["generation"] for r in rows)
    assert run.data.params["generator.sampling.max_tokens"] == "8192"


def test_self_consistency_votes_and_grounded_programs_win(shared_cache, tmp_path):
    """`generator.sampling.samples=3` end to end: the main answer and the first drawn sample are a
    program over a number that is not in the document, the second sample copies the document's
    first table number. `grounding=check` lets the majority (the made-up number) win and records
    that it is not grounded; `grounding=prefer` lets only the grounded sample vote."""
    import re

    from fakes.openai_server import FakeOpenAIServer

    state = {"choice": 0}

    def reply(messages):
        doc = messages[-1]["content"].split("### Document 1", 1)[1]
        first = re.search(r"\|\s*\$?\s*(\d[\d,]*\.?\d*)\s*\|", doc).group(1).replace(",", "")
        state["choice"] += 1
        return f"Program: {first}" if state["choice"] == 2 else "Program: 987654.321 / 3"

    class Server(FakeOpenAIServer):
        def completion(self, body, finish_reason):
            state["choice"] = 0 if "n" in body else -100  # in a sample request the second choice is grounded
            return super().completion(body, finish_reason)

    common = [
        "generator=openai_compat",
        "generator.model=m",
        "generator.answer_mode=program",
        "generator.sampling.samples=3",
        "generator.max_concurrency=1",
        "rag_method=oracle",
        "dataset=finqa",
        "dataset.limit=2",
    ]
    with Server(model="m", reply=reply) as srv:
        common.append(f"generator.base_url={srv.base_url}")
        run_app([*common, "generator.grounding=prefer"], shared_cache, tmp_path / "prefer")
        run_app([*common, "generator.grounding=check"], shared_cache, tmp_path / "check")
        assert len(srv.requests) == 4 and not srv.errors  # the second run's answers came from the LLM cache
        assert [("n" in r) for r in srv.requests] == [False, True, False, True]
    rows = {}
    for mode in ("prefer", "check"):
        client, (run,) = mlflow_runs(tmp_path / mode)
        rows[mode] = _artifact_rows(client, run.info.run_id)
        assert run.data.params["generator.grounding"] == mode
    for p, c in zip(rows["prefer"], rows["check"], strict=True):
        assert c["program"] == "987654.321 / 3" and c["grounded"] is False and c["vote_share"] == round(2 / 3, 4)
        assert p["grounded"] is True and p["vote_share"] == 1.0 and p["prediction"] == float(p["program"])
        assert p["candidates"] == c["candidates"] == 3
        assert p["sample_answers"] == c["sample_answers"] == ["987654.321 / 3", "987654.321 / 3", p["program"]]


def test_context_header_puts_each_retrieved_documents_report_in_the_prompt(shared_cache, tmp_path):
    """`context.header=company_year` end to end: every document the generator is handed opens with
    the company and year of the report it was retrieved from, in rank order."""
    import re

    from fakes.openai_server import FakeOpenAIServer

    data = pd.read_parquet(ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet")
    report = {r.context_id: f"Report: {r.company_name}, {r.report_year}" for r in data.itertuples()}
    with FakeOpenAIServer(model="m", reply=lambda messages: "Program: 1") as srv:
        run_app(
            [
                "generator=openai_compat",
                "generator.model=m",
                f"generator.base_url={srv.base_url}",
                "generator.answer_mode=program",
                "rag_method=bm25",
                "k=3",
                "context.documents=null",
                "context.header=company_year",
                "dataset=finqa",
                "dataset.limit=2",
            ],
            shared_cache,
            tmp_path,
        )
        prompts = [r["messages"][-1]["content"] for r in srv.requests]
    client, (run,) = mlflow_runs(tmp_path)
    rows = {r["question"]: r for r in _artifact_rows(client, run.info.run_id)}
    assert len(prompts) == len(rows) == 2
    for prompt in prompts:
        (row,) = [r for q, r in rows.items() if q in prompt]
        heads = re.findall(r"### Document \d+\n(Report: [^\n]*)", prompt)
        assert heads == [report[cid] for cid in row["retrieved"][:3]]


def test_cell_key_changes_with_prompt_text(tmp_path):
    """An edited prompt template must start a new cell (no resume from stale predictions)."""
    from t2exp.pipeline.identity import cell_key

    d = tmp_path / "prompts"
    d.mkdir()
    (d / "answer_direct.j2").write_text("Question: {{ question }}")
    cfg = {"k": 3, "rag_method": {"name": "oracle"}, "paths": {"prompts": str(d)}}
    before = cell_key(cfg)
    assert cell_key(cfg) == before
    (d / "answer_direct.j2").write_text("Question: {{ question }}\nFinal answer:")
    assert cell_key(cfg) != before
    assert cell_key({**cfg, "paths": {"prompts": str(d), "cache": "/elsewhere"}}) == cell_key(cfg)


@pytest.mark.full
def test_resume_after_killing_a_sweep_reruns_only_unfinished_cells(shared_cache, tmp_path):
    """SIGTERM lands while the third of four cells is generating; synchronised on events, not on
    timing: the local OpenAI-compatible server answers the first two cells' requests (4 each),
    then holds every request until the test has sent the signal. The sweep stops after that
    batch with exactly two cells FINISHED; ``resume=true`` runs only the other two, and across
    both sweeps every (cell, question) is asked exactly once."""
    import itertools
    import os
    import signal
    import subprocess
    import sys
    import threading
    import uuid

    from fakes.openai_server import FakeOpenAIServer
    from helpers.app import app_overrides

    first_cells = 2 * 4  # two cells x (2 FinQA + 2 TAT-DQA questions)
    arrived, gate, count = threading.Event(), threading.Event(), itertools.count(1)

    def reply(messages) -> str:
        if next(count) > first_cells:
            arrived.set()
            assert gate.wait(300), "the test never released the held requests"
        return "Final answer: 1"

    model = f"gate-{uuid.uuid4().hex[:8]}"  # its own LLM-cache entries and cells in the shared cache
    srv = FakeOpenAIServer(model=model, reply=reply).start()
    # every cell's prompts are its own (k changes the contexts when the generator reads all k, the
    # seed is part of the LLM-cache key)
    sweep = [
        "-m",
        "k=3,5",
        "generator.sampling.seed=0,1",
        "rag_method=base",
        "context.documents=null",
        "dataset.limit=2",
        "generator=openai_compat",
        f"generator.model={model}",
        f"generator.base_url={srv.base_url}",
        "generator.max_retries=0",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "T2EXP_STOP_GRACE_SECONDS": "600"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "t2exp", *sweep, *app_overrides(shared_cache, tmp_path)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert arrived.wait(600), "the third cell never sent a request"
            proc.send_signal(signal.SIGTERM)  # the app asks to stop at its next safe point ...
            gate.set()  # ... which comes once the requests in flight are answered
            _, stderr = proc.communicate(timeout=300)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
        _, runs = mlflow_runs(tmp_path)
        children = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"]
        assert sorted(r.info.status for r in children) == ["FINISHED", "FINISHED", "KILLED"]
        done_before = {r.data.tags["t2exp.cell_key"] for r in children if r.info.status == "FINISHED"}
        asked_before = len(srv.requests)

        run_app([*sweep, "resume=true"], shared_cache, tmp_path)
    finally:
        srv.close()
    client, runs = mlflow_runs(tmp_path)
    children = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"]
    mirrors = [r for r in children if "t2exp.resumed_from" in r.data.tags]
    finished = [r for r in children if r.info.status == "FINISHED" and r not in mirrors]
    keys = [r.data.tags["t2exp.cell_key"] for r in finished]
    assert len(set(keys)) == 4 and len(keys) == 4  # every cell finished exactly once
    parents = sorted((r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"), key=lambda r: r.info.start_time)
    last = parents[-1].info.run_id
    resumed = [r for r in children if r.data.tags.get("mlflow.parentRunId") == last and r not in mirrors]
    assert len(resumed) == 2  # the resumed sweep ran only the unfinished cells
    assert not {r.data.tags["t2exp.cell_key"] for r in resumed} & done_before
    assert asked_before > first_cells and len(srv.requests) == 4 * 4  # no (cell, question) asked twice
    # the skipped cells are listed under the new sweep as mirrors of their finished runs, so the
    # report the sweep's end logs on its parent has all four cells
    originals = {r.info.run_id: r for r in finished}
    assert len(mirrors) == 2 and all(m.data.tags["mlflow.parentRunId"] == last for m in mirrors)
    for m in mirrors:
        src = originals[m.data.tags["t2exp.resumed_from"]]
        assert src.data.tags["t2exp.cell_key"] in done_before and m.data.metrics == src.data.metrics
    table = client.download_artifacts(last, "report/table3.csv")
    with open(table, encoding="utf-8") as fh:
        assert len(fh.read().strip().splitlines()) == 1 + 4

"""What a user sees: a line per finished stage, quiet libraries, and a summary that says where
the run, its predictions and the MLflow UI are."""

from __future__ import annotations

import json
import logging
import re

import pytest

from helpers.app import run_app
from helpers.tracking import mlflow_runs
from t2exp.infra import progress


def test_a_stage_logs_its_count_rate_and_tallies(caplog):
    with caplog.at_level(logging.INFO, logger="t2exp"):
        with progress.stage("generate X", 3, "answer") as s:
            s.advance()
            s.advance()
            s.tally("from the LLM cache")
    assert re.fullmatch(r"generate X: 2 answers in \d+\.\ds(, [\d.]+s/answer)?; 1 from the LLM cache", caplog.messages[-1])
    with caplog.at_level(logging.INFO, logger="t2exp"), pytest.raises(KeyError):
        with progress.stage("embed documents", 10, "document") as s:
            s.advance(4)
            raise KeyError("boom")
    assert re.fullmatch(r"embed documents: 4 documents in \d+\.\ds(, [\d.]+s/document)? \(stopped\)", caplog.messages[-1])


@pytest.mark.full
@pytest.mark.slow
def test_a_run_shows_its_stages_and_ends_with_where_things_are(tmp_path, warm_cache):
    # its own cache, with the corpora's vectors: the index is really built (the embedding's own
    # progress line is tested in this process, above)
    # a real process: what a user's terminal shows (library noise written to the file descriptors too)
    # one question, the 0.5B (converted once for the suite, shared with the generation tests; the
    # default 1.5B is the same code on other weights, and converting it would slow this test), and
    # an answer of a few tokens: what the terminal shows does not depend on the answer's length
    proc = run_app(
        [
            "rag_method=base",
            "dataset=finqa",
            "dataset.limit=1",
            "context.mode=focused",
            "generator=qwen_coder_0_5b",
            "generator.sampling.max_tokens=8",
        ],
        warm_cache,
        tmp_path,
        timeout=900,
        process=True,
    )
    err = proc.stdout + proc.stderr  # Hydra's job log goes to stdout, the summary to stderr
    assert re.search(r"index FinQA \(minilm, lancedb\): 299 documents in [\d.]+s", err), err[-3000:]
    assert re.search(r"generate FinQA: 1 answer in [\d.]+s", err), err[-3000:]
    assert "WARN" not in err and "Loading weights" not in err and "Creating initial MLflow database" not in err, err[-3000:]
    found = re.search(r"MLflow run ([0-9a-f]{32}) in experiment 't2exp'", err)
    assert found, err[-2000:]
    assert f"mlflow ui --backend-store-uri sqlite:///{tmp_path / 'mlflow.db'}" in err
    client, runs = mlflow_runs(tmp_path)
    (run,) = runs
    assert run.info.run_id == found.group(1) and run.data.params["context.mode"] == "focused"
    m = run.data.metrics
    line = next(ln for ln in err.splitlines() if ln.startswith("FinQA "))
    assert f"{m['FinQA/mrr_at_3']:.1f} [{m['FinQA/mrr_at_3_ci_low']:.1f}, {m['FinQA/mrr_at_3_ci_high']:.1f}]" in line
    assert line.split()[-1] == "1"  # n
    pred_path = re.search(r"predictions: (\S+predictions\.jsonl)", err).group(1)
    rows = [json.loads(x) for x in open(pred_path, encoding="utf-8")]
    # the focused evidence of one document (context.mode=focused, context.documents=1): well under full ones
    assert len(rows) == 1 and all(r["prompt_tokens"] < 2400 for r in rows), [r["prompt_tokens"] for r in rows]


@pytest.mark.slow
def test_the_mlflow_ui_gets_datasets_description_table_and_traces(shared_cache, tmp_path):
    """Through MLflow's API: dataset inputs, code version, a description holding the results, the
    predictions as an MLflow table, one trace per question with its three spans, the experiment
    kind tag (MLflow's Model training view; a fresh browser still opens the GenAI overview, as
    docs/getting-started.md shows), display-rounded metrics."""
    import mlflow
    from mlflow.tracking import MlflowClient

    run_app(["rag_method=hybrid", "generator=none", "dataset.limit=3"], shared_cache, tmp_path, traces=True)
    client, (run,) = mlflow_runs(tmp_path)
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    full = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run.info.run_id)
    inputs = {d.dataset.name: d.dataset for d in full.inputs.dataset_inputs}
    assert set(inputs) == {"FinQA", "TAT-DQA"}
    profile = json.loads(inputs["FinQA"].profile)
    assert profile == {"questions": 3, "corpus_documents": 299, "splits": ["dev"]}
    assert "FinQA_dev.parquet" in json.loads(inputs["FinQA"].source)["uri"]
    tags = run.data.tags
    assert re.fullmatch(r"[0-9a-f]{40}", tags["mlflow.source.git.commit"])  # the checkout the tests run from
    note = tags["mlflow.note.content"]
    m = run.data.metrics
    assert "| subset | MRR@3 |" in note and f"{m['avg/mrr_at_3']:.1f} [" in note and "FinQA (3 questions)" in note
    assert all(v == round(v, 4) for v in m.values())
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")  # load_table searches through the fluent API
    table = client.load_table(run.info.experiment_id, run_ids=[run.info.run_id], artifact_file="predictions_table.json")
    assert len(table) == 6 and set(table["subset"]) == {"FinQA", "TAT-DQA"}
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id)
    assert len(traces) == 6
    spans = {s.name for s in traces[0].data.spans}
    assert {"retrieve", "score"} <= spans and "generate" not in spans  # retrieval only: nothing generated
    retrieve = next(s for s in traces[0].data.spans if s.name == "retrieve")
    assert len(retrieve.outputs["retrieved"]) == 5

    run_app(
        ["rag_method=hybrid", "generator=none", "dataset.limit=3", "tracking.traces=false", "k=5"], shared_cache, tmp_path, traces=True
    )  # the test's own tracking.traces=false is the subject
    _, runs = mlflow_runs(tmp_path)
    assert len(client.search_traces(locations=[run.info.experiment_id], run_id=runs[-1].info.run_id)) == 0

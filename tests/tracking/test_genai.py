"""T²-RAGBench's metrics as MLflow GenAI scorers (``t2exp.tracking.genai``): ``mlflow.genai.evaluate``
with them on a set of recorded answers gives exactly ``t2exp score``'s numbers."""

from __future__ import annotations

import mlflow
import pytest

from t2exp.evaluation import score
from t2exp.tracking.genai import evaluation_data, question_values, rationale, scorers


def _answers(data: list[dict]) -> dict[str, dict]:
    """Recorded answers of every kind: right, right after a power-of-ten shift, wrong, no number;
    the gold document first, second, missing."""
    out = {}
    for i, row in enumerate(data):
        exp = row["expectations"]
        gold = exp.get("gold")
        answer = {0: gold, 1: None if gold is None else gold * 10, 2: 1234.5, 3: "N/A"}[i % 4]
        retrieved = [[exp["context_id"], "other"], ["other", exp["context_id"]], ["other"]][i % 3]
        out[row["inputs"]["question"]] = {
            "answer": "" if answer is None else str(answer),
            "retrieved": retrieved,
            "id": exp["question_id"],
            "subset": exp["subset"],
        }
    return out


def test_mlflow_genai_evaluate_with_the_scorers_gives_t2exp_scores_numbers(tmp_path):
    data = evaluation_data("bundled")
    assert len({r["inputs"]["question"] for r in data}) == len(data) == 12  # the default run's sample, one answer per question
    answers = _answers(data)
    rows = [{"id": a["id"], "subset": a["subset"], "prediction": a["answer"], "retrieved": a["retrieved"]} for a in answers.values()]
    expected = score(rows, dataset="bundled", n_boot=0).metrics
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    try:
        mlflow.set_experiment("genai")
        result = mlflow.genai.evaluate(data=data, predict_fn=lambda question: answers[question], scorers=scorers(k=3))
    finally:
        mlflow.set_tracking_uri(previous)
    names = ["nm", "nm_strict", "nm_bare", "mrr_at_3", "recall_at_1", "recall_at_3", "recall_at_5"]
    got = {n: 100 * result.metrics[f"{n}/mean"] for n in names}
    assert got == pytest.approx({n: expected[f"avg/{n}"] for n in names}, abs=1e-9)
    assert 0 < got["nm"] < 100 and got["nm_strict"] < got["nm"] and 0 < got["mrr_at_3"] < 100  # the cases differ


def test_question_values_and_rationales_read_like_the_paper():
    exp = {"expected_response": "9.4", "gold": 9.4, "context_id": "c1", "question_id": "q1", "subset": "FinQA"}
    shifted = question_values({"answer": "94.0", "retrieved": ["c0", "c1"]}, exp)
    assert (shifted["nm"], shifted["nm_strict"], shifted["mrr_at_3"], shifted["recall_at_1"]) == (1.0, 0.0, 0.5, 0.0)
    assert "'94.0' vs gold '9.4': match" in rationale("nm", 1.0, {"answer": "94.0"}, exp)
    assert "no match" in rationale("nm_strict", 0.0, {"answer": "94.0"}, exp)
    assert rationale("mrr_at_3", 0.5, {"retrieved": ["c0", "c1"]}, exp) == "gold document 'c1': rank 2 of 2 (cut-off 3)"
    bare = question_values("9.4", exp)  # an answer string alone: no retrieval values
    assert bare["nm"] == 1.0 and bare["mrr_at_3"] is None
    no_gold = question_values("9.4", {**{k: v for k, v in exp.items() if k != "gold"}})
    assert no_gold["nm"] is None  # no numeric gold: left out of NM, as t2exp score leaves it out


def test_a_row_the_retrieval_scorers_cannot_read_keeps_its_nm(tmp_path):
    """A row whose ``retrieved`` is not a list, or whose expectations have no ``context_id``, does
    not make every scorer raise, its NM with them: a right answer stays in ``nm/mean``.
    Each scorer scores what it can: NM counts all three right answers; the retrieval scorers
    give no value for the two rows they cannot read, with the reason, and score the third."""
    exp = {"expected_response": "9.4", "gold": 9.4, "context_id": "c1", "subset": "FinQA"}
    no_context = {k: v for k, v in exp.items() if k != "context_id"}
    data = [
        {
            "inputs": {"question": "ok"},
            "expectations": {**exp, "question_id": "q1"},
            "outputs": {"answer": "9.4", "retrieved": ["c0", "c1"]},
        },
        {"inputs": {"question": "int"}, "expectations": {**exp, "question_id": "q2"}, "outputs": {"answer": "9.4", "retrieved": 5}},
        {
            "inputs": {"question": "no context"},
            "expectations": {**no_context, "question_id": "q3"},
            "outputs": {"answer": "9.4", "retrieved": ["c1"]},
        },
    ]
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    try:
        mlflow.set_experiment("genai")
        result = mlflow.genai.evaluate(data=data, scorers=scorers(k=3))
    finally:
        mlflow.set_tracking_uri(previous)
    assert result.metrics["nm/mean"] == 1.0 and result.metrics["nm_strict/mean"] == 1.0  # all three rows count
    assert result.metrics["mrr_at_3/mean"] == 0.5 and result.metrics["recall_at_1/mean"] == 0.0  # the one readable row
    mrr_scorer = {s.name: s for s in scorers(k=3)}["mrr_at_3"]
    mrr = {r["inputs"]["question"]: mrr_scorer(outputs=r["outputs"], expectations=r["expectations"]) for r in data}
    assert mrr["ok"].value == 0.5 and mrr["int"].value is None and mrr["no context"].value is None
    assert "'retrieved' is 5, not a list of context ids" in mrr["int"].rationale and mrr["int"].error is None
    assert "no gold context_id" in mrr["no context"].rationale
    assert rationale("mrr_at_3", 0.0, {"retrieved": 5}, exp) == "gold document 'c1': not retrieved of 0 (cut-off 3)"  # a trace's


def test_a_runs_traces_carry_real_times_and_its_assessments(tmp_path):
    """Each question's trace: spans with the real times (a generator that takes 0.4 s an answer
    shows it in its generate span), the gold answer and document as expectations, and every
    metric of predictions.jsonl as CODE feedback with a rationale."""
    import json
    import time

    from fakes.openai_server import FakeOpenAIServer
    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    def slow(messages) -> str:
        time.sleep(0.4)  # the generator's known time per answer: what the span must show
        return "Final answer: 7"

    with FakeOpenAIServer(model="m", reply=slow) as srv:
        run_app(
            [
                "rag_method=bm25",
                "dataset=finqa",
                "dataset.limit=3",
                "generator=openai_compat",
                f"generator.base_url={srv.base_url}",
                "generator.model=m",
                "generator.max_concurrency=1",
                "generator.max_retries=0",
            ],
            tmp_path / "cache",
            tmp_path,
            traces=True,
        )
    client, (run,) = mlflow_runs(tmp_path)
    preds = {r["id"]: r for r in map(json.loads, open(next((tmp_path / "cache" / "runs").glob("*/predictions.jsonl")), encoding="utf-8"))}
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id)
    assert len(traces) == len(preds) == 3
    for t in traces:
        row = preds[t.info.tags["t2exp.question_id"]]
        spans = {s.name: s for s in t.data.spans}
        generate = spans["generate"]
        assert (generate.end_time_ns - generate.start_time_ns) / 1e9 >= 0.4  # the real time, not 0 s
        assert spans["retrieve"].start_time_ns <= spans["retrieve"].end_time_ns <= generate.end_time_ns <= spans["score"].end_time_ns
        expectations = {a.name: a.value for a in t.info.assessments if a.expectation is not None}
        assert expectations == {"expected_response": row["gold_raw"], "context_id": row["context_id"]}
        feedback = {a.name: a for a in t.info.assessments if a.feedback is not None}
        assert {n: f.value for n, f in feedback.items()} == {
            n: row[n] for n in ("nm", "nm_strict", "nm_bare", "mrr_at_3", "recall_at_1", "recall_at_3", "recall_at_5")
        }
        assert all(f.source.source_type == "CODE" and f.rationale for f in feedback.values())
        assert "vs gold" in feedback["nm"].rationale and "gold document" in feedback["mrr_at_3"].rationale


def test_a_resumed_run_traces_each_question_once(tmp_path):
    """A run whose second request failed holds a trace of every row it wrote, each logged as the
    row was written; the run that resumes it traces every question once, the kept rows included."""
    from fakes.openai_server import FakeOpenAIServer
    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    args = [
        "rag_method=bm25",
        "dataset=finqa",
        "dataset.limit=3",
        "generator=openai_compat",
        "generator.model=m",
        "generator.max_concurrency=1",
        "generator.max_retries=0",
    ]
    with FakeOpenAIServer(model="m", script=["ok", "500"], reply=lambda messages: "Final answer: 7") as srv:
        first = run_app([*args, f"generator.base_url={srv.base_url}"], tmp_path / "cache", tmp_path, check=False, traces=True)
        assert first.returncode == 2, first.stderr[-2000:]
        (written,) = [len(f.read_text().splitlines()) for f in (tmp_path / "cache").rglob("predictions.jsonl")]
        run_app([*args, f"generator.base_url={srv.base_url}"], tmp_path / "cache", tmp_path, traces=True)
    client, runs = mlflow_runs(tmp_path)
    counts = {r.info.status: len(client.search_traces(locations=[r.info.experiment_id], run_id=r.info.run_id)) for r in runs}
    assert counts == {"FAILED": written, "FINISHED": 3} and 0 < written < 3
    (finished,) = [r for r in runs if r.info.status == "FINISHED"]
    ids = [
        t.info.tags["t2exp.question_id"] for t in client.search_traces(locations=[finished.info.experiment_id], run_id=finished.info.run_id)
    ]
    assert len(set(ids)) == 3


def test_two_cells_over_the_same_questions_trace_the_same_ones(tmp_path):
    """A sweep's two cells over the same 8 questions, past `tracking.trace_limit=5`: each traces
    the same 5 questions (chosen by question id, not by order or time), and each trace's inputs
    (what the MLflow UI pairs two runs' traces by) name its question, so the trace comparison of
    the two cells pairs every row with the same question of the other cell."""
    import json

    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    run_app(
        ["-m", "rag_method=bm25,oracle", "generator=none", "dataset.limit=4", "tracking.trace_limit=5"],
        tmp_path / "cache",
        tmp_path,
        traces=True,
    )
    client, runs = mlflow_runs(tmp_path)
    cells = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    traced = {}
    for c in cells:
        traces = client.search_traces(locations=[c.info.experiment_id], run_id=c.info.run_id)
        ids = [t.info.tags["t2exp.question_id"] for t in traces]
        assert len(ids) == len(set(ids)) == 5
        previews = {t.info.request_preview for t in traces}
        assert len(previews) == 5 and all(json.loads(p)["question_id"] in ids for p in previews)
        traced[c.info.run_id] = previews
    assert len(cells) == 2 and len({frozenset(p) for p in traced.values()}) == 1  # the same questions, the same inputs


def test_the_mirror_of_a_cell_resume_skipped_finds_the_original_traces(tmp_path):
    """``resume=true`` skips a finished cell and lists it under the new sweep as a mirror run
    (tracking.mlflow_run.mirror_into_sweep): a search of the mirror's traces finds the original's
    (linked, not copied), so the trace comparison of the new sweep's cells has every question."""
    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    sweep = ["-m", "rag_method=bm25", "generator=none", "dataset.limit=2"]
    run_app(sweep, tmp_path / "cache", tmp_path, traces=True)
    run_app([*sweep, "resume=true"], tmp_path / "cache", tmp_path, traces=True)
    client, runs = mlflow_runs(tmp_path)
    (mirror,) = [r for r in runs if "t2exp.resumed_from" in r.data.tags]
    original = client.get_run(mirror.data.tags["t2exp.resumed_from"])

    def traced(run):
        found = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, include_spans=False)
        return sorted(t.info.tags["t2exp.question_id"] for t in found)

    assert len(traced(original)) == 4
    assert traced(mirror) == traced(original)


@pytest.fixture(scope="module")
def two_cells(tmp_path_factory):
    """Two real retrieval cells over the same 8 questions (4 per subset), every question traced:
    BM25 and the oracle (the gold document first). The store's URI, its client, and the runs by method."""
    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    track = tmp_path_factory.mktemp("two_cells")
    run_app(["-m", "rag_method=bm25,oracle", "generator=none", "dataset.limit=4"], track / "cache", track, traces=True)
    client, runs = mlflow_runs(track)
    cells = {r.data.params["rag_method.name"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    return f"sqlite:///{track / 'mlflow.db'}", client, cells


def test_each_question_trace_is_the_evaluation_row_mlflow_pairs_on(two_cells):
    """Each trace's evaluation request id is its question (``<subset>/<id>``), the same in both
    cells; Recall@r is pass/fail feedback (a boolean), MRR@k a number."""
    _, client, cells = two_cells
    requests = []
    for run in cells.values():
        traces = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id)
        assert len(traces) == 8
        for t in traces:
            assert t.info.tags["mlflow.eval.requestId"] == f"{t.info.tags['t2exp.subset']}/{t.info.tags['t2exp.question_id']}"
            feedback = {a.name: a.value for a in t.info.assessments if a.feedback is not None}
            assert all(type(feedback[f"recall_at_{r}"]) is bool for r in (1, 3, 5)) and type(feedback["mrr_at_3"]) is float, feedback
        requests.append(sorted(t.info.tags["mlflow.eval.requestId"] for t in traces))
    assert requests[0] == requests[1] and len(set(requests[0])) == 8


def test_mlflow_compare_evaluations_pairs_two_cells_as_t2exp_compare_does(two_cells, monkeypatch):
    """``mlflow.genai.compare_evaluations`` on two t2exp cells pairs every question by its request
    id, tests Recall@1 with McNemar's test and MRR@3 with Wilcoxon's, and finds the difference
    ``t2exp compare`` finds on the same metric (the same questions, the same direction and size)."""
    import json

    from helpers.command import cli
    from t2exp.cli.compare import main

    if not hasattr(mlflow.genai, "compare_evaluations"):
        pytest.skip(f"MLflow {mlflow.__version__} has no mlflow.genai.compare_evaluations (3.18 added it)")
    uri, _, cells = two_cells
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # compare_evaluations reads the default store
    oracle, bm25 = cells["oracle"].info.run_id, cells["bm25"].info.run_id
    result = mlflow.genai.compare_evaluations(oracle, bm25)
    assert len(result.paired_rows) == 8 and {p["paired_on"] for p in result.paired_rows} == {"eval_request_id"}
    assert not result.unpaired_baseline_trace_ids and not result.unpaired_candidate_trace_ids
    assert result.scorers["recall_at_1"].method.startswith("mcnemar") and result.scorers["mrr_at_3"].method.startswith("wilcoxon")
    for metric in ("recall_at_1", "mrr_at_3"):
        proc = cli(main, [oracle, bm25, "--tracking-uri", uri, "--metric", metric, "--format", "json"], prog="t2exp compare")
        assert proc.returncode == 0, proc.stderr
        ours = json.loads(proc.stdout)
        overall = next(r for r in ours["rows"] if r["subset"] == "overall")
        theirs = result.scorers[metric]
        assert ours["paired"] == theirs.n_paired == 8
        assert overall["diff"] > 0 and overall["diff"] == pytest.approx(100 * theirs.diff, abs=1e-6), (overall, theirs)

"""What makes a run inspectable in the MLflow UI beyond params and metrics: its runs table first,
its datasets (MLflow dataset inputs), code version and source, its result table as description,
its predictions as an MLflow table, and one trace per question (retrieve → generate → score spans)
for up to ``tracking.trace_limit`` questions, the same sample in every run that asked them. It
reads what the run produced; nothing is recomputed."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from t2exp.evaluation.metrics import question_metric_names
from t2exp.evaluation.questions import index_by_question
from t2exp.infra.mlflow_store import Tag
from t2exp.infra.signals import process_ended
from t2exp.tracking.genai import feedback_value, rationale

# the experiment kind: "custom_model_development" is the runs table in MLflow UIs that open an
# experiment by its kind (an experiment without it may be inferred as GenAI and open on its traces);
# MLflow 3.17 reads the view from the address or the browser instead (render.experiment_link)
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"
TABLE_FILE = "predictions_table.json"
TABLE_COLUMNS = ("id", "subset", "question", "gold", "prediction", "answer_text", "nm", "nm_strict", "retrieved", "generation")


def set_experiment_kind(client: Any, experiment_id: str) -> None:
    exp = client.get_experiment(experiment_id)
    if KIND_TAG not in (exp.tags or {}):
        client.set_experiment_tag(experiment_id, KIND_TAG, KIND)


def code_version() -> dict[str, str]:
    """``mlflow.source.git.commit`` (and whether the tree had local changes) of the t2exp checkout
    that runs, when it is one; the installed version otherwise."""
    from importlib.metadata import PackageNotFoundError, version

    tags = {"mlflow.source.type": "LOCAL", "mlflow.source.name": "python -m t2exp"}
    try:
        tags[Tag.VERSION] = version("t2exp")
    except PackageNotFoundError:
        pass
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode == 0 and commit.stdout.strip():
            tags["mlflow.source.git.commit"] = commit.stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
            )
            tags[Tag.GIT_DIRTY] = str(bool(dirty.stdout.strip())).lower()
    except (OSError, subprocess.SubprocessError):  # no git here: the version tag says what ran
        pass
    return tags


def process_tags() -> dict[str, str]:
    """Where a run's process runs (its host and pid): :func:`process_gone` reads them back."""
    import os
    import socket

    return {Tag.HOST: socket.gethostname(), Tag.PID: str(os.getpid())}


def process_gone(tags: Mapping[str, str]) -> bool:
    """The process of a run with ``tags`` (:func:`process_tags`) is known to have ended: it ran
    on this host and has ended (:func:`~t2exp.infra.signals.process_ended`). False where that
    cannot be told (another host)."""
    import socket

    pid = tags.get(Tag.PID, "")
    return tags.get(Tag.HOST) == socket.gethostname() and pid.isdigit() and process_ended(int(pid))


def dataset_entities(subsets: Sequence[Any]) -> list[Any]:
    """One MLflow dataset per subset: name, source (the files or hub id it was read from),
    digest (the corpus content hash), schema and a profile with the row counts."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    out = []
    for s in subsets:
        sources = list(s.sources)
        hub = any(str(x).startswith(("hf://", "hub:", "G4KMU/")) for x in sources)
        ds = Dataset(
            name=s.name,
            digest=str(s.content_hash)[:20],
            source_type="hugging_face" if hub else "local",
            source=json.dumps({"uri": ";".join(map(str, sources))}),
            schema=json.dumps({"columns": ["id", "context_id", "split", "question", "program_answer", "context"]}),
            profile=json.dumps(
                {"questions": len(s.questions), "corpus_documents": len(s.corpus), "splits": sorted({q.split for q in s.questions})}
            ),
        )
        out.append(DatasetInput(ds, tags=[InputTag("mlflow.data.context", "evaluation")]))
    return out


def description(summary_markdown: str, cfg_line: str) -> str:
    return f"{cfg_line}\n\n{summary_markdown}\n"


def predictions_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The columns a reader compares across runs, one row per question (lists as text)."""

    def cell(v: Any) -> Any:
        return json.dumps(v) if isinstance(v, (list, dict)) else v

    return {c: [cell(r.get(c)) for r in rows] for c in TABLE_COLUMNS}


def traced_rows(rows: Sequence[Mapping[str, Any]], limit: int | None = None) -> list[Mapping[str, Any]]:
    """The rows a run traces, a function of the question ids alone (not of the rows' order, their
    times or a repeated row), so two runs over the same questions trace the same ones: each
    question once (its first row, as every reader of predictions.jsonl takes it), sorted by
    (subset, id); past ``limit`` questions, the ``limit`` whose ``sha256("<subset>/<id>")`` is
    smallest (a sample every run with these questions draws alike)."""
    latest, _ = index_by_question(rows)
    return [latest[key] for key in traced_keys(latest, limit)]


def traced_keys(keys: Iterable[tuple[str, str]], limit: int | None = None) -> list[tuple[str, str]]:
    """The ``(subset, id)`` keys of :func:`traced_rows`, sorted: all of them, or past ``limit`` the sample."""
    keys = sorted(set(keys))
    if limit is not None and len(keys) > limit:
        keys = sorted(sorted(keys, key=_question_hash)[: max(0, limit)])
    return keys


def _question_hash(key: tuple[str, str]) -> str:
    return hashlib.sha256(question_ref(*key).encode()).hexdigest()


def question_ref(subset: object, question_id: object) -> str:
    """``<subset>/<id>``: a question across runs (its trace's evaluation request id, what
    ``mlflow.genai.compare_evaluations`` pairs two runs' rows by)."""
    return f"{subset}/{question_id}"


def trace_question(client: Any, experiment_id: str, run_id: str, r: Mapping[str, Any], k: int, times: Mapping[str, tuple[int, int]]) -> str:
    """The trace of one question's row ``r``, linked to the run; its id. Its inputs name the
    question id first: the MLflow UI pairs two runs' traces by them; its evaluation request id is
    :func:`question_ref`, which ``mlflow.genai.compare_evaluations`` pairs by. Spans ``retrieve``,
    ``generate`` and ``score``, each with its real start and end (``times``: the question's
    ``Tally.spans``; none for a question resumed from an earlier process)."""
    from mlflow.tracing.constant import TraceTagKey

    root = client.start_trace(
        f"question {r['id']}",
        span_type="CHAIN",
        experiment_id=experiment_id,
        run_id=run_id,
        inputs={"question_id": str(r["id"]), "subset": r.get("subset"), "question": r.get("question")},
        tags={
            Tag.QUESTION_ID: str(r["id"]),
            Tag.SUBSET: str(r.get("subset")),
            TraceTagKey.EVAL_REQUEST_ID: question_ref(r.get("subset"), r["id"]),
        },
        start_time_ns=min((t[0] for t in times.values()), default=None),
    )
    scores = _question_spans(client, root.trace_id, root.span_id, r, times, k)
    end = max((t[1] for t in times.values()), default=None)
    client.end_trace(root.trace_id, outputs={"prediction": r.get("prediction"), **scores}, end_time_ns=end)
    return str(root.trace_id)


def end_traces(tracking_uri: str | None, traced: Sequence[tuple[str, Mapping[str, Any]]], k: int) -> None:
    """Every trace of ``traced`` in the store (they are exported in the background: before the run
    ends, not at process exit), then the gold answer and document as its expectations and every
    metric of the question as CODE feedback with a one-line rationale (:func:`assess`)."""
    if traced:
        import mlflow

        mlflow.flush_trace_async_logging()
        assess(tracking_uri, traced, k)


def _question_spans(client: Any, tid: str, pid: str, r: Mapping[str, Any], times: Mapping[str, tuple[int, int]], k: int) -> dict[str, Any]:
    """The ``retrieve``, ``generate`` and ``score`` spans of one question's trace; its metrics."""

    def span(name: str, kind: str, inputs: Any, outputs: Any, attributes: dict[str, Any] | None = None) -> None:
        start, end = times.get(name, (None, None))
        sp = client.start_span(name, tid, pid, span_type=kind, inputs=inputs, attributes=attributes, start_time_ns=start)
        client.end_span(tid, sp.span_id, outputs=outputs, end_time_ns=end)

    if r.get("retrieved") is not None:
        span("retrieve", "RETRIEVER", {"question": r.get("question"), "k": k}, {"retrieved": r.get("retrieved"), "scores": r.get("scores")})
    if r.get("generation") is not None:
        generated = {"generation": r.get("generation"), "finish_reason": r.get("finish_reason")}
        tokens = {"prompt_tokens": r.get("prompt_tokens"), "completion_tokens": r.get("completion_tokens")}
        span("generate", "LLM", {"contexts": r.get("n_contexts")}, generated, tokens)
    scores = {m: r.get(m) for m in question_metric_names(k) if r.get(m) is not None}
    span("score", "EVALUATOR", {"answer_text": r.get("answer_text")}, {"prediction": r.get("prediction"), **scores})
    return scores


def assess(tracking_uri: str | None, traced: Sequence[tuple[str, Mapping[str, Any]]], k: int) -> None:
    """Each question's trace gets the gold answer and the gold document id as expectations and
    every metric of its prediction row (the values in ``predictions.jsonl``; :func:`feedback_value`) as
    feedback from a CODE source, each with the rationale :func:`t2exp.tracking.genai.rationale` writes (the one
    the MLflow GenAI scorers give)."""
    from mlflow.entities import AssessmentSource, Expectation, Feedback
    from mlflow.tracing.client import TracingClient

    client = TracingClient(tracking_uri)
    source = AssessmentSource(source_type="CODE", source_id="t2exp")
    for tid, r in traced:
        expected = {"expected_response": r.get("gold_raw"), "context_id": r.get("context_id")}
        for name, value in expected.items():
            if value not in (None, ""):
                client.log_assessment(tid, Expectation(name=name, value=value, source=source))
        outputs = {
            "answer": r.get("answer_text") if r.get("answer_text") is not None else r.get("prediction"),
            "retrieved": r.get("retrieved") or [],
        }
        for name in question_metric_names(k):
            value = r.get(name)
            if value is not None:
                why = rationale(name, value, outputs, expected)
                client.log_assessment(tid, Feedback(name=name, value=feedback_value(name, value), source=source, rationale=why))

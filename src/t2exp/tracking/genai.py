"""T²-RAGBench's metrics for ``mlflow.genai.evaluate``: scorers for any RAG app, and the benchmark's
questions as evaluation data::

    from t2exp.tracking.genai import evaluation_data, scorers

    def my_rag(question: str) -> dict:
        return {"answer": "12.5", "retrieved": ["<context_id>", ...]}  # or the answer string alone

    result = mlflow.genai.evaluate(data=evaluation_data("bundled"), predict_fn=my_rag, scorers=scorers(k=3))

Each scorer gives one question's value as ``t2exp score`` computes it (true/false, or the reciprocal rank),
so MLflow's mean is ``t2exp score``'s ``avg`` / 100; no numeric gold: no NM value; no ``retrieved``: no
retrieval values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from t2exp.config.schema import Config
from t2exp.errors import one_line
from t2exp.evaluation.metrics import question_metric_names, question_metrics
from t2exp.evaluation.scoring.gold import FROM_CONFIG, compose_config, load_gold
from t2exp.evaluation.scoring.predictions import parse_rows

RATIONALES = {
    "nm": "Number Match (paper §3): equal within 1 % after a power-of-ten shift",
    "nm_strict": "strict Number Match: within 1 %, no power-of-ten shift",
    "nm_bare": "the authors' reading: bare float() of the answer text",
}


def evaluation_data(
    dataset: str = "bundled",
    *,
    limit: int | None | str = FROM_CONFIG,
    dataset_path: str | None = None,
    question_splits: Sequence[str] | None = None,
    overrides: Sequence[str] = (),
    input_fields: Sequence[str] = ("question",),
) -> list[dict[str, Any]]:
    """The questions of a ``conf/dataset`` option (``bundled``: the seeded sample a default run
    asks; ``limit=None``: every question; local files with ``dataset_path``) as rows of
    ``{"inputs": ..., "expectations": ...}``. ``inputs`` holds ``input_fields`` (the question,
    and any of its metadata, e.g. ``company_name``, ``report_year``: the arguments of your
    ``predict_fn``); ``expectations`` the gold answer (``expected_response``, and ``gold`` when it
    is a number), the gold context id, the question id and its subset."""
    cfg = compose_config(
        dataset,
        dataset_path=dataset_path,
        question_splits=question_splits,
        limit=limit,  # type: ignore[arg-type]
        overrides=list(overrides),
    )
    rows = []
    for q in load_gold(cfg).questions:
        fields = {"question": q.question, **q.metadata}
        expectations: dict[str, Any] = {
            "expected_response": q.gold_raw,
            "context_id": q.context_id,
            "question_id": q.id,
            "subset": q.subset,
        }
        if q.gold is not None:
            expectations["gold"] = q.gold
        rows.append({"inputs": {f: fields.get(f, "") for f in input_fields}, "expectations": expectations})
    return rows


def question_values(outputs: Any, expectations: Mapping[str, Any], k: int = Config.k) -> dict[str, float | None]:
    """Every metric of one answered question, as ``t2exp score`` computes it: ``outputs`` is the
    answer (a string or number) or a mapping with ``answer`` (or ``prediction``) and optionally
    ``retrieved`` (context ids, best first). A part of the row that cannot be read (``retrieved``
    not a list, no gold ``context_id``) leaves its metrics ``None`` and the others are computed."""
    return scored(outputs, expectations, k)[0]


def scored(outputs: Any, expectations: Mapping[str, Any], k: int = Config.k) -> tuple[dict[str, float | None], dict[str, str]]:
    """:func:`question_values`, and for each metric left out because its part of the row could not
    be read, the reason (one line)."""
    answer, retrieved = _answer_and_retrieved(outputs)
    problems: dict[str, str] = {}
    value, text, gold = None, None, expectations.get("gold")
    try:
        (sub,), _ = parse_rows([{"id": str(expectations.get("question_id") or "question"), "prediction": answer}], "mlflow.genai outputs")
        value, text = sub.value, sub.text
    except Exception as exc:  # an answer no reader takes: no NM, the retrieval metrics still count
        gold = None
        problems.update(dict.fromkeys(RATIONALES, f"the answer could not be read ({one_line(exc, 120)})"))
    ranked, why = (None, "") if retrieved is None else _ranked(retrieved, expectations)
    values = question_metrics(ranked, str(expectations.get("context_id") or ""), k, value, gold, pred_text=text)
    if why:  # a retrieval these metrics cannot read: no value, and why
        problems.update({m: why for m in question_metric_names(k) if m not in RATIONALES})
    return values, problems


def _answer_and_retrieved(outputs: Any) -> tuple[Any, Any]:
    if isinstance(outputs, Mapping):
        return outputs.get("answer", outputs.get("prediction")), outputs.get("retrieved")
    return outputs, None


def _ranked(retrieved: Any, expectations: Mapping[str, Any]) -> tuple[list[str] | None, str]:
    """The ranked context ids of ``retrieved``, or None and why they cannot be scored."""
    if expectations.get("context_id") in (None, ""):
        return None, "no gold context_id in the expectations: the retrieval cannot be scored"
    try:
        (sub,), _ = parse_rows([{"id": "question", "prediction": None, "retrieved": retrieved}], "mlflow.genai outputs")
    except Exception:
        return None, f"outputs 'retrieved' is {one_line(repr(retrieved), 60)}, not a list of context ids: the retrieval cannot be scored"
    return sub.retrieved or [], ""


def scorers(k: int = Config.k) -> list[Any]:
    """MLflow scorers of every T²-RAGBench metric: ``nm``, ``nm_strict``, ``nm_bare``,
    ``mrr_at_<k>`` and ``recall_at_1/3/5``, each with a one-line rationale."""
    return [_scorer(name, k) for name in question_metric_names(k)]


def _scorer(name: str, k: int) -> Any:
    from mlflow.entities import Feedback
    from mlflow.genai.scorers import scorer

    def score(outputs: Any, expectations: dict[str, Any]) -> Any:
        values, problems = scored(outputs, expectations, k)
        value = values.get(name)
        if value is None:
            if name in problems:  # a row this metric cannot read: no value, and why (left out of the mean)
                return Feedback(name=name, value=None, rationale=f"not scored: {problems[name]}")
            return None  # not applicable: no numeric gold, or no retrieved list
        return Feedback(name=name, value=feedback_value(name, value), rationale=rationale(name, value, outputs, expectations))

    return scorer(score, name=name)


def feedback_value(name: str, value: float) -> bool | float:
    """A metric's value as MLflow feedback: a 0/1 metric (Number Match, Recall@r) as a boolean, a
    pass/fail that ``mlflow.genai.compare_evaluations`` tests with McNemar's test; MRR@k as a number."""
    return float(value) if name.startswith("mrr_at_") else bool(value)


def rationale(name: str, value: float, outputs: Any, expectations: Mapping[str, Any]) -> str:
    """One line a reader understands: what was compared and why it counts or not."""
    if name in RATIONALES:
        answer = _answer_and_retrieved(outputs)[0]
        verdict = "match" if value else "no match"
        return f"{str(answer)[:60]!r} vs gold {expectations.get('expected_response')!r}: {verdict} ({RATIONALES[name]})"
    retrieved = _answer_and_retrieved(outputs)[1]
    ranked = (_ranked(retrieved, {"context_id": "-"})[0] or []) if retrieved not in (None, "") else []
    gold = expectations.get("context_id")
    cut = int(name.rsplit("_", 1)[1])
    where = f"rank {ranked.index(gold) + 1}" if gold in ranked else "not retrieved"
    return f"gold document {gold!r}: {where} of {len(ranked)} (cut-off {cut})"

"""A cell's own rows: :class:`Prediction`, one question's line of ``predictions.jsonl`` with its
per-question metrics, and :func:`score_cell`, which aggregates them (a run and a sharded cell's
merge alike; outside files go through :func:`t2exp.evaluation.scoring.compute.score`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from t2exp.answering import answer_choice
from t2exp.data.records import Question, Subset
from t2exp.evaluation.metrics import (
    CI_SEED,
    DEGENERATE,
    N_BOOT,
    NM_METRICS,
    RECALL_KS,
    aggregate,
    degenerate_counts,
    flatten_table,
    question_metrics,
    scored_names,
)
from t2exp.generators import Generation
from t2exp.methods import Ranking


@dataclass(frozen=True)
class Prediction:
    """One question's prediction: what was retrieved (ids, scores, dense similarities), what the
    generator read and answered, the chosen answer and its per-question ``metrics``."""

    id: str
    subset: str
    split: str | None
    context_id: str
    question: str
    retrieved: list[str] | None
    scores: list[float] | None
    # the dense similarity of each retrieved document (None: BM25-only): what the authors' metrics re-sort by
    retrieved_dense: list[float | None] | None
    ranked_depth: int | None  # how many documents the method ranked, where fewer than R@5 reads (else None)
    n_contexts: int
    generation: str | None
    program: str | None
    program_error: str | None
    fields: dict[str, Any]  # the answer mode's own fields (t2exp.answering.answer_choice)
    answer_text: str | None  # the model's answer string: what nm_bare reads
    prediction: float | None
    gold: float | None
    gold_raw: Any
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    generate_seconds: float | None  # the model's seconds (from the LLM cache: when it was made)
    metrics: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def of(cls, q: Question, hits, contexts: list[str], gen: Generation | None, answer_mode: str, grounding: str, k: int) -> Prediction:
        """The prediction of ``q`` from its ranked ``hits``, the ``contexts`` the generator read and
        its generation ``gen`` (None: a retrieval-only run), its per-question metrics computed once."""
        ranked = None if hits is None else [cid for cid, _ in hits]
        ranking = None if hits is None else Ranking.of(hits)
        dense, depth = (None, None) if ranking is None else (_dense_of(ranking), ranking.depth)
        parsed = None if gen is None else answer_choice.choose(answer_mode, [gen.text, *gen.extra.get("samples", [])], contexts, grounding)
        pred, text = (parsed.value, parsed.text) if parsed else (None, None)
        m = question_metrics(ranked, q.context_id, k, pred, q.gold, pred_text=text, dense=dense, ranked_depth=depth)
        if gen is None:
            m.update(dict.fromkeys((*NM_METRICS, DEGENERATE)))
        return cls(
            id=q.id,
            subset=q.subset,
            split=q.split,
            context_id=q.context_id,
            question=q.question,
            retrieved=ranked,
            scores=None if hits is None else [round(s, 6) for _, s in hits],
            retrieved_dense=dense,
            ranked_depth=depth if depth is not None and depth < max(RECALL_KS) else None,
            n_contexts=len(contexts),
            generation=None if gen is None else gen.text,
            program=parsed.program if parsed else None,
            program_error=parsed.program_error if parsed else None,
            fields=dict(parsed.fields) if parsed else {},
            answer_text=text,
            prediction=pred,
            gold=q.gold,
            gold_raw=q.gold_raw,
            finish_reason=None if gen is None else gen.finish_reason,
            prompt_tokens=None if gen is None else gen.prompt_tokens,
            completion_tokens=None if gen is None else gen.completion_tokens,
            generate_seconds=None if gen is None else round(gen.seconds, 3),
            metrics=m,
        )

    def to_json(self) -> dict[str, Any]:
        """The row as ``predictions.jsonl`` holds it (:meth:`from_json` reads it back)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("fields", "metrics"):
                out.update(value)
            elif f.name != "ranked_depth" or value is not None:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Prediction:
        names = [f.name for f in fields(cls)]
        keys = list(row)
        tail = keys.index("generate_seconds") + 1 if "generate_seconds" in keys else len(keys)
        rest = [k for k in keys if k not in names]
        plain: dict[str, Any] = {n: row.get(n) for n in names if n not in ("fields", "metrics")}
        return cls(
            **plain,
            fields={k: row[k] for k in rest if keys.index(k) < tail},
            metrics={k: row[k] for k in rest if keys.index(k) >= tail},
        )


def _dense_of(hits: Ranking) -> list[float | None] | None:
    dense = hits.dense
    if not dense:
        return None
    return [None if cid not in dense else round(float(dense[cid]), 6) for cid, _ in hits]


def score_cell(rows: Sequence[Prediction], subsets: Sequence[Subset], k: int) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """A cell's metrics (each subset's and the question-weighted ``avg``, with CIs; with answers,
    the degenerate counts) and its ``metrics.json`` table, from its rows' own per-question metrics,
    as :func:`t2exp.evaluation.scoring.compute.score` scores the written file."""
    answered = any(r.generation is not None for r in rows)
    ranked = any(r.retrieved is not None for r in rows)
    names = scored_names(k, answered, "ranked" if ranked else "none", any(r.retrieved_dense is not None for r in rows))
    per_q = [{"subset": r.subset, **r.metrics} for r in rows]
    agg = aggregate(per_q, names, ci=True, n_boot=N_BOOT, seed=CI_SEED)
    names_of = sorted(s.name for s in subsets if s.questions)
    table = {s: agg.get(s, {}) for s in [*names_of, "avg"]}
    metrics = {**flatten_table(table), **usage(rows)}
    if answered:
        degenerate = degenerate_counts(per_q)
        metrics.update({f"{s}/degenerate_predictions": float(degenerate.get(s, 0)) for s in names_of})
        metrics["degenerate_predictions"] = float(sum(degenerate.values()))
    return metrics, {s: {n: v.__dict__ for n, v in m.items()} for s, m in table.items()}


def usage(rows: Sequence[Prediction]) -> dict[str, float]:
    """What a cell's rows say it used: its questions; with answers, the prompt and completion
    tokens (an answer from the LLM cache counts what it cost when made) and, where answers were
    asked as JSON, the share (%) that were valid JSON."""
    out = {"questions": float(len(rows))}
    answered = [r for r in rows if r.generation is not None]
    if answered:
        out["prompt_tokens"] = float(sum(r.prompt_tokens or 0 for r in answered))
        out["completion_tokens"] = float(sum(r.completion_tokens or 0 for r in answered))
    judged = [bool(r.fields["json_valid"]) for r in answered if "json_valid" in r.fields]
    if judged:
        out["json_valid_share"] = 100.0 * sum(judged) / len(judged)
    return out

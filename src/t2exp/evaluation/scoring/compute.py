"""Score any RAG system's outputs against T²-RAGBench gold answers (:func:`score`; ``t2exp score``;
docs/evaluation.md): gold from a ``conf/dataset`` option (or ``gold=`` records), scored by the app's
own evaluator in the app's row order, so re-scoring a run's ``predictions.jsonl`` gives its logged
values and CIs.

- ``<subset>/nm`` is over every gold question (a missing one is wrong), beside ``nm_submitted`` and
  ``coverage``; a missing question or an empty ``retrieved`` is a retrieval miss.
- ``retrieved`` gives MRR@k and R@1/3/5; a lone ``context_id`` (leaderboard format) gives MRR@k and
  R@1; ``context_id`` is not read when ``retrieved`` exists (in a run's file it is the gold).
- each row is scored (the first of a gold id), unknown (``outside_sample``: in the dataset, not the
  ``limit`` sample) or a duplicate; a prediction with no number is ``unparsable`` and wrong; an empty
  ``prediction`` in every row is retrieval-only (no NM) unless the run's generator replied.
- ``nm_bare`` and ``nm_strict`` read ``answer_text`` when there is one, else ``prediction``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from t2exp.config.schema import Config
from t2exp.data.records import Question, Subset
from t2exp.errors import ConfigError
from t2exp.evaluation.metrics import (
    CI_SEED,
    DEGENERATE,
    N_BOOT,
    MetricValue,
    aggregate,
    degenerate_counts,
    flatten_table,
    question_metrics,
    scored_names,
)
from t2exp.evaluation.scoring.gold import (
    FROM_CONFIG,
    Gold,
    compose_config,
    gold_from,
    load_gold,
)
from t2exp.evaluation.scoring.notes import submission_notes
from t2exp.evaluation.scoring.predictions import (
    Predictions,
    Submitted,
    first_of_each,
    parse_rows,
    read_predictions,
)
from t2exp.evaluation.scoring.result import Counts, ScoreResult

if TYPE_CHECKING:
    from omegaconf import DictConfig


def _retrieval_mode(subs: list[Submitted], columns: set[str]) -> str:
    if "retrieved" in columns:
        return "ranked" if any(s.retrieved is not None for s in subs) else "none"
    if "context_id" in columns and any(s.context_id is not None for s in subs):
        return "rank1"
    return "none"


def score_rows(
    subs: list[Submitted], columns: set[str], gold: Gold, *, k: int = Config.k, n_boot: int = N_BOOT, seed: int = CI_SEED, source: str = ""
) -> ScoreResult:
    """Match submitted rows to gold questions and compute the metrics."""
    if k < 1:
        raise ConfigError(f"k={k}: must be at least 1")
    counts = Counts(rows=len(subs), gold=len(gold.questions))
    matched = _match(subs, gold, counts)
    retrieval = _retrieval_mode(subs, columns)
    with_nm = any(s.prediction is not None or s.generated for s in subs)
    names = scored_names(k, with_nm, retrieval, any(s.dense is not None for s in subs))
    per_q = _per_question(gold, matched.first, retrieval, with_nm, names, k, counts)

    ci = n_boot > 0
    agg = aggregate(per_q.rows, names, ci=ci, n_boot=max(n_boot, 1), seed=seed)
    if with_nm:
        extra = aggregate(per_q.submitted, ["nm_submitted"], ci=ci, n_boot=max(n_boot, 1), seed=seed)
        for subset, vals in extra.items():
            agg.setdefault(subset, {}).update(vals)
    subset_counts = {s: per_q.subset_counts[s] for s in sorted(per_q.subset_counts)}  # aggregate's order, then avg
    subset_counts["avg"] = {key: sum(v[key] for v in subset_counts.values()) for key in ("questions", "scored", "missing", "unparsable")}
    table: dict[str, dict[str, MetricValue]] = {}
    for subset, sc in subset_counts.items():
        cov = MetricValue(100.0 * sc["scored"] / sc["questions"], sc["questions"]) if sc["questions"] else MetricValue(0.0, 0)
        table[subset] = {"coverage": cov, **agg.get(subset, {})}
    shown = (["nm", "nm_submitted"] if with_nm else []) + [n for n in names if n != "nm"]
    degenerate = degenerate_counts(per_q.rows) if with_nm else {}
    counts.degenerate_predictions = sum(degenerate.values())
    metrics = _flat_metrics(table, subset_counts, degenerate if with_nm else None, counts)
    notes = submission_notes(
        counts,
        retrieval,
        with_nm,
        k,
        matched.unknown,
        matched.duplicates,
        matched.ambiguous,
        per_q.no_ranking,
        gold.params.get("dataset.limit"),
    )
    return ScoreResult(
        metrics=metrics,
        table=table,
        counts=counts,
        subset_counts=subset_counts,
        k=k,
        retrieval=retrieval,
        metric_names=shown,
        notes=notes,
        questions=per_q.answered,
        source=source,
        dataset=gold.dataset,
        n_boot=n_boot,
        seed=seed,
        params={**gold.params, "k": k, "bootstrap": n_boot, "bootstrap_seed": seed, "retrieval": retrieval, "predictions": source},
    )


@dataclass
class _Matched:
    """Submitted rows matched to gold questions: the first row of each (subset, id), and the rows
    that match none (or several) and that repeat an id."""

    first: dict[tuple[str, str], Submitted] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    ambiguous: int = 0


def _match(subs: list[Submitted], gold: Gold, counts: Counts) -> _Matched:
    by_id: dict[str, list[Question]] = {}
    for q in gold.questions:
        by_id.setdefault(q.id, []).append(q)
    all_by_id: dict[str, set[str]] = {}
    for subset, qid in gold.all_ids:
        all_by_id.setdefault(qid, set()).add(subset)
    out = _Matched()
    known: list[tuple[tuple[str, str], Submitted]] = []
    for s in subs:
        cands = by_id.get(s.id, [])
        if s.subset is not None and len(cands) > 1:
            cands = [q for q in cands if q.subset == s.subset]
        if len(cands) != 1:
            counts.unknown_ids += 1
            out.unknown.append(s.id)
            out.ambiguous += len(cands) > 1
            counts.outside_sample += not cands and s.id in all_by_id
            continue
        known.append(((cands[0].subset, cands[0].id), s))
    out.first, repeated = first_of_each(known)
    out.duplicates = [s.id for s in repeated]
    counts.duplicate_ids = len(repeated)
    counts.subset_mismatch = sum(s.subset is not None and s.subset != subset for (subset, _), s in out.first.items())
    return out


@dataclass
class _PerQuestion:
    rows: list[dict[str, Any]] = field(default_factory=list)  # every gold question's metrics (a missing one: a miss)
    submitted: list[dict[str, Any]] = field(default_factory=list)  # NM of the answered questions only
    answered: list[dict[str, Any]] = field(default_factory=list)  # each answered question's row (ScoreResult.questions)
    subset_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    no_ranking: int = 0


def _per_question(
    gold: Gold, first: dict[tuple[str, str], Submitted], retrieval: str, with_nm: bool, names: list[str], k: int, counts: Counts
) -> _PerQuestion:
    out = _PerQuestion()
    for q in gold.questions:
        s = first.get((q.subset, q.id))
        sc = out.subset_counts.setdefault(q.subset, {"questions": 0, "scored": 0, "missing": 0, "unparsable": 0})
        sc["questions"] += 1
        counts.non_numeric_gold += q.gold is None
        if s is None:
            sc["missing"] += 1
            counts.missing += 1
        else:
            sc["scored"] += 1
            counts.scored += 1
        if s is not None and s.value is None and with_nm:
            sc["unparsable"] += 1
            counts.unparsable += 1
        ranked: list[str] | None = None
        if retrieval == "ranked":
            ranked = (s.retrieved if s is not None else None) or []
            out.no_ranking += s is not None and not s.retrieved
        elif retrieval == "rank1":
            ranked = [s.context_id] if s is not None and s.context_id is not None else []
        m = question_metrics(
            ranked,
            q.context_id,
            k,
            None if s is None else s.value,
            q.gold,
            pred_text=None if s is None else s.text,
            dense=[] if s is None else s.dense,  # a missing question is a miss in every order
            ranked_depth=None if s is None else s.depth,
        )
        row: dict[str, Any] = {"subset": q.subset, **{n: m.get(n) for n in names}}
        if s is not None:
            out.answered.append(_answered(q, s, ranked, row))
        if s is not None and with_nm:
            row[DEGENERATE] = m[DEGENERATE]
            out.submitted.append({"subset": q.subset, "nm_submitted": m["nm"]})
        out.rows.append(row)
    return out


def _answered(q: Question, s: Submitted, ranked: list[str] | None, values: dict[str, Any]) -> dict[str, Any]:
    """An answered question as a row of a run's ``predictions.jsonl``: its gold, the submitted
    answer and ranking, and its metric values (what ``t2exp compare`` pairs)."""
    head = {"id": q.id, "subset": q.subset, "split": q.split, "context_id": q.context_id, "question": q.question}
    answer = None if s.prediction is None else str(s.prediction)  # as a run's row: the answer string and its number
    return {**head, "retrieved": ranked, "answer_text": answer, "prediction": s.value, "gold": q.gold, "gold_raw": q.gold_raw, **values}


def _flat_metrics(
    table: dict[str, dict[str, MetricValue]], subset_counts: dict[str, dict[str, int]], degenerate: dict[str, int] | None, counts: Counts
) -> dict[str, float]:
    """The table as ``<subset>/<metric>`` numbers, each subset's counts and the overall counts."""
    metrics = flatten_table(table)
    for subset, sc in subset_counts.items():
        if subset != "avg":
            for key in ("questions", "scored", "missing", "unparsable"):
                metrics[f"{subset}/{key}"] = float(sc[key])
            if degenerate is not None:
                metrics[f"{subset}/degenerate_predictions"] = float(degenerate.get(subset, 0))
    metrics.update({name: float(v) for name, v in counts.as_dict().items()})
    return metrics


def score(
    predictions: Predictions,
    *,
    dataset: str = "bundled",
    dataset_path: str | Path | None = None,
    question_splits: Sequence[str] | None = None,
    limit: int | None | Literal["config"] = FROM_CONFIG,
    overrides: Sequence[str] = (),
    gold: Iterable[Question | Subset] | None = None,
    config: DictConfig | None = None,
    k: int = Config.k,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
) -> ScoreResult:
    """Score predictions against T²-RAGBench gold answers.

    ``predictions``: a file path (.jsonl/.json/.csv/.tsv/.parquet), a list of row dicts, a dict
    ``id → prediction`` (or ``id → row``) or a DataFrame. Gold: ``gold=`` (Question or Subset
    records) if given, else ``config`` (an already composed app config), else the ``dataset``
    option composed with ``dataset_path``/``question_splits``/``limit``/``overrides`` applied.
    ``k`` is MRR@k's cut-off; ``n_boot`` bootstrap resamples (0 = no CIs) drawn with ``seed``
    (a run uses ``N_BOOT`` and ``CI_SEED``: 1000 and seed 0).
    """
    rows, source, where = read_predictions(predictions)
    subs, columns = parse_rows(rows, source, where)  # bad input fails before any gold is loaded
    if gold is not None:
        g = gold_from(gold)
    else:
        cfg = (
            config
            if config is not None
            else compose_config(dataset, dataset_path=dataset_path, question_splits=question_splits, limit=limit, overrides=overrides)
        )
        g = load_gold(cfg)
    return score_rows(subs, columns, g, k=k, n_boot=n_boot, seed=seed, source=source)

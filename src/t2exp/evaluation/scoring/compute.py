"""Score any RAG system's outputs against T²-RAGBench gold answers (the Python API).

``score(predictions, dataset="bundled")`` takes a path (JSONL, JSON, CSV, parquet), a list of
dicts, a dict ``id → prediction`` or a pandas DataFrame with at least ``id`` and ``prediction``
(optional ``subset``, ``context_id``, ``retrieved``) and returns a :class:`ScoreResult`.
``python -m t2exp.score`` is the command line around it.

Gold answers come from the dataset: ``dataset`` names a ``conf/dataset/*.yaml`` option and is
composed with Hydra from the project's ``conf/`` exactly as ``python -m t2exp dataset=NAME``
composes it, so ``subsets``, ``question_splits``, ``limit`` and the sampling ``seed`` mean what
they mean for a run (``dataset=bundled`` is the seeded ``limit`` sample a default run scores).
``gold=`` takes already loaded :class:`t2exp.data.loader.Question` records instead.

Scoring uses the app's own evaluator (:mod:`t2exp.evaluation.metrics`): ``question_metrics`` per gold question, then
``aggregate(rows, names, ci=..., n_boot=..., seed=...)`` in the order the app builds its rows
(subsets in config order, questions in loaded order), so re-scoring a run's
``predictions.jsonl`` reproduces its logged ``<subset>/<metric>`` values and bootstrap CIs.

Headline vs coverage (the decision)
-----------------------------------
``<subset>/nm`` — the headline — is Number Match over **every gold question**: a gold question
without a prediction counts as wrong, as on the paper's leaderboard, so leaving hard questions
out cannot raise a score. Next to it, clearly labelled, ``<subset>/nm_submitted`` is Number
Match over the scored (submitted) questions only and ``<subset>/coverage`` the share of gold
questions that have a prediction. For a complete submission (every run of ``python -m t2exp``)
the two NM values are equal. Retrieval metrics follow the headline too: a missing question, or a
row whose ``retrieved`` is empty, counts as a miss.

Retrieval metrics
-----------------
- a ``retrieved`` column (ranked context ids; in CSV a JSON list string) → MRR@k, R@1/3/5;
- no ``retrieved`` column but a ``context_id`` per row (the leaderboard format) → rank-1 metrics
  only: MRR@k and R@1, which are then the same number; R@3/R@5 are not computed and the output
  says so;
- a ``retrieved`` column that is empty in every row (a run without retrieval), or neither
  column → no retrieval metrics. ``context_id`` is not read when ``retrieved`` exists: in a
  run's ``predictions.jsonl`` it is the gold context.

Nothing is dropped silently. Every submitted row is exactly one of: scored (first row of a gold
id), an unknown id (not among the gold questions; ids that are in the dataset but outside a
``limit`` sample are counted apart as ``outside_sample``) or a duplicate id (a later row of an
id already seen: the first is kept). A prediction without a number ("N/A", "", null) is
``unparsable`` and wrong. ``prediction`` may be a number or free text ("$1,234.5 million"):
numbers are read with :func:`t2exp.evaluation.numbers.extract_number`. A file whose ``prediction`` is empty
in every row is a retrieval-only submission: no NM is computed (as for a run without a
generator) and the output says so.

NM readings
-----------
Next to ``nm`` (and computed by the same evaluator, over the same questions: a non-numeric gold is
left out of all of them) come ``nm_bare`` (the authors' bare-``float()`` reading of the answer
string, with their small-gold rule) and ``nm_strict`` (relative error < ε, no power-of-ten shift),
plus ``<subset>/degenerate_predictions`` and the total ``degenerate_predictions``
(:func:`t2exp.evaluation.numbers.is_degenerate`). The answer string is the ``answer_text`` column
when the file has one (a run's ``predictions.jsonl``, whose ``prediction`` is the parsed number),
else the raw ``prediction``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from t2exp.data.loader import Question, Subset
from t2exp.errors import ConfigError
from t2exp.evaluation.metrics import (
    CI_SEED,
    DEGENERATE,
    N_BOOT,
    NM_METRICS,
    RECALL_KS,
    MetricValue,
    aggregate,
    degenerate_counts,
    flatten_table,
    paper_order_names,
    question_metrics,
)
from t2exp.evaluation.scoring.gold import (
    FROM_CONFIG,
    Gold,
    compose_config,
    gold_from,
    load_gold,
)
from t2exp.evaluation.scoring.predictions import (
    Predictions,
    Submitted,
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
    subs: list[Submitted], columns: set[str], gold: Gold, *, k: int = 3, n_boot: int = N_BOOT, seed: int = CI_SEED, source: str = ""
) -> ScoreResult:
    """Match submitted rows to gold questions and compute the metrics."""
    if k < 1:
        raise ConfigError(f"k={k}: must be at least 1")
    by_id: dict[str, list[Question]] = {}
    for q in gold.questions:
        by_id.setdefault(q.id, []).append(q)
    all_by_id: dict[str, set[str]] = {}
    for subset, qid in gold.all_ids:
        all_by_id.setdefault(qid, set()).add(subset)

    counts = Counts(rows=len(subs), gold=len(gold.questions))
    first: dict[tuple[str, str], Submitted] = {}
    unknown: list[str] = []
    duplicates: list[str] = []
    ambiguous = 0
    s: Submitted | None
    for s in subs:
        cands = by_id.get(s.id, [])
        if s.subset is not None and len(cands) > 1:
            cands = [q for q in cands if q.subset == s.subset]
        if len(cands) != 1:
            counts.unknown_ids += 1
            unknown.append(s.id)
            ambiguous += len(cands) > 1
            if not cands and s.id in all_by_id:
                counts.outside_sample += 1
            continue
        q = cands[0]
        key = (q.subset, q.id)
        if key in first:
            counts.duplicate_ids += 1
            duplicates.append(s.id)
            continue
        first[key] = s
        counts.subset_mismatch += s.subset is not None and s.subset != q.subset

    retrieval = _retrieval_mode(subs, columns)
    with_nm = any(s.prediction is not None for s in subs)
    names = (list(NM_METRICS) if with_nm else []) + ([] if retrieval == "none" else [f"mrr_at_{k}"])
    names += {"ranked": [f"recall_at_{r}" for r in RECALL_KS], "rank1": ["recall_at_1"], "none": []}[retrieval]
    if retrieval == "ranked" and any(s.dense is not None for s in subs):
        names += paper_order_names(k)

    rows: list[dict[str, Any]] = []
    submitted_rows: list[dict[str, Any]] = []
    subset_counts: dict[str, dict[str, int]] = {}
    no_ranking = 0
    for q in gold.questions:
        s = first.get((q.subset, q.id))
        sc = subset_counts.setdefault(q.subset, {"questions": 0, "scored": 0, "missing": 0, "unparsable": 0})
        sc["questions"] += 1
        counts.non_numeric_gold += q.gold is None
        if s is None:
            sc["missing"] += 1
            counts.missing += 1
        else:
            sc["scored"] += 1
            counts.scored += 1
            if s.value is None and with_nm:
                sc["unparsable"] += 1
                counts.unparsable += 1
        ranked: list[str] | None = None
        if retrieval == "ranked":
            ranked = (s.retrieved if s is not None else None) or []
            no_ranking += s is not None and not s.retrieved
        elif retrieval == "rank1":
            ranked = [s.context_id] if s is not None and s.context_id is not None else []
        m = question_metrics(ranked, q.context_id, k, None if s is None else s.value, q.gold, pred_text=None if s is None else s.text,
                             dense=[] if s is None else s.dense,  # a missing question is a miss in every order
                             ranked_depth=None if s is None else s.depth)
        row: dict[str, Any] = {"subset": q.subset, **{n: m.get(n) for n in names}}
        if s is not None and with_nm:
            row[DEGENERATE] = m[DEGENERATE]
        rows.append(row)
        if s is not None and with_nm:
            submitted_rows.append({"subset": q.subset, "nm_submitted": m["nm"]})

    ci = n_boot > 0
    agg = aggregate(rows, names, ci=ci, n_boot=max(n_boot, 1), seed=seed)
    if with_nm:
        extra = aggregate(submitted_rows, ["nm_submitted"], ci=ci, n_boot=max(n_boot, 1), seed=seed)
        for subset, vals in extra.items():
            agg.setdefault(subset, {}).update(vals)
    subset_counts = {s: subset_counts[s] for s in sorted(subset_counts)}  # aggregate's order, then avg
    subset_counts["avg"] = {key: sum(v[key] for v in subset_counts.values()) for key in ("questions", "scored", "missing", "unparsable")}
    table: dict[str, dict[str, MetricValue]] = {}
    for subset, sc in subset_counts.items():
        cov = MetricValue(100.0 * sc["scored"] / sc["questions"], sc["questions"]) if sc["questions"] else MetricValue(0.0, 0)
        table[subset] = {"coverage": cov, **agg.get(subset, {})}
    shown = (["nm", "nm_submitted"] if with_nm else []) + [n for n in names if n != "nm"]
    degenerate = degenerate_counts(rows) if with_nm else {}
    counts.degenerate_predictions = sum(degenerate.values())

    metrics = flatten_table(table)
    for subset, sc in subset_counts.items():
        if subset != "avg":
            metrics[f"{subset}/questions"] = float(sc["questions"])
            metrics[f"{subset}/scored"] = float(sc["scored"])
            metrics[f"{subset}/missing"] = float(sc["missing"])
            metrics[f"{subset}/unparsable"] = float(sc["unparsable"])
            if with_nm:
                metrics[f"{subset}/degenerate_predictions"] = float(degenerate.get(subset, 0))
    metrics.update({name: float(v) for name, v in counts.as_dict().items()})

    notes = _notes(counts, retrieval, with_nm, k, unknown, duplicates, ambiguous, no_ranking, gold)
    return ScoreResult(
        metrics=metrics,
        table=table,
        counts=counts,
        subset_counts=subset_counts,
        k=k,
        retrieval=retrieval,
        metric_names=shown,
        notes=notes,
        source=source,
        dataset=gold.dataset,
        n_boot=n_boot,
        seed=seed,
        params={**gold.params, "k": k, "bootstrap": n_boot, "bootstrap_seed": seed, "retrieval": retrieval, "predictions": source},
    )


def _examples(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:5])
    return shown + (f", … ({len(ids) - 5} more)" if len(ids) > 5 else "")


def _notes(
    c: Counts, retrieval: str, with_nm: bool, k: int, unknown: list[str], duplicates: list[str], ambiguous: int, no_ranking: int, gold: Gold
) -> list[str]:
    notes: list[str] = []
    if retrieval == "rank1":
        notes.append(
            f"retrieval from a single context_id per row (no ranked `retrieved` list): rank-1 metrics only, "
            f"so MRR@{k} = R@1; R@3 and R@5 are not computed"
        )
    elif retrieval == "none":
        notes.append("no retrieval metrics: no `retrieved` list (or it is empty in every row) and no `context_id`")
    if not with_nm:
        notes.append("`prediction` is empty in every row: retrieval-only submission, NM not computed")
    if c.missing:
        notes.append(f"{c.missing} gold questions have no prediction: wrong in NM (headline), absent from NM (submitted)")
    if unknown:
        note = f"{c.unknown_ids} rows have an id that is not a gold question, not scored: {_examples(unknown)}"
        if c.outside_sample:
            limit = gold.params.get("dataset.limit")
            note += (
                f"; {c.outside_sample} of them are in the dataset but outside its limit={limit} sample "
                "(score against every question with --limit none / limit=None)"
            )
        if ambiguous:
            note += f"; {ambiguous} ids are in more than one subset: add a `subset` column"
        notes.append(note)
    if duplicates:
        notes.append(f"{c.duplicate_ids} rows repeat an id already seen; the first row of each id is kept: {_examples(duplicates)}")
    if c.unparsable and with_nm:
        notes.append(f"{c.unparsable} predictions have no number (e.g. 'N/A', empty): wrong in NM")
    if no_ranking:
        notes.append(f"{no_ranking} scored rows have an empty `retrieved` list: misses in MRR/R@k")
    if c.subset_mismatch:
        notes.append(f"{c.subset_mismatch} rows name a different subset than their gold question; scored under the gold subset")
    if c.non_numeric_gold:
        notes.append(f"{c.non_numeric_gold} gold questions have no numeric answer: not counted in NM (as in a run)")
    return notes


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
    k: int = 3,
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
    rows, source = read_predictions(predictions)
    subs, columns = parse_rows(rows, source)  # bad input fails before any gold is loaded
    if gold is not None:
        g = gold_from(gold)
    else:
        cfg = config if config is not None else compose_config(
            dataset, dataset_path=dataset_path, question_splits=question_splits, limit=limit, overrides=overrides
        )
        g = load_gold(cfg)
    return score_rows(subs, columns, g, k=k, n_boot=n_boot, seed=seed, source=source)

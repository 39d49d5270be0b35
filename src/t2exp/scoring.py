"""Score any RAG system's outputs against T²-RAGBench gold answers (the Python API).

``score(predictions, dataset="bundled")`` takes a path (JSONL, JSON, CSV, parquet), a list of
dicts, a dict ``id → prediction`` or a pandas DataFrame with at least ``id`` and ``prediction``
(optional ``subset``, ``context_id``, ``retrieved``) and returns a :class:`ScoreResult`.
``python -m t2exp.score`` is the command line around it.

Gold answers come from the dataset: ``dataset`` names a ``conf/dataset/*.yaml`` option and is
composed with Hydra from the project's ``conf/`` exactly as ``python -m t2exp dataset=NAME``
composes it, so ``subsets``, ``question_splits``, ``limit`` and the sampling ``seed`` mean what
they mean for a run (``dataset=bundled`` is the seeded ``limit`` sample a default run scores).
``gold=`` takes already loaded :class:`t2exp.data.Question` records instead.

Scoring uses the app's own functions: ``question_metrics`` per gold question, then
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
numbers are read with :func:`t2exp.metrics.extract_number`. A file whose ``prediction`` is empty
in every row is a retrieval-only submission: no NM is computed (as for a run without a
generator) and the output says so.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

from t2exp.data import Question, Subset, load_subsets, read_jsonl_objects, sample_questions
from t2exp.errors import ConfigError, DataError
from t2exp.metrics import RECALL_KS, MetricValue, aggregate, extract_number, flatten_table, question_metrics

if TYPE_CHECKING:
    import pandas as pd
    from omegaconf import DictConfig

FROM_CONFIG: Literal["config"] = "config"
READERS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
Predictions = Union[str, Path, "pd.DataFrame", Sequence[Mapping[str, Any]], Mapping[str, Any]]


# --------------------------------------------------------------------------------------------
# gold


@dataclass
class Gold:
    """The gold questions to score against (ordered as the app orders its rows)."""

    questions: list[Question]
    dataset: str = "gold"
    all_ids: frozenset[tuple[str, str]] = frozenset()  # (subset, id) before a ``limit`` sample
    params: dict[str, Any] = field(default_factory=dict)


def dataset_options() -> list[str]:
    from t2exp.paths import CONF_DIR

    return sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))


def compose_config(
    dataset: str = "bundled",
    *,
    dataset_path: str | Path | None = None,
    question_splits: Sequence[str] | None = None,
    limit: int | None | Literal["config"] = FROM_CONFIG,
    overrides: Sequence[str] = (),
) -> DictConfig:
    """The app's config with ``dataset=NAME`` (Hydra compose on the project's ``conf/``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from t2exp.paths import CONF_DIR, register_resolvers

    options = dataset_options()
    if dataset not in options:
        raise ConfigError(f"dataset={dataset!r}: no conf/dataset/{dataset}.yaml; choose one of {', '.join(options)}")
    register_resolvers()
    ov = [f"dataset={dataset}", *overrides]
    try:
        if GlobalHydra.instance().is_initialized():  # inside a running Hydra app: use its search path
            cfg = compose(config_name="config", overrides=ov)
        else:
            with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR), job_name="t2exp_score"):
                cfg = compose(config_name="config", overrides=ov)
        if dataset_path is not None:
            OmegaConf.update(cfg, "dataset.path", str(dataset_path))
        if question_splits:
            OmegaConf.update(cfg, "dataset.question_splits", list(question_splits))
        if limit != FROM_CONFIG:
            OmegaConf.update(cfg, "dataset.limit", limit)
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"dataset={dataset}: cannot compose the config ({' '.join(str(exc).split())[:300]})") from None
    return cfg


def load_gold(cfg: DictConfig) -> Gold:
    """Gold questions of ``cfg.dataset`` — the same questions ``app.build_components`` loads."""
    ds = cfg.dataset
    limit = ds.get("limit")
    seed = int(cfg.get("seed", 0))
    splits = list(ds.question_splits) if ds.get("question_splits") else None
    subsets = load_subsets(
        subsets=list(ds.subsets),
        source=ds.source,
        path=ds.get("path"),
        question_splits=splits,
        limit=None,  # sampled below, exactly as load_subsets samples, so ids outside it are known
        seed=seed,
        hub_revision=ds.get("hub_revision"),
        skip_empty_questions=bool(ds.get("skip_empty_questions", True)),
    )
    all_ids = frozenset((q.subset, q.id) for s in subsets for q in s.questions)
    questions = [q for s in subsets for q in sample_questions(s.questions, limit, seed)]
    params = {
        "dataset": str(ds.get("name", "")),
        "dataset.subsets": ",".join(ds.subsets),
        "dataset.source": str(ds.source),
        "dataset.path": str(ds.get("path")),
        "dataset.question_splits": ",".join(splits or []) or "all",
        "dataset.limit": str(limit),
        "seed": seed,
    }
    params.update({f"dataset.source_files.{s.name}": ";".join(s.sources) for s in subsets})
    return Gold(questions=questions, dataset=str(ds.get("name", "")), all_ids=all_ids, params=params)


def _gold_from(gold: Iterable[Question | Subset]) -> Gold:
    questions: list[Question] = []
    for item in gold:
        if isinstance(item, Subset):
            questions.extend(item.questions)
        elif isinstance(item, Question):
            questions.append(item)
        else:
            raise DataError(f"gold=: expected t2exp.data.Question or Subset records, got {type(item).__name__}")
    if not questions:
        raise DataError("gold=: no questions")
    return Gold(questions=questions, dataset="gold", all_ids=frozenset((q.subset, q.id) for q in questions))


# --------------------------------------------------------------------------------------------
# predictions


@dataclass(frozen=True)
class Submitted:
    row: int  # 1-based line/row in the source
    id: str
    subset: str | None
    prediction: Any
    value: float | None
    retrieved: list[str] | None
    context_id: str | None


def _missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    try:
        import pandas as pd

        return v is pd.NA or v is pd.NaT
    except ImportError:  # pragma: no cover
        return False


def _text(v: Any) -> str | None:
    if _missing(v):
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    s = str(v).strip()
    return s or None


def _ranked(v: Any, where: str) -> list[str] | None:
    if _missing(v):
        return None
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return None
        try:
            v = json.loads(s)
        except json.JSONDecodeError:
            raise DataError(f"{where}: column 'retrieved' is {s[:60]!r}, not a JSON list of context ids") from None
        if v is None:
            return None
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise DataError(f"{where}: column 'retrieved' must be a list of context ids, got {type(v).__name__}")
    return [str(x) for x in v]


def _read_rows(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    if not path.exists():
        raise DataError(f"{path}: no such file")
    if path.is_dir():
        raise DataError(f"{path}: is a directory; pass a .jsonl, .json, .csv or .parquet file")
    kind = READERS.get(path.suffix.lower())
    if kind is None:
        raise DataError(f"{path}: unknown format {path.suffix or '(no suffix)'!r}; use .jsonl, .json, .csv, .tsv or .parquet")
    try:
        if kind == "jsonl":
            return read_jsonl_objects(path)
        if kind == "json":
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
            return _rows_from_object(obj, str(path))
        if kind in ("csv", "tsv"):
            df = pd.read_csv(path, dtype=str, keep_default_na=False, sep="," if kind == "csv" else "\t")
            df = df.replace({"": None})
        else:
            df = pd.read_parquet(path)
        return _frame_rows(df)
    except DataError:
        raise
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text; is it really {kind}?") from None
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes one clear line
        raise DataError(f"{path}: cannot read as {kind} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None


def _frame_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    df = df.copy()
    df.columns = [str(c) for c in df.columns]
    return df.astype(object).where(df.notna(), None).to_dict(orient="records")


def _rows_from_object(obj: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(obj, Mapping):
        return [{**v, "id": k} if isinstance(v, Mapping) else {"id": k, "prediction": v} for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        for i, r in enumerate(obj):
            if not isinstance(r, Mapping):
                raise DataError(f"{where}: item {i}: expected an object with 'id' and 'prediction', got {type(r).__name__}")
        return [dict(r) for r in obj]
    raise DataError(f"{where}: expected a list of rows or a mapping id → prediction, got {type(obj).__name__}")


def read_predictions(predictions: Predictions) -> tuple[list[dict[str, Any]], str]:
    """Rows as dicts and a label for the source."""
    if isinstance(predictions, (str, Path)):
        path = Path(predictions)
        return _read_rows(path), str(path)
    if hasattr(predictions, "to_dict") and hasattr(predictions, "columns"):
        return _frame_rows(predictions), "DataFrame"  # type: ignore[arg-type]
    kind = "dict" if isinstance(predictions, Mapping) else "list"
    return _rows_from_object(predictions, f"predictions ({kind})"), kind


def parse_rows(rows: list[dict[str, Any]], source: str) -> tuple[list[Submitted], set[str]]:
    columns: set[str] = set()
    for r in rows:
        columns.update(r)
    if not rows:
        raise DataError(f"{source}: no rows; expected at least the columns id and prediction")
    for col in ("id", "prediction"):
        if col not in columns:
            raise DataError(f"{source}: no {col!r} column (columns: {', '.join(sorted(columns))[:200]}); predictions need id and prediction")
    out = []
    for i, r in enumerate(rows, 1):
        raw = r.get("prediction")
        out.append(
            Submitted(
                row=i,
                id=_text(r.get("id")) or "",
                subset=_text(r.get("subset")),
                prediction=None if _missing(raw) else raw,
                value=None if _missing(raw) else extract_number(raw),
                retrieved=_ranked(r.get("retrieved"), f"{source}: row {i}") if "retrieved" in r else None,
                context_id=_text(r.get("context_id")),
            )
        )
    return out, columns


# --------------------------------------------------------------------------------------------
# result


@dataclass
class Counts:
    rows: int = 0  # submitted rows = scored + unknown_ids + duplicate_ids
    gold: int = 0  # gold questions
    scored: int = 0  # gold questions with a prediction
    missing: int = 0  # gold questions without one (wrong in the headline NM)
    unknown_ids: int = 0
    duplicate_ids: int = 0
    unparsable: int = 0  # scored rows whose prediction has no number
    non_numeric_gold: int = 0  # gold questions without a numeric answer (not in NM)
    outside_sample: int = 0  # unknown ids that are in the dataset but outside the ``limit`` sample
    subset_mismatch: int = 0  # scored rows whose ``subset`` differs from the gold question's

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


LABELS = {"questions": "gold", "scored": "scored", "coverage": "coverage", "nm": "NM", "nm_submitted": "NM (submitted)"}


@dataclass
class ScoreResult:
    metrics: dict[str, float]  # flat, the app's names: "<subset>/nm", "avg/mrr_at_3_ci_low", ..., plus counts
    table: dict[str, dict[str, MetricValue]]  # subset (and "avg") → metric → value
    counts: Counts
    subset_counts: dict[str, dict[str, int]]
    k: int
    retrieval: str  # "ranked" | "rank1" | "none"
    metric_names: list[str]
    notes: list[str] = field(default_factory=list)
    source: str = ""
    dataset: str = ""
    n_boot: int = 1000
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def scored(self) -> int:
        return self.counts.scored

    @property
    def missing(self) -> int:
        return self.counts.missing

    def columns(self) -> list[str]:
        return ["questions", "scored", "coverage"] + [n for n in self.metric_names if n != "coverage"]

    def label(self, name: str) -> str:
        if name in LABELS:
            return LABELS[name]
        if name.startswith("mrr_at_"):
            return f"MRR@{name[7:]}"
        if name.startswith("recall_at_"):
            return f"R@{name[10:]}"
        return name

    def _cell(self, subset: str, name: str, ci: bool = True) -> str:
        if name in ("questions", "scored"):
            return str(self.subset_counts.get(subset, {}).get(name, ""))
        mv = self.table.get(subset, {}).get(name)
        if mv is None:
            return "-"
        if ci and mv.ci_low is not None and mv.ci_high is not None and not math.isnan(mv.ci_low):
            return f"{mv.mean:.2f} [{mv.ci_low:.2f}, {mv.ci_high:.2f}]"
        return f"{mv.mean:.2f}"

    def _grid(self) -> tuple[list[str], list[list[str]]]:
        cols = self.columns()
        header = ["subset"] + [self.label(c) for c in cols]
        body = [[s] + [self._cell(s, c) for c in cols] for s in self.table]
        return header, body

    def _footer(self) -> list[str]:
        c = self.counts
        cov = 100.0 * c.scored / c.gold if c.gold else 0.0
        lines = [
            f"rows {c.rows}: scored {c.scored} of {c.gold} gold questions (coverage {cov:.1f}%), missing {c.missing}, "
            f"unknown ids {c.unknown_ids}, duplicate ids {c.duplicate_ids}, unparsable {c.unparsable}"
        ]
        if "nm" in self.metric_names:
            lines.append(
                "NM (headline) counts every gold question, a missing one as wrong; NM (submitted) is over scored "
                "questions only; avg is question-weighted over subsets"
            )
        return lines + [f"note: {n}" for n in self.notes]

    def __str__(self) -> str:
        header, body = self._grid()
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        fmt = lambda r: "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths)))  # noqa: E731
        title = (
            f"T²-RAGBench scores: {self.source} vs dataset {self.dataset} (k={self.k}; "
            + (f"95% bootstrap CI in brackets, {self.n_boot} resamples, seed {self.seed})" if self.n_boot else "no CIs)")
        )
        return "\n".join([title, fmt(header), *(fmt(r) for r in body), *self._footer()])

    def _repr_markdown_(self) -> str:
        header, body = self._grid()
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines) + "\n\n" + "  \n".join(self._footer())

    def to_frame(self) -> pd.DataFrame:
        """One row per subset (and ``avg``): counts, then each metric's mean, ci_low, ci_high."""
        import pandas as pd

        records = []
        for subset, vals in self.table.items():
            rec: dict[str, Any] = {"subset": subset, **{k: self.subset_counts.get(subset, {}).get(k) for k in ("questions", "scored")}}
            for name in ["coverage", *self.metric_names]:
                mv = vals.get(name)
                rec[name] = None if mv is None else mv.mean
                if name != "coverage":
                    rec[f"{name}_ci_low"] = None if mv is None else mv.ci_low
                    rec[f"{name}_ci_high"] = None if mv is None else mv.ci_high
            records.append(rec)
        return pd.DataFrame.from_records(records).set_index("subset")

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dataset": self.dataset,
            "k": self.k,
            "retrieval": self.retrieval,
            "bootstrap": self.n_boot,
            "seed": self.seed,
            "counts": self.counts.as_dict(),
            "table": {s: {n: asdict(v) for n, v in m.items()} for s, m in self.table.items()},
            "subset_counts": self.subset_counts,
            "metrics": self.metrics,
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------
# scoring


def _retrieval_mode(subs: list[Submitted], columns: set[str]) -> str:
    if "retrieved" in columns:
        return "ranked" if any(s.retrieved is not None for s in subs) else "none"
    if "context_id" in columns and any(s.context_id is not None for s in subs):
        return "rank1"
    return "none"




def score_rows(
    subs: list[Submitted], columns: set[str], gold: Gold, *, k: int = 3, n_boot: int = 1000, seed: int = 0, source: str = ""
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
    names = (["nm"] if with_nm else []) + ([] if retrieval == "none" else [f"mrr_at_{k}"])
    names += {"ranked": [f"recall_at_{r}" for r in RECALL_KS], "rank1": ["recall_at_1"], "none": []}[retrieval]

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
        m = question_metrics(ranked, q.context_id, k, None if s is None else s.value, q.gold)
        row: dict[str, Any] = {"subset": q.subset, **{n: m.get(n) for n in names}}
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

    metrics = flatten_table(table)
    for subset, sc in subset_counts.items():
        if subset != "avg":
            metrics[f"{subset}/questions"] = float(sc["questions"])
            metrics[f"{subset}/scored"] = float(sc["scored"])
            metrics[f"{subset}/missing"] = float(sc["missing"])
            metrics[f"{subset}/unparsable"] = float(sc["unparsable"])
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
    n_boot: int = 1000,
    seed: int = 0,
) -> ScoreResult:
    """Score predictions against T²-RAGBench gold answers.

    ``predictions``: a file path (.jsonl/.json/.csv/.tsv/.parquet), a list of row dicts, a dict
    ``id → prediction`` (or ``id → row``) or a DataFrame. Gold: ``gold=`` (Question or Subset
    records) if given, else ``config`` (an already composed app config), else the ``dataset``
    option composed with ``dataset_path``/``question_splits``/``limit``/``overrides`` applied.
    ``k`` is MRR@k's cut-off; ``n_boot`` bootstrap resamples (0 = no CIs) drawn with ``seed``
    (the app uses 1000 and seed 0).
    """
    rows, source = read_predictions(predictions)
    subs, columns = parse_rows(rows, source)  # bad input fails before any gold is loaded
    if gold is not None:
        g = _gold_from(gold)
    else:
        cfg = config if config is not None else compose_config(
            dataset, dataset_path=dataset_path, question_splits=question_splits, limit=limit, overrides=overrides
        )
        g = load_gold(cfg)
    return score_rows(subs, columns, g, k=k, n_boot=n_boot, seed=seed, source=source)


# --------------------------------------------------------------------------------------------
# MLflow


def default_artifact_location(uri: str) -> str | None:
    """Artifacts next to a sqlite tracking DB (``<db dir>/artifacts``); the server decides otherwise."""
    if uri.startswith("sqlite:///"):
        return str(Path(uri[len("sqlite:///") :]).parent / "artifacts")
    return None


def log_to_mlflow(
    result: ScoreResult, *, uri: str, experiment: str, artifact_location: str | None = None, run_name: str | None = None
) -> str:
    """Log params, metrics (the app's names plus the counts) and ``score.json`` as one run; its id."""
    from t2exp.tracking import Tracker

    name = run_name or f"score-{Path(result.source).stem or 'predictions'}"
    tracker = Tracker(uri, experiment, artifact_location or default_artifact_location(uri), name, {"t2exp.kind": "score", "t2exp.predictions": result.source})
    status = "FAILED"
    try:
        tracker.log_params(result.params)
        tracker.log_metrics(result.metrics)
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "score.json"
            p.write_text(json.dumps(result.to_dict(), indent=2, default=str), encoding="utf-8")
            tracker.log_artifact(p)
        status = "FINISHED"
    finally:
        tracker.finish(status)
    return tracker.run_id

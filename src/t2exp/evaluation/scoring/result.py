"""Scoring, render: a :class:`ScoreResult` as a text table, Markdown, a DataFrame or a dict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import MetricValue, metric_label
from t2exp.evaluation.stats import CI_SEED, N_BOOT

if TYPE_CHECKING:
    import pandas as pd


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
    degenerate_predictions: int = 0  # scored rows with a degenerate prediction (numbers.is_degenerate)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


LABELS = {"questions": "gold", "scored": "scored", "coverage": "coverage", "nm_submitted": "NM (submitted)"}


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
    # each scored question as a row of a run's predictions.jsonl (gold, answer, ranking, metric
    # values): what ``t2exp compare`` pairs and ``t2exp score --mlflow`` logs
    questions: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    dataset: str = ""
    n_boot: int = N_BOOT
    seed: int = CI_SEED
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
        return LABELS.get(name) or metric_label(name)

    def _cell(self, subset: str, name: str, ci: bool = True) -> str:
        if name in ("questions", "scored"):
            return str(self.subset_counts.get(subset, {}).get(name, ""))
        mv = self.table.get(subset, {}).get(name)
        if mv is None:
            return tabular.value(None)
        return tabular.value(mv.mean, mv.ci_low, mv.ci_high) if ci else tabular.value(mv.mean)

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
            + (f", degenerate {c.degenerate_predictions}" if "nm" in self.metric_names else "")
        ]
        if "nm" in self.metric_names:
            lines.append(
                "NM (headline) counts every gold question, a missing one as wrong; NM (submitted) is over scored "
                "questions only; avg is question-weighted over subsets"
            )
            lines.append(
                "NM-bare: the authors' bare float() reading of the answer string, a gold below 0.01 only matched by a "
                "prediction below 0.01; NM-strict: relative error < 0.01, no power-of-ten shift"
            )
        return lines + [f"note: {n}" for n in self.notes]

    def __str__(self) -> str:
        header, body = self._grid()
        title = f"T²-RAGBench scores: {self.source} vs dataset {self.dataset} (k={self.k}; " + (
            f"95% bootstrap CI in brackets, {self.n_boot} resamples, seed {self.seed})" if self.n_boot else "no CIs)"
        )
        return "\n".join([title, tabular.aligned(header, body), *self._footer()])

    def _repr_markdown_(self) -> str:
        header, body = self._grid()
        return tabular.markdown(header, body) + "\n\n" + "  \n".join(self._footer())

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

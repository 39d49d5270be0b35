"""The text a run ends with: per subset and weighted NM, MRR@k and R@1/3/5 with their 95 %
bootstrap CIs and n, then where the run, its predictions and the MLflow UI are."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import metric_label, question_metric_names
from t2exp.evaluation.reporting.render import experiment_link, run_link
from t2exp.infra.redaction import redact_text


def _cell(v: Mapping[str, Any] | None) -> str:
    return tabular.value(None) if v is None else tabular.value(v["mean"], v.get("ci_low"), v.get("ci_high"))


def _rows(table: Mapping[str, Mapping[str, Mapping[str, Any]]], k: int) -> list[list[str]]:
    """Header + one row per subset (+ ``avg``); a metric no row has (NM of a retrieval-only run) is left out."""
    shown = [n for n in question_metric_names(k) if n not in ("nm_bare", "nm_strict")]  # the headline NM reading
    names = [n for n in shown if any(n in v for v in table.values())]
    rows = [["subset", *(metric_label(n) for n in names), "n"]]
    for subset, vals in table.items():
        n = max((int(v["n"]) for v in vals.values()), default=0)
        rows.append([subset, *(_cell(vals.get(name)) for name in names), str(n)])
    return rows


NOTE = "values in %, 95 % bootstrap CI in brackets; n = questions scored (NM skips non-numeric golds); avg = question-weighted"


def results_markdown(table: Mapping[str, Mapping[str, Mapping[str, Any]]], k: int) -> str:
    head, *rows = _rows(table, k)
    return "\n".join([tabular.markdown(head, rows), "", NOTE])


def results_table(table: Mapping[str, Mapping[str, Mapping[str, Any]]], k: int) -> str:
    """The run's results as aligned text for the terminal."""
    head, *rows = _rows(table, k)
    return "\n".join([tabular.aligned(head, rows), NOTE])


def ui_command(uri: str) -> str:
    """The ``mlflow ui`` command that opens the store a run was logged to."""
    if uri.startswith(("http://", "https://", "databricks")):
        return f"open {uri}"
    return f"mlflow ui --backend-store-uri {uri}"


def ui_line(uri: str, experiment_id: str) -> str:
    """Where to look: the experiment's page in the MLflow UI's runs view (its address on the
    tracking server, or on what ``mlflow ui`` serves by default over a local store); a password in
    the URI is not printed."""
    page = experiment_link(experiment_id)
    if uri.startswith(("http://", "https://")):
        line = f"inspect: open {uri.rstrip('/')}/{page}"
    elif uri.startswith("databricks"):
        line = f"inspect: {ui_command(uri)}"
    else:
        line = f"inspect: {ui_command(uri)}, then http://127.0.0.1:5000/{page}"
    return redact_text(line)


def run_footer(run_id: str, experiment: str, experiment_id: str, uri: str, predictions: Path) -> str:
    return "\n".join(
        [
            f"MLflow run {run_id} in experiment '{experiment}' ({run_link(experiment_id, run_id)})",
            ui_line(uri, experiment_id),
            f"predictions: {predictions} (artifact predictions.jsonl of the run)",
        ]
    )

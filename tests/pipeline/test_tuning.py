"""hydra/sweeper=held_out_optuna (t2exp.pipeline.tuning): trials on the tuning folds, the best trial once more
on the held-out fold, the outcome on the parent run, and the report's tuned-on vs reported-on
table. A real `python -m t2exp -m` on a small local corpus (MiniLM embeddings). Its old name,
hydra/sweeper=optuna (the plugin's own), selects the same tuner, with one warning."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.app import run_app
from helpers.tracking import mlflow_runs

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")

WORDS = ["revenue", "margin", "cash", "debt", "lease", "tax", "goodwill", "inventory"]


def _data(tmp_path):
    rows = []
    for d, word in enumerate(WORDS):
        text = f"The {word} of company number {d} grew. Table: {word} | 2019 | {100 + d} | 2018 | {90 + d}"
        for j in range(3):
            rows.append(
                {
                    "id": f"q{d}_{j}",
                    "context_id": f"c{d}",
                    "split": "dev",
                    "question": f"What was the {word} in 201{8 + j % 2}?",
                    "program_answer": str(100 + d),
                    "original_answer": str(100 + d),
                    "context": text,
                    "company_name": f"Company {d}",
                    "report_year": "2019",
                }
            )
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame(rows).to_parquet(data / "FinQA_dev.parquet")
    return data


@pytest.mark.slow
def test_optuna_tunes_on_tune_folds_and_reports_on_the_held_out_fold(shared_cache, tmp_path):
    data = _data(tmp_path)
    proc = run_app(
        [
            "-m",
            "hydra/sweeper=held_out_optuna",
            "dataset=finqa",
            f"dataset.path={data}",
            "dataset.limit=null",
            "generator=none",
            "dataset.folds=3",
            "dataset.fold=1",
            "rag_method.alpha=interval(0,1)",
            "hydra.sweeper.n_trials=3",
            "hydra.sweeper.sampler.seed=0",
        ],
        shared_cache,
        tmp_path,
    )
    assert OLD_NAME_WARNING not in proc.stdout + proc.stderr  # the current name: no warning
    client, runs = mlflow_runs(tmp_path)
    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    tune = [r for r in children if r.data.params["dataset.fold_role"] == "tune"]
    (held,) = [r for r in children if r.data.params["dataset.fold_role"] == "eval"]
    assert len(tune) == 3
    best = max(tune, key=lambda r: r.data.metrics["avg/mrr_at_3"])
    assert held.data.params["rag_method.alpha"] == best.data.params["rag_method.alpha"]
    p, m = parent.data.params, parent.data.metrics
    assert float(p["tune.best.rag_method.alpha"]) == pytest.approx(float(best.data.params["rag_method.alpha"]))
    assert p["tune.objective"] == "avg/mrr_at_3" and p["tune.trials"] == "3"
    assert m["tune/tune_score"] == pytest.approx(best.data.metrics["avg/mrr_at_3"], abs=1e-4)
    assert m["tune/eval_score"] == pytest.approx(held.data.metrics["avg/mrr_at_3"], abs=1e-4)
    assert parent.data.tags["t2exp.tuned_on"] == "folds != 1 of 3 (fold_seed 0)"
    assert parent.data.tags["t2exp.reported_on"] == "fold 1 of 3 (fold_seed 0)"
    # the held-out questions are none of the tuning questions; together they are all 24
    ids = {}
    for r in (best, held):
        path = client.download_artifacts(r.info.run_id, "predictions.jsonl", str(tmp_path / r.info.run_id))
        ids[r.info.run_id] = {json.loads(line)["id"] for line in open(path, encoding="utf-8")}
    assert not ids[best.info.run_id] & ids[held.info.run_id]
    assert len(ids[best.info.run_id] | ids[held.info.run_id]) == 24
    # the sweep's report puts the pair side by side
    report = client.download_artifacts(parent.info.run_id, "report/tuning.md", str(tmp_path / "report"))
    text = open(report, encoding="utf-8").read()
    assert "folds != 1 of 3" in text and "fold 1 of 3" in text and best.data.params["rag_method.alpha"][:6] in text


@pytest.mark.parametrize("name", ["held_out_optuna", "optuna"])
def test_optuna_without_folds_is_one_line(tmp_path, name):
    proc = run_app(
        ["-m", f"hydra/sweeper={name}", "generator=none", "rag_method.alpha=interval(0,1)"], tmp_path / "cache", tmp_path, check=False
    )
    assert proc.returncode == 2
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert "dataset.folds=None is invalid for hydra/sweeper=held_out_optuna" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "multirun").exists()


OLD_NAME_WARNING = "hydra/sweeper=optuna is the old name of hydra/sweeper=held_out_optuna"


def test_the_old_name_runs_the_same_tuner_and_says_its_name_once(shared_cache, tmp_path):
    """Configs and commands written for ``hydra/sweeper=optuna`` keep working: the same tuner (its
    ``held_out`` key, its parent-run outcome), with one warning naming ``held_out_optuna`` (the
    current name gives none: the test above)."""
    proc = run_app(
        [
            "-m",
            "hydra/sweeper=optuna",
            "hydra.sweeper.held_out=false",
            "hydra.sweeper.n_trials=1",
            "hydra.sweeper.sampler.seed=0",
            "generator=none",
            "dataset=finqa",
            "dataset.limit=1",
            "rag_method.bm25.k1=interval(1,3)",  # a sparse parameter: the tuner is the subject, not the vectors
        ],
        shared_cache,
        tmp_path,
    )
    assert (proc.stdout + proc.stderr).count(OLD_NAME_WARNING) == 1
    _, runs = mlflow_runs(tmp_path)
    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    assert parent.data.params["tune.trials"] == "1" and parent.data.tags["t2exp.sweep_kind"] == "tune"

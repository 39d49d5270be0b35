"""Run names that tell runs apart: a sweep's cells carry every key they differ in from the moment
their runs are opened, and a cell run again in the same experiment says it is a re-run."""

from __future__ import annotations

import re

from helpers.app import run_app
from helpers.tracking import mlflow_runs

RETRIEVAL = ["generator=none", "dataset=finqa", "dataset.limit=2"]


def _cell_names(tracking_dir) -> list[tuple[str, str]]:
    """``(parent run id, name)`` of every cell run, oldest first."""
    _, runs = mlflow_runs(tracking_dir)
    return [(r.data.tags.get("mlflow.parentRunId", ""), r.info.run_name) for r in runs if "t2exp.cell_key" in r.data.tags]


def test_cells_that_differ_only_in_protocol_are_named_apart_from_the_start_and_a_re_run_says_so(shared_cache, tmp_path):
    """The line a cell's run opens with and its `cell done` line name its protocol, as does its
    run at the sweep's end. The same sweep run again names each cell a re-run, also after the
    sweep's end has named its cells."""
    proc = run_app(["-m", "protocol=t2exp,paper", *RETRIEVAL], shared_cache, tmp_path)
    out = proc.stdout + proc.stderr
    opened = re.findall(r"MLflow run [0-9a-f]{32} \((.+?)\) in ", out)
    assert opened == ["bm25f · minilm · k=3 · protocol=t2exp", "bm25f · minilm · k=3 · protocol=paper"], out[-3000:]
    assert re.findall(r"cell done: (.+?): MRR@3", out) == opened
    assert sorted(name for _, name in _cell_names(tmp_path)) == sorted(opened)

    proc = run_app(["-m", "protocol=t2exp,paper", *RETRIEVAL], shared_cache, tmp_path)
    assert re.findall(r"MLflow run [0-9a-f]{32} \((.+?)\) in ", proc.stdout + proc.stderr) == [f"{n} (re-run 1)" for n in opened]
    names = _cell_names(tmp_path)
    second = names[-1][0]
    assert sorted(n for p, n in names if p == second) == sorted(f"{n} (re-run 1)" for n in opened)


def test_a_sweep_over_the_keys_every_name_shows_keeps_its_plain_names(shared_cache, tmp_path):
    proc = run_app(["-m", "rag_method=base,bm25f", *RETRIEVAL], shared_cache, tmp_path)
    opened = re.findall(r"MLflow run [0-9a-f]{32} \((.+?)\) in ", proc.stdout + proc.stderr)
    assert opened == ["base · minilm · k=3", "bm25f · minilm · k=3"]
    assert sorted(name for _, name in _cell_names(tmp_path)) == opened

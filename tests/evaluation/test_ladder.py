"""The report's ablation ladder and tuned-on vs reported-on tables on synthetic runs with known
per-question values; every +experiment=beyond cell composes and passes the config check."""

from __future__ import annotations

import pytest

from helpers.app import compose_cfg
from t2exp import config
from t2exp.evaluation.reporting.ladder import build_ladder, render_ladder
from t2exp.evaluation.reporting.runs import RunInfo
from t2exp.evaluation.reporting.tables import CellSource
from t2exp.evaluation.reporting.tuning import build_tuning, render_tuning


def _run(run_id: str, rung: str, role: str, values: list[float]) -> tuple[RunInfo, list[dict]]:
    rows = [{"id": f"q{i}", "subset": "FinQA", "mrr_at_3": v} for i, v in enumerate(values)]
    mean = 100 * sum(values) / len(values)
    metrics = {"FinQA/mrr_at_3": mean, "avg/mrr_at_3": mean, "avg/recall_at_3": mean}
    params = {"dataset.fold_role": role, "dataset.folds": "5", "dataset.fold": "0", "dataset.fold_seed": "0", "rag_method.name": rung}
    return RunInfo(run_id, rung, params, metrics, {"rung": rung, "dataset.fold_role": role}), rows


def test_ladder_rows_deltas_and_tuning_pairs():
    specs = [
        ("a", "l0_x", "eval", [0, 0, 1, 1]),
        ("b", "l1_y", "eval", [1, 0, 1, 1]),
        ("c", "l2_z", "eval", [1, 1, 1, 1]),
        ("d", "alt_base", "eval", [0, 1, 1, 0]),
        ("e", "l1_y", "tune", [1, 1, 0, 1, 1, 1]),
    ]
    built = {rid: _run(rid, rung, role, vals) for rid, rung, role, vals in specs}
    runs = [r for r, _ in built.values()]
    source = CellSource(lambda run_id: built[run_id][1])
    lad = build_ladder(runs, ["FinQA"], 3, source, n_boot=200, seed=0)
    assert lad is not None
    assert [r.run_id for r in lad.runs] == ["a", "b", "c", "d"]  # the chain in order, then alt_*; tune runs are not rows
    assert lad.against == {"b": "a", "c": "b", "d": "c"}  # each rung vs the one before; alt_* vs the full method
    assert lad.deltas["b"].diff == pytest.approx(25.0) and lad.deltas["c"].diff == pytest.approx(25.0)
    assert lad.deltas["d"].diff == pytest.approx(-50.0) and lad.deltas["d"].n == 4
    assert 0 < lad.deltas["b"].p <= 1
    md = render_ladder(lad)
    assert "| l1_y | fold 0 of 5 (fold_seed 0) | 75.0" in md and "+25.0" in md and "| alt_base |" in md
    tuning = build_tuning(runs, ["FinQA"], "mrr_at_3", source)
    assert tuning is not None and [(p.tune.run_id, p.eval.run_id) for p in tuning.pairs] == [("e", "b")]
    text = render_tuning(tuning)
    assert "folds != 0 of 5 (fold_seed 0)" in text and "83.3" in text and "-8.3" in text
    # label columns left, numbers right: the ladder's rung, questions and "vs"; the tuning table's
    # keys, "tuned on" and "reported on" (one FinQA column and Avg per side)
    rule = next(ln for ln in md.splitlines() if ln.startswith("|---"))
    assert rule.strip("|").split("|") == ["---", "---"] + ["---:"] * (len(lad.columns) + 1) + ["---"]
    rule = next(ln for ln in text.splitlines() if ln.startswith("|---"))
    keys = len(tuning.keys)
    assert rule.strip("|").split("|") == ["---"] * (keys + 1) + ["---:"] * 2 + ["---"] + ["---:"] * 3


def test_every_beyond_cell_composes_and_passes_the_check():
    rungs = [
        "l0_paper_hybrid",
        "l1_numeric_tokens",
        "l2_fields",
        "l3_passages",
        "l4_priors",
        "l5_fusion",
        "alt_bm25_company_year",
        "alt_company_filter",
    ]
    names = set()
    for rung in rungs:
        cfg = compose_cfg("+experiment=beyond", f"+rung={rung}", "dataset.fold_role=eval")
        config.check(cfg)
        names.add((cfg.rag_method.name, cfg.rag_method.lexical, cfg.document.variant))
        assert cfg.dataset.folds == 5 and cfg.dataset.fold == 0 and cfg.generator.name == "none"
    assert ("metadata_hybrid", "fielded", "metadata_prefix") in names and ("bm25", "rank_bm25", "company_year") in names

"""Every comparison of runs is one engine's (t2exp.evaluation.paired.compare_pairs) seen another
way: the report's Δ column, its all-pairs table and its ladder hold, digit for digit, what
``t2exp compare`` gives for the same two runs, and their Holm p-values are stats.holm over the
pairs each table compares."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from t2exp.evaluation import compare
from t2exp.evaluation.paired import OVERALL, compare_pairs
from t2exp.evaluation.reporting.build import make_report
from t2exp.evaluation.reporting.runs import RunInfo, Target
from t2exp.evaluation.reporting.tables import CellSource
from t2exp.evaluation.stats import holm

N_BOOT = 50
# MRR@3 per question (FinQA q0..q5, TAT-DQA q0..q5) of four runs of one ladder
VALUES = {
    "a" * 32: ("l0_base", [0, 0, 1, 0.5, 1, 0, 0, 1, 0.5, 0, 1, 0]),
    "b" * 32: ("l1_hybrid", [1, 0, 1, 1, 1, 0, 0.5, 1, 1, 0, 1, 1]),
    "c" * 32: ("l2_fusion", [1, 1, 1, 1, 1, 0.5, 1, 1, 1, 1, 1, 1]),
    "d" * 32: ("alt_bm25", [1, 0, 0.5, 1, 0, 0, 1, 1, 0.5, 0, 1, 0]),
}


def _sweep(tmp_path: Path) -> tuple[list[RunInfo], dict[str, list[dict]], dict[str, str]]:
    """The runs (their logged means), their prediction rows, and each one's predictions file."""
    runs, rows, files = [], {}, {}
    for run_id, (rung, values) in VALUES.items():
        rows[run_id] = [
            {"id": f"q{i % 6}", "subset": "FinQA" if i < 6 else "TAT-DQA", "context_id": "g", "mrr_at_3": v, "nm": None}
            for i, v in enumerate(values)
        ]
        files[run_id] = str(tmp_path / f"{rung}.jsonl")
        Path(files[run_id]).write_text("".join(json.dumps(r) + "\n" for r in rows[run_id]), encoding="utf-8")
        mean = 100 * sum(values) / len(values)
        metrics = {f"{s}/mrr_at_3": mean for s in ("FinQA", "TAT-DQA", "avg")} | {"avg/recall_at_3": mean}
        runs.append(RunInfo(run_id, rung, {"rag_method.name": rung}, metrics, {"rung": rung}))
    return runs, rows, files


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_report_delta_pairs_and_ladder_are_what_compare_gives_for_the_two_runs(tmp_path):
    runs, rows, files = _sweep(tmp_path)
    out = tmp_path / "report"
    make_report(Target("test", "7", "p" * 32, runs), out, CellSource(rows.get), n_boot=N_BOOT, baseline="rung=l0_base", pairs=True)

    def overall(a: str, b: str) -> tuple[str, ...]:
        r = compare(files[a], files[b], "mrr_at_3", n_boot=N_BOOT).rows[-1]
        assert r.subset == OVERALL
        return repr(r.diff), repr(r.ci_low), repr(r.ci_high), repr(r.p_value), str(r.n)

    base = "a" * 32
    table = {r["run_id"]: r for r in _csv(out / "table3.csv")}
    others = [rid for rid in table if rid != base]
    for rid in others:
        row = table[rid]
        assert (row["delta_vs_baseline"], row["delta_ci_low"], row["delta_ci_high"], row["delta_p"], row["delta_n"]) == overall(rid, base)
    raw = [float(table[rid]["delta_p"]) for rid in others]
    assert [float(table[rid]["delta_p_holm"]) for rid in others] == holm(raw) and {table[rid]["holm_m"] for rid in others} == {"3"}

    pairs = _csv(out / "pairs.csv")
    assert len(pairs) == 6 and {p["holm_m"] for p in pairs} == {"6"}
    for p in pairs:
        assert (p["delta"], p["delta_ci_low"], p["delta_ci_high"], p["p"], p["n"]) == overall(p["run_id_a"], p["run_id_b"])
    assert [float(p["p_holm"]) for p in pairs] == holm([float(p["p"]) for p in pairs])

    ladder = {r["run_id"]: r for r in _csv(out / "ladder.csv")}
    for rid, ref in {"b" * 32: "a" * 32, "c" * 32: "b" * 32, "d" * 32: "c" * 32}.items():
        row = ladder[rid]
        assert (row["delta"], row["delta_ci_low"], row["delta_ci_high"], row["delta_p"], row["delta_n"]) == overall(rid, ref)


def test_a_pair_is_refused_with_its_reason_and_left_out_of_the_correction():
    one = [{"id": "1", "subset": "FinQA", "mrr_at_3": 1.0}, {"id": "2", "subset": "FinQA", "mrr_at_3": 0.0}]
    other = [{"id": "1", "subset": "FinQA", "mrr_at_3": 0.0}, {"id": "3", "subset": "FinQA", "mrr_at_3": 1.0}]
    rows = {"a": one, "b": other, "c": [{**r, "mrr_at_3": None} for r in one], "none": None}
    asked = [("a", "b"), ("a", "c"), ("a", "none"), ("b", "a")]
    shared = compare_pairs(rows.get, asked, "mrr_at_3", same_questions=True, n_boot=N_BOOT)
    assert shared.m == 0 and [why[:16] for *_, why in shared.refused] == [
        "other questions",
        "no question has ",
        "no predictions",
        "other questions",
    ]
    dropped = compare_pairs(rows.get, asked, "mrr_at_3", n_boot=N_BOOT)  # questions in one run only are dropped
    assert [(c.a, c.b, c.paired.n, c.paired.only_a) for c in dropped.pairs] == [("a", "b", 1, 1), ("b", "a", 1, 1)]
    first = dropped.pairs[0]  # its mirror image has the same p: Holm over the two doubles it
    assert first.p_holm == pytest.approx({r.subset: min(1.0, 2 * r.p_value) for r in first.rows})

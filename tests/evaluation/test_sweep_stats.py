"""The statistics of a sweep's report, on hand-made inputs: Holm–Bonferroni, the rows compared
with a named baseline, NM by where the gold document ranked, the per-question differences of two
runs and which questions a run traces."""

from __future__ import annotations

import itertools
import random

import pytest

from t2exp.evaluation.questions import question_differences
from t2exp.evaluation.reporting.ranks import rank_breakdown
from t2exp.evaluation.reporting.runs import ReportError, RunInfo
from t2exp.evaluation.reporting.tables import select_baseline
from t2exp.evaluation.stats import holm, holm_header
from t2exp.tracking.inspection import traced_rows


def test_holm_by_hand():
    # sorted 0.01 < 0.03 < 0.04: 3 x 0.01 = 0.03; 2 x 0.03 = 0.06; 1 x 0.04 = 0.04 -> running max 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # capped at 1; a single test is left as it is; none is none
    assert holm([0.2, 0.6, 0.5]) == pytest.approx([0.6, 1.0, 1.0])
    assert holm([0.04]) == [0.04] and holm([]) == []
    assert holm_header(7) == "p (Holm, m=7)"


def test_holm_ties_get_one_value_whatever_their_order():
    # 0.02 twice (m = 3): 3 x 0.01 = 0.03, then both ties 2 x 0.02 = 0.04 (the second: max(0.04, 1 x 0.02))
    assert holm([0.02, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])


def test_holm_is_monotone_between_raw_and_bonferroni_and_order_free():
    rng = random.Random(0)
    for _ in range(200):
        ps = [rng.choice([rng.random(), 0.05, 0.01]) for _ in range(rng.randint(1, 9))]
        adj = holm(ps)
        m = len(ps)
        for p, a in zip(ps, adj, strict=True):
            assert p <= a <= min(1.0, m * p) + 1e-12  # never below the raw p, never above Bonferroni
        for (p1, a1), (p2, a2) in itertools.combinations(zip(ps, adj, strict=True), 2):
            if p1 <= p2:
                assert a1 <= a2 + 1e-12  # the order of the raw p-values is kept (ties: equal)
        perm = list(range(m))
        rng.shuffle(perm)
        assert holm([ps[i] for i in perm]) == pytest.approx([adj[i] for i in perm])


@pytest.mark.parametrize("bad", [[0.5, float("nan")], [1.2], [-0.1]])
def test_holm_refuses_what_is_not_a_p_value(bad):
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm(bad)


def _row(qid: str, subset: str, retrieved: list[str], nm: float | None, gold: str = "g") -> dict:
    return {"id": qid, "subset": subset, "context_id": gold, "retrieved": retrieved, "nm": nm, "question": f"q {qid}"}


def test_rank_breakdown_by_hand():
    rows = [
        _row("1", "FinQA", ["g", "x", "y"], 1.0),  # rank 1
        _row("2", "FinQA", ["g", "x", "y"], 0.0),  # rank 1
        _row("3", "FinQA", ["x", "g", "y"], 1.0),  # rank 2
        _row("4", "FinQA", ["x", "y", "z", "g"], 1.0),  # rank 4: not in the top 3
        _row("5", "TAT-DQA", ["x", "y", "g"], 0.0),  # rank 3
        _row("6", "TAT-DQA", ["x", "y", "z"], 0.0),  # not retrieved
        _row("7", "TAT-DQA", ["g"], None),  # no numeric gold: no NM value, left out
        _row("6", "TAT-DQA", ["x", "y", "z"], 1.0),  # a resumed run's repeat of 6: the first row wins (as in t2exp score)
        {"id": "8", "subset": "FinQA", "context_id": "g", "retrieved": None, "nm": 1.0},  # no ranking: left out
    ]
    got = rank_breakdown(rows, k=3, n_boot=50)
    fin, tat, avg = got["FinQA"], got["TAT-DQA"], got["avg"]
    assert (fin["rank_1"].mean, fin["rank_1"].n) == (50.0, 2)
    assert (fin["ranks_2_k"].mean, fin["ranks_2_k"].n) == (100.0, 1)
    assert (fin["not_retrieved"].mean, fin["not_retrieved"].n) == (100.0, 1)
    assert (fin["all"].mean, fin["all"].n) == (75.0, 4)
    assert "rank_1" not in tat and (tat["ranks_2_k"].mean, tat["not_retrieved"].mean, tat["all"].n) == (0.0, 0.0, 2)
    assert (avg["rank_1"].n, avg["ranks_2_k"].n, avg["not_retrieved"].n) == (2, 2, 2)
    assert (avg["ranks_2_k"].mean, avg["not_retrieved"].mean) == (50.0, 50.0) and avg["all"].mean == pytest.approx(300 / 6)
    assert avg["all"].ci_low is not None and avg["all"].ci_low <= avg["all"].mean <= avg["all"].ci_high
    # k=1: the gold at rank 2 or 3 is not in the top 1
    assert rank_breakdown(rows, k=1, n_boot=10)["FinQA"]["not_retrieved"].n == 2
    assert rank_breakdown([{**r, "nm": None} for r in rows], k=3) == {}  # retrieval only: nothing to split


def _run(run_id: str, method: str, k: str = "3") -> RunInfo:
    return RunInfo(run_id, f"{method} · minilm · k={k}", {"rag_method.name": method, "k": k}, {}, {"rag_method": method})


def test_baseline_by_run_id_prefix_or_overrides():
    runs = [_run("a" * 32, "base"), _run("ab" + "c" * 30, "hybrid"), _run("d" * 32, "hybrid", k="5")]
    assert select_baseline(runs, "rag_method=base").run_id == "a" * 32
    assert select_baseline(runs, "+rag_method=hybrid k=5").run_id == "d" * 32
    assert select_baseline(runs, "abcccc").run_id == runs[1].run_id
    for spec, what in [("rag_method=hybrid", "2 runs"), ("rag_method=bm25", "no run"), ("aaa", "no run")]:
        with pytest.raises(ReportError, match=rf"^--baseline '{spec}': {what} of the report match"):
            select_baseline(runs, spec)


def test_question_differences_lists_changed_and_unmatched_questions():
    a = [_row("1", "FinQA", ["g"], 1.0), _row("2", "FinQA", ["x", "g"], 0.0), _row("3", "FinQA", ["g"], 1.0)]
    b = [_row("1", "FinQA", ["g"], 1.0), _row("2", "FinQA", ["g"], 1.0), _row("4", "TAT-DQA", ["g"], 0.0)]
    diffs = question_differences(a, b, "mrr_at_3")
    assert [(d.subset, d.id, d.a, d.b, d.diff, d.in_a, d.in_b) for d in diffs] == [
        ("FinQA", "2", 0.5, 1.0, -0.5, True, True),
        ("FinQA", "3", 1.0, None, None, True, False),
        ("TAT-DQA", "4", None, 1.0, None, False, True),
    ]
    assert len(question_differences(a, b, "mrr_at_3", changed_only=False)) == 4


def test_traced_questions_are_a_function_of_the_question_ids():
    rows = [_row(str(i), "FinQA" if i % 2 else "TAT-DQA", ["g"], 1.0) for i in range(40)]
    shuffled = rows[::-1] + [rows[3]]  # another order, and a resumed run's repeated row
    ids = [(r["subset"], r["id"]) for r in traced_rows(rows, limit=15)]
    assert ids == [(r["subset"], r["id"]) for r in traced_rows(shuffled, limit=15)]
    assert len(ids) == 15 == len(set(ids)) and ids == sorted(ids)
    assert len(traced_rows(shuffled)) == 40  # no limit: every question once


def test_the_report_writes_the_rank_breakdown_of_runs_with_nm(tmp_path):
    """make_report on two hand-made runs (logged metrics and predictions rows): ranks.md|csv hold
    each run's NM by gold rank as rank_breakdown computes it, and the description links each run."""
    import csv

    from t2exp.evaluation.reporting.build import make_report
    from t2exp.evaluation.reporting.runs import Target
    from t2exp.evaluation.reporting.tables import CellSource

    preds = {
        "a" * 32: [_row("1", "FinQA", ["g"], 1.0), _row("2", "FinQA", ["x", "g"], 0.0), _row("3", "FinQA", ["x", "y", "z"], 0.0)],
        "b" * 32: [_row("1", "FinQA", ["g"], 1.0), _row("2", "FinQA", ["g"], 1.0), _row("3", "FinQA", ["x", "g"], 1.0)],
    }
    runs = [_run("a" * 32, "base"), _run("b" * 32, "hybrid")]
    for r in runs:
        nm = 100 * sum(p["nm"] for p in preds[r.run_id]) / 3
        r.metrics = {"FinQA/nm": nm, "avg/nm": nm, "FinQA/mrr_at_3": 50.0, "avg/mrr_at_3": 50.0}
    result = make_report(Target("test", "7", "c" * 32, runs), tmp_path, CellSource(preds.get), n_boot=20)
    rows = {(r["run_id"], r["subset"]): r for r in csv.DictReader(open(tmp_path / "ranks.csv", encoding="utf-8"))}
    a = rows[("a" * 32, "FinQA")]
    assert (a["nm_rank_1"], a["n_rank_1"], a["nm_ranks_2_k"], a["nm_not_retrieved"], a["n_all"]) == ("100.0", "1", "0.0", "0.0", "3")
    b = rows[("b" * 32, "avg")]
    assert (b["n_rank_1"], b["n_ranks_2_k"], b["n_not_retrieved"], b["nm_all"]) == ("2", "1", "0", "100.0")
    md = (tmp_path / "ranks.md").read_text(encoding="utf-8")
    assert "| RAG method | Subset | NM, gold at rank 1 | NM, gold at ranks 2–3 | NM, gold not in top 3 | NM, all |" in md
    assert tmp_path / "ranks.csv" in result.files and "## NM by where the gold document ranked" in (tmp_path / "report.md").read_text()
    assert "[base · minilm · k=3](#/experiments/7/runs/" + "a" * 32 + ")" in result.description


def test_the_description_links_each_cell_to_its_questions_next_to_the_baseline(tmp_path):
    """The parent's description: beside each row's Δ, a link to MLflow's trace comparison of that
    cell with the baseline, question by question (issue 43: the questions in one click from the
    parent run); none on the baseline's own row."""
    from t2exp.evaluation.reporting.build import make_report
    from t2exp.evaluation.reporting.runs import Target
    from t2exp.evaluation.reporting.tables import CellSource

    preds = {
        "a" * 32: [_row("1", "FinQA", ["x", "g"], 0.0), _row("2", "FinQA", ["g"], 1.0)],
        "b" * 32: [_row("1", "FinQA", ["g"], 1.0), _row("2", "FinQA", ["g"], 1.0)],
    }
    runs = [_run("a" * 32, "base"), _run("b" * 32, "hybrid")]
    for r, nm in zip(runs, (50.0, 100.0), strict=True):
        r.metrics = {"FinQA/nm": nm, "avg/nm": nm, "FinQA/mrr_at_3": nm, "avg/mrr_at_3": nm}
    result = make_report(Target("test", "7", "c" * 32, runs), tmp_path, CellSource(preds.get), n_boot=20)
    lines = result.description.splitlines()
    base_row = next(x for x in lines if x.startswith("| [base"))
    best_row = next(x for x in lines if x.startswith("| [hybrid"))
    assert base_row.endswith(f"| [vs best](#/experiments/7/evaluation-runs/{'a' * 32}/traces?compareToRunUuid={'b' * 32}) |")
    assert "evaluation-runs" not in best_row and "| Questions |" in result.description
    # the first line, what MLflow shows of a collapsed description: the row against the best, the
    # metric per subset of both (which is higher, without "Show more"), the Δ with CI, p and
    # Holm's p, and the same link
    first = lines[0]
    assert first.startswith("**base · minilm · k=3** vs best **hybrid · minilm · k=3**: NM FinQA 50.0 vs 100.0; Δ Avg -50.0 [")
    assert ", Holm p=" in first
    link = f"(#/experiments/7/evaluation-runs/{'a' * 32}/traces?compareToRunUuid={'b' * 32})"
    assert first.endswith(f"[its questions next to the best's]{link}")

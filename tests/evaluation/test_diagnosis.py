"""Error categories of scored answers (``t2exp report --errors``)."""

from __future__ import annotations

import json

import pytest

from t2exp.cli.report import main
from t2exp.evaluation.diagnosis import CATEGORIES, breakdown, category, render


def row(pred, gold, **kw):
    from t2exp.text.numbers import number_match

    return {"id": f"q{pred}-{gold}", "subset": "FinQA", "prediction": pred, "gold": gold, "nm": float(number_match(pred, gold)), **kw}


@pytest.mark.parametrize(
    "r, expected",
    [
        (row(3.35, 0.0335), "correct"),
        (row(None, 5.0), "no_number"),
        (row(0.0000001, 5.0, degenerate=1), "runaway"),
        (row(7.0, 5.0, finish_reason="length"), "runaway"),
        (row(10.0, 10.3125, program="10"), "near_miss"),
        (row(137.81, 0.3781, program="137.81"), "growth_vs_level"),
        (row(62.19, 0.3781), "growth_vs_level"),
        (row(4.0, 0.25, program="100 / 25"), "inverted"),
        (row(7.0, 5.0, program="3 + 4", grounded=False), "ungrounded"),
        (row(7.0, 5.0, program="7", grounded=True), "wrong_lookup"),
        (row(7.0, 5.0, program="3 + 4", grounded=True), "wrong_operation"),
        (row(7.0, 5.0), "wrong_value"),
        (row(None, 5.0, context_id="a", retrieved=["b", "c", "a"], n_contexts=2), "not_retrieved"),
        (row(None, 5.0, context_id="a", retrieved=["b", "a"], n_contexts=2), "no_number"),
        (row(5.0, 5.0, context_id="a", retrieved=["b"], n_contexts=1), "correct"),
        (row(None, 5.0, context_id="a", retrieved=[], n_contexts=0), "no_number"),
    ],
)
def test_categories(r, expected):
    assert category(r) == expected


def test_breakdown_counts_scored_questions_per_subset(tmp_path, capsys):
    rows = [
        row(3.35, 0.0335),
        row(None, 5.0),
        {**row(7.0, 5.0), "subset": "TAT-DQA"},
        {"id": "q-tat", "subset": "TAT-DQA", "prediction": 1.0, "gold": None, "nm": None},
    ]
    counts = breakdown(rows)
    assert counts["FinQA"] == {"correct": 1, "no_number": 1} and counts["TAT-DQA"] == {"wrong_value": 1}
    assert sum(counts["all"].values()) == 3
    text = render(counts)
    assert text.splitlines()[2].startswith("| category | FinQA n | FinQA % | TAT-DQA n")
    assert "| correct | 1 | 50.0 | 0 | 0.0 | 1 | 33.3 |" in text
    assert len([ln for ln in text.splitlines() if ln.startswith("| ") and ln.split(" | ")[0][2:] in CATEGORIES]) == len(CATEGORIES)
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["--errors", str(path), "--tracking-uri", f"sqlite:///{tmp_path / 'db.sqlite'}"]) == 0
    assert "| no_number | 1 | 50.0 |" in capsys.readouterr().out


def test_errors_of_a_retrieval_only_run_is_one_line(tmp_path, capsys):
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps({"id": "q1", "subset": "FinQA", "nm": None}) + "\n")
    assert main(["--errors", str(path), "--tracking-uri", f"sqlite:///{tmp_path / 'db.sqlite'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("t2exp report: error: --errors") and "no scored answers" in err and "\n" not in err

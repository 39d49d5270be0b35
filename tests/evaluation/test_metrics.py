import math

import pytest

from t2exp.evaluation.metrics import (
    aggregate,
    bootstrap_ci,
    question_metrics,
    question_value,
    recall_at,
    reciprocal_rank,
)
from t2exp.text.numbers import extract_number, number_match, parse_gold


# --- Number Match (paper §3) -------------------------------------------------------------------
@pytest.mark.parametrize(
    "pred, gold, ok",
    [
        (0.0, 0.0, True),  # both below eps
        (0.004, 0.0, True),
        (0.0, 0.009, True),
        (45.51, 0.4551, True),  # scale shift by a power of ten
        (0.4551, 45.51, True),
        (4551, 0.4551, True),
        (-45.51, 45.51, True),  # sign ignored
        (45.51, -0.4551, True),
        (45.51, 45.51 * 1.0099, True),  # within 1 %
        (45.51, 45.51 * 1.011, False),
        (45.0, 46.0, False),
        (1.0, 0.0, False),  # gold 0, prediction not small
        (0.0, 5.0, False),
        (None, 5.0, False),  # non-numeric prediction → wrong
        (float("nan"), 5.0, False),
        (float("inf"), 5.0, False),
        (3.0, 31.0, False),
        (127.4, 127.40, True),
        (0.935, 93.5, True),
    ],
)
def test_number_match(pred, gold, ok):
    assert number_match(pred, gold) is ok


def test_number_match_near_half_decade():
    # ratio ~3.16 → normalised by 10^round(0.5) – not equal to 1 either way
    assert number_match(31.6, 10.0) is False
    assert number_match(0.1, 0.1) is True


# --- extraction --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, value",
    [
        ("$1,234.5 million", 1_234.5e6),
        ("(12.3)%", -12.3),
        ("-12.3%", -12.3),
        ("The answer is 45.51%.", 45.51),
        ("Final answer: 0.4551", 0.4551),
        ("Revenue rose from 2018 to 2019.\nFinal answer: 13.2%", 13.2),
        ("We compute 5 + 6 = 11.\nFinal answer: $11 billion", 11e9),
        ("\\boxed{42.7}", 42.7),
        ("so the result is \\boxed{-3.5} (in percent)", -3.5),
        ("<think>maybe 99?</think> Final answer: 7", 7.0),
        ("Answer: (1,212)", -1212.0),
        ("about 3.2 billion dollars", 3.2e9),
        ("1.5e3", 1500.0),
        ("−4.2", -4.2),  # unicode minus
        ("US$ 5.5 thousand", 5500.0),
        ("€12", 12.0),
        ("it increased 7 percent", 7.0),
        ("The change is 24.69 percent, up from 2018", 24.69),
        (".5", 0.5),
        ("12,345", 12345.0),
        ("Final answer: 93.5% of the total", 93.5),
    ],
)
def test_extract_number(text, value):
    got = extract_number(text)
    assert got is not None and math.isclose(got, value, rel_tol=1e-9)


@pytest.mark.parametrize("text", ["", "N/A", "I cannot answer this.", None, "<think>3</think>", "Final answer: unknown"])
def test_extract_number_none(text):
    assert extract_number(text) is None


def test_extraction_then_match_against_gold_scale():
    # "$533 million" vs gold 533000000.0 and "45.51%" vs 0.4551 both match
    assert number_match(extract_number("$533 million"), parse_gold("533000000.0"))
    assert number_match(extract_number("45.51%"), parse_gold("0.4551"))
    assert not number_match(extract_number("N/A"), parse_gold("1.0"))


def test_parse_gold():
    assert parse_gold("94.0") == 94.0
    assert parse_gold(" 0.1446 ") == 0.1446
    assert parse_gold("") is None
    assert parse_gold("yes") is None
    assert parse_gold(None) is None
    assert parse_gold(float("nan")) is None
    assert parse_gold(3) == 3.0


# --- retrieval metrics -------------------------------------------------------------------------
def test_mrr_and_recall():
    ranked = ["a", "b", "c", "d", "e"]
    assert reciprocal_rank(ranked, "a", 3) == 1.0
    assert reciprocal_rank(ranked, "c", 3) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, "d", 3) == 0.0  # beyond k
    assert reciprocal_rank(ranked, "d", 5) == 0.25
    assert reciprocal_rank(ranked, "z", 5) == 0.0
    assert recall_at(ranked, "a", 1) == 1.0
    assert recall_at(ranked, "b", 1) == 0.0
    assert recall_at(ranked, "c", 3) == 1.0
    assert recall_at(ranked, "e", 3) == 0.0
    assert recall_at(ranked, "e", 5) == 1.0


def test_question_metrics_without_retrieval():
    m = question_metrics(None, "a", 3, 5.0, 5.0)
    assert m["nm"] == 1.0 and m["mrr_at_3"] is None and m["recall_at_1"] is None


def test_question_metrics_non_numeric_gold_is_excluded():
    assert question_metrics(["a"], "a", 3, 5.0, None)["nm"] is None


def test_aggregate_weighted_by_questions():
    rows = [{"subset": "A", "nm": 1.0}] * 3 + [{"subset": "B", "nm": 0.0}] * 1
    table = aggregate(rows, ["nm"])
    assert table["A"]["nm"].mean == 100.0
    assert table["B"]["nm"].mean == 0.0
    assert table["avg"]["nm"].mean == 75.0  # (3*100 + 1*0) / 4, not the mean of means (50)
    assert table["avg"]["nm"].n == 4


def test_aggregate_skips_none_values():
    rows = [{"subset": "A", "nm": 1.0, "mrr_at_3": None}, {"subset": "A", "nm": None, "mrr_at_3": 0.5}]
    table = aggregate(rows, ["nm", "mrr_at_3"])
    assert table["A"]["nm"].n == 1 and table["A"]["mrr_at_3"].mean == 50.0


def test_bootstrap_ci_brackets_mean_and_is_seeded():
    vals = [1.0] * 30 + [0.0] * 70
    lo, hi = bootstrap_ci(vals, seed=1)
    assert lo < 30.0 < hi
    assert (lo, hi) == bootstrap_ci(vals, seed=1)
    assert bootstrap_ci([1.0] * 10) == (100.0, 100.0)


# --- answers and golds of unusual shape -------------------------------------------------------------
@pytest.mark.parametrize("gold", ["2016-09-23", "2021-12-12", "352-05-12", "23/09/2016", "2016/09/23"])
def test_date_golds_are_non_numeric(gold):
    # TAT-DQA has date answers; they are non-numeric, not read as the year (2016) and counted in NM
    assert parse_gold(gold) is None
    assert question_metrics(["c"], "c", 3, 2016.0, parse_gold(gold))["nm"] is None


def test_bundled_tat_dqa_has_eight_date_golds_left_out_of_nm():
    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import load_subsets
    from t2exp.infra.paths import DATA_DIR

    (sub,) = load_subsets(**dataset_args(subsets=["TAT-DQA"], path=DATA_DIR, source="local"))
    dates = [q for q in sub.questions if q.gold is None]
    assert sub.stats["non_numeric_gold"] == len(dates) == 8  # the eight "YYYY-MM-DD" answers of the bundle
    assert all(q.gold_raw.count("-") == 2 for q in dates)


@pytest.mark.parametrize(
    "text, value",
    [
        ("so the total is 5</think> 7", 7.0),  # the chat template opened the block: before </think> is reasoning
        ("<think>a 1</think> b 2 <think>c 3</think>", 2.0),
        ("<THINK>9</THINK>Final answer: 4", 4.0),
    ],
)
def test_reasoning_is_stripped_as_the_generators_strip_it(text, value):
    from t2exp.answering.answers import parse_answer
    from t2exp.generators.openai_compat import split_reasoning

    assert extract_number(text) == value == extract_number(split_reasoning(text)[0])
    assert parse_answer("direct", text).value == value


def test_question_value_reads_logged_or_recomputes():
    row = {"retrieved": ["x", "g", "y"], "context_id": "g", "mrr_at_3": 0.5, "nm": None}
    assert question_value(row, "mrr_at_3") == 0.5
    assert question_value(row, "mrr_at_1") == 0.0 and question_value(row, "recall_at_2") == 1.0
    assert question_value(row, "nm") is None
    assert question_value({**row, "retrieved": ["x"]}, "recall_at_5") is None  # gold may sit below depth 1


# --- the other NM readings: nm_bare, nm_strict, degenerate predictions -------------
def _nms(pred, gold, text=None):
    m = question_metrics(None, "c", 3, pred, gold, pred_text=text)
    return m["nm"], m["nm_bare"], m["nm_strict"]


@pytest.mark.parametrize(
    "text, gold, want",  # want: (nm, nm_bare, nm_strict); pred = extract_number(text), as in a run
    [
        ("1e92", 1.0, (1.0, 1.0, 0.0)),  # nm's power-of-ten shift accepts it; strict does not
        ("10", 1.0, (1.0, 1.0, 0.0)),
        ("1,234.5", 1234.5, (1.0, 0.0, 1.0)),  # float("1,234.5") fails
        ("$1,234.5 million", 1234.5e6, (1.0, 0.0, 1.0)),
        ("0.001", 0.004, (1.0, 1.0, 1.0)),  # both below eps
        ("4.0", 0.004, (1.0, 0.0, 0.0)),  # nm by scale; bare: a gold below eps needs a pred below eps
        ("0.0", 0.0, (1.0, 1.0, 1.0)),
        ("45.51", -45.51, (1.0, 1.0, 1.0)),  # sign ignored by all three
        ("45.51", 45.51 * 1.0099, (1.0, 1.0, 1.0)),
        ("45.51", 45.51 * 1.011, (0.0, 0.0, 0.0)),
        ("45.51", 0.4551, (1.0, 1.0, 0.0)),
        (" 7.5 ", 7.5, (1.0, 1.0, 1.0)),  # float() after strip()
        ("N/A", 7.5, (0.0, 0.0, 0.0)),
        (None, 7.5, (0.0, 0.0, 0.0)),
    ],
)
def test_nm_variants_known_answers(text, gold, want):
    assert _nms(extract_number(text), gold, text) == want


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_are_never_correct_and_never_crash(bad):
    from t2exp.text.numbers import is_degenerate, number_match_bare, number_match_strict

    for gold in (1.0, 0.0, 0.004, bad):
        assert _nms(bad, gold, bad) == (0.0, 0.0, 0.0)  # as parsed values
        assert _nms(None, gold, str(bad)) == (0.0, 0.0, 0.0)  # as answer strings: "nan", "inf", "-inf"
        assert not number_match_bare(str(bad), gold) and not number_match_strict(bad, gold) and not number_match(bad, gold)
    for pred in (1.0, 0.0, 0.001):  # a non-finite gold
        assert not number_match(pred, bad) and not number_match_bare(str(pred), bad) and not number_match_strict(pred, bad)
    assert is_degenerate(str(bad)) and is_degenerate(None, bad) and is_degenerate(bad)
    assert question_metrics(None, "c", 3, None, 1.0, pred_text=str(bad))["degenerate"] == 1.0


@pytest.mark.parametrize("gold", ["2016-09-23", "23/09/2016", "N/A", "", None])
def test_non_numeric_gold_is_excluded_from_every_nm(gold):
    m = question_metrics(["c"], "c", 3, 2016.0, parse_gold(gold), pred_text="2016")
    assert m["nm"] is None and m["nm_bare"] is None and m["nm_strict"] is None
    assert m["degenerate"] == 0.0  # counted whatever the gold
    rows = [{"subset": "A", **m}, {"subset": "A", **question_metrics(["c"], "c", 3, 5.0, 5.0, pred_text="5")}]
    table = aggregate(rows, ["nm", "nm_bare", "nm_strict"])
    assert {n: table["A"][n].n for n in ("nm", "nm_bare", "nm_strict")} == {"nm": 1, "nm_bare": 1, "nm_strict": 1}


@pytest.mark.parametrize(
    "text, degenerate",
    [
        ("0.00000000000000", True),  # 15 digits
        ("0.0000000000000", False),  # 14
        ("123456789012345", True),
        ("1,234,567,890,123,456", True),  # separators inside one number
        ("the answer is 0.00000000000000000000000000000", True),
        ("12345678901234", False),
        ("24.691358024691358", False),  # a float's shortest repr (a FinQA gold as written), not runaway
        ("0.3333333333333333", False),
        ("-0.6030612244897959", False),
        ("0.33333333333333333333", True),  # more digits than any float prints
        ("12.50000000000000", True),
        ("1.000.000.000.000.000", True),
        ("12 345 678 901 234 567", False),  # separate numbers
        ("1e92", False),  # a short string; nm_strict is what catches it
        ("1e999", True),  # inf after parsing
        ("nan", True),
        ("-inf", True),
        ("5.0", False),
        ("N/A", False),
        (None, False),
        (1e20, False),  # a finite number (a submitted numeric prediction)
    ],
)
def test_is_degenerate(text, degenerate):
    from t2exp.text.numbers import is_degenerate

    assert is_degenerate(text) is degenerate


def test_degenerate_counts_per_subset():
    from t2exp.evaluation.metrics import degenerate_counts

    rows = [
        {"subset": "B", "degenerate": 1.0},
        {"subset": "A", "degenerate": 0.0},
        {"subset": "B", "degenerate": 1.0},
        {"subset": "C", "degenerate": None},
    ]
    assert degenerate_counts(rows) == {"A": 0, "B": 2}


@pytest.mark.parametrize(
    "mode, generation, text",
    [
        ("direct", "Final answer: 1,234.5", "1,234.5"),
        ("direct", "Final answer: $5 million\n", "$5 million"),
        ("cot", "<think>3 + 4</think>The sum is 7.\nFinal answer:\n  7 ", "7"),
        ("cot", "Reasoning... so \\boxed{0.25} is it", "0.25"),
        ("direct", "It is 12 percent", "It is 12 percent"),
        ("direct", "I cannot tell.", None),
        ("program", "Program: (5 - 3) / 2", "(5 - 3) / 2"),  # the program the model wrote
        ("program", "Program: 2.5", "2.5"),
    ],
)
def test_answer_text_is_what_nm_bare_reads(mode, generation, text):
    from t2exp.answering.answers import parse_answer

    assert parse_answer(mode, generation).text == text


def test_paper_order_resorts_by_dense_similarity_with_bm25_only_hits_last():
    from t2exp.evaluation.metrics import paper_order, question_metrics

    assert paper_order(["A", "B", "C", "D"], [0.2, None, 0.9, 0.2]) == ["C", "A", "D", "B"]  # ties keep the retrieved order
    m = question_metrics(["A", "B", "C"], "A", 3, None, None, dense=[0.2, None, 0.9])
    assert m["mrr_at_3"] == 1.0 and m["recall_at_1"] == 1.0  # the true order the retriever returned
    assert m["mrr_at_3_paper_order"] == 0.5 and m["recall_at_1_paper_order"] == 0.0  # C first after the re-sort
    none = question_metrics(["A", "B"], "A", 3, None, None)
    assert none["mrr_at_3_paper_order"] is None and none["recall_at_1_paper_order"] is None  # no dense scores kept


def test_paper_order_resorts_the_top_k_the_authors_retriever_returned():
    """The authors re-sort their top-k list: a better-dense document at rank 4 or 5 (retrieved only
    so that Recall@5 is defined) never enters it."""
    from t2exp.evaluation.metrics import question_metrics

    m = question_metrics(["A", "B", "C", "D", "E"], "A", 3, None, None, dense=[0.2, 0.3, 0.1, 0.9, 0.8])
    assert m["recall_at_1_paper_order"] == 0.0 and m["mrr_at_3_paper_order"] == 0.5  # B, A, C — not D, E, B
    m = question_metrics(["A", "B", "C", "D", "E"], "D", 3, None, None, dense=[0.2, 0.3, 0.1, 0.9, 0.8])
    assert m["mrr_at_3_paper_order"] == 0.0 and m["recall_at_5"] == 1.0


def test_recall_past_what_the_method_ranked_is_undefined():
    """A reranker that rescored 3 candidates ranked 3 documents: its Recall@5 is not a 0."""
    from t2exp.evaluation.metrics import question_metrics

    m = question_metrics(["A", "B", "C"], "Z", 1, None, None, ranked_depth=3)
    assert (m["recall_at_1"], m["recall_at_3"], m["recall_at_5"]) == (0.0, 0.0, None)
    assert question_metrics(["A", "B", "C"], "Z", 1, None, None)["recall_at_5"] == 0.0  # a list that is complete


def test_paper_order_metrics_are_scored_from_a_runs_predictions():
    from t2exp.data.records import Question
    from t2exp.evaluation.scoring.compute import score

    gold = [Question(id=f"q{i}", subset="FinQA", split="dev", context_id="A", question="?", gold=1.0, gold_raw="1") for i in range(2)]
    rows = [
        {"id": "q0", "prediction": "1", "retrieved": ["A", "B"], "retrieved_dense": [0.1, 0.8]},
        {"id": "q1", "prediction": "1", "retrieved": ["B", "A"], "retrieved_dense": [None, 0.5]},
    ]
    res = score(rows, gold=gold, n_boot=0)
    assert res.metrics["FinQA/mrr_at_3"] == pytest.approx(75.0)  # 1 and 1/2
    assert res.metrics["FinQA/mrr_at_3_paper_order"] == pytest.approx(75.0)  # 1/2 and 1
    assert res.metrics["FinQA/recall_at_1_paper_order"] == pytest.approx(50.0)

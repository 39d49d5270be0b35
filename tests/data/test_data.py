import pandas as pd
import pytest

from helpers.paths import ROOT
from t2exp.config.schema import dataset_args
from t2exp.data.loader import load_subsets
from t2exp.data.sampling import sample_questions
from t2exp.errors import DataError

BUNDLE = ROOT / "data" / "t2ragbench"


def test_bundled_subsets_have_their_own_corpus():
    finqa, tat = load_subsets(**dataset_args(subsets=["FinQA", "TAT-DQA"], path=BUNDLE, source="local"))
    assert (finqa.name, len(finqa.questions), len(finqa.corpus)) == ("FinQA", 883, 299)
    assert (tat.name, len(tat.questions), len(tat.corpus)) == ("TAT-DQA", 1142, 274)
    assert {d.subset for d in finqa.corpus} == {"FinQA"}
    ids = {d.context_id for d in finqa.corpus}
    assert all(q.context_id in ids for q in finqa.questions)
    # metadata is kept on documents
    doc = finqa.corpus[0]
    assert doc.metadata["company_name"] and doc.metadata["report_year"] and doc.metadata["file_name"]
    # gold answers are parsed floats
    assert all(q.gold is not None for q in finqa.questions)


def test_limit_samples_questions_but_keeps_corpus():
    (a,) = load_subsets(**dataset_args(subsets=["FinQA"], path=BUNDLE, limit=10, seed=3))
    (b,) = load_subsets(**dataset_args(subsets=["FinQA"], path=BUNDLE, limit=10, seed=3))
    (c,) = load_subsets(**dataset_args(subsets=["FinQA"], path=BUNDLE, limit=10, seed=4))
    assert len(a.questions) == 10 and len(a.corpus) == 299
    assert [q.id for q in a.questions] == [q.id for q in b.questions]
    assert [q.id for q in a.questions] != [q.id for q in c.questions]
    assert sample_questions(a.questions, None, 0) == a.questions


def _frame(n=4, **overrides):
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"q{i}",
                "context_id": f"c{i % 2}",
                "split": "test",
                "question": f"What is value {i}?",
                "program_answer": str(float(i)),
                "original_answer": str(i),
                "context": f"context text {i % 2}",
                "company_name": "ACME",
                "report_year": 2019,
                "company_sector": "Industrials",
                "file_name": f"f{i}.pdf",
            }
        )
    df = pd.DataFrame(rows)
    for k, v in overrides.items():
        df[k] = v
    return df


def test_local_dir_any_split_name_and_question_splits(tmp_path):
    _frame(4).to_parquet(tmp_path / "FinQA_test.parquet")
    train = _frame(2)
    train["id"] = ["t0", "t1"]
    train["split"] = "train"
    train["context_id"] = ["c9", "c9"]
    train["context"] = ["other doc", "other doc"]
    train.to_json(tmp_path / "FinQA_train.jsonl", orient="records", lines=True)
    (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path, question_splits=["test"]))
    assert len(sub.questions) == 4
    assert {d.context_id for d in sub.corpus} == {"c0", "c1", "c9"}  # corpus spans all splits
    (both,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert len(both.questions) == 6


def test_single_file_path(tmp_path):
    f = tmp_path / "TAT-DQA_whatever.parquet"
    _frame(3).to_parquet(f)
    (sub,) = load_subsets(**dataset_args(subsets=["TAT-DQA"], path=f))
    assert sub.name == "TAT-DQA" and len(sub.questions) == 3


def test_missing_column_names_file_row_and_column(tmp_path):
    f = tmp_path / "FinQA_test.parquet"
    _frame(3).drop(columns=["context"]).to_parquet(f)
    with pytest.raises(DataError) as e:
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    msg = str(e.value)
    assert str(f) in msg and "context" in msg and "row 0" in msg and "\n" not in msg


def test_empty_question_skipped_and_counted(tmp_path):
    df = _frame(4)
    df.loc[2, "question"] = "  "
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert len(sub.questions) == 3 and sub.stats["empty_questions_skipped"] == 1
    with pytest.raises(DataError, match=r"row 2: column 'question' is empty"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path, skip_empty_questions=False))


def test_duplicate_ids_and_conflicting_context(tmp_path):
    df = _frame(3)
    df.loc[2, "id"] = "q0"
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    with pytest.raises(DataError, match=r"row 2: column 'id' value 'q0' duplicates"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    df = _frame(3)
    df.loc[2, "context"] = "a different text for c0"
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    with pytest.raises(DataError, match=r"row 2: column 'context' for context_id 'c0' differs"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))


def test_non_numeric_gold_is_counted(tmp_path):
    df = _frame(3)
    df.loc[1, "program_answer"] = "yes"
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert sub.stats["non_numeric_gold"] == 1
    assert [q.gold for q in sub.questions] == [0.0, None, 2.0]


def test_unknown_subset_and_missing_files(tmp_path):
    with pytest.raises(DataError, match="unknown subset 'FinQB'"):
        load_subsets(**dataset_args(subsets=["FinQB"], path=tmp_path))
    with pytest.raises(DataError, match=r"no FinQA file found there \(looked for FinQA_<split>"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path, source="local"))
    with pytest.raises(DataError, match="no such file"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path / "nope"))


def test_unreadable_file_is_one_line(tmp_path):
    (tmp_path / "FinQA_test.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError) as e:
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert "cannot read" in str(e.value) and "\n" not in str(e.value)


def test_corpus_splits_choose_the_corpus_and_refuse_orphan_questions(tmp_path):

    src = pd.read_parquet(BUNDLE / "FinQA_dev.parquet")
    ctx = list(dict.fromkeys(src.context_id))[:10]
    dev = src[src.context_id.isin(ctx[:6])].copy()
    test = src[src.context_id.isin(ctx[4:])].copy()  # contexts 4 and 5 are in both splits
    test["id"] = test["id"] + "_t"
    dev["split"], test["split"] = "dev", "test"
    dev.to_parquet(tmp_path / "FinQA_dev.parquet")
    test.to_parquet(tmp_path / "FinQA_test.parquet")

    (both,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path, source="local"))
    assert {d.context_id for d in both.corpus} == set(ctx)  # default: every loaded split
    (only_test,) = load_subsets(
        **dataset_args(subsets=["FinQA"], path=tmp_path, source="local", corpus_splits=["test"], question_splits=["test"])
    )
    assert {d.context_id for d in only_test.corpus} == set(ctx[4:])
    assert {q.split for q in only_test.questions} == {"test"}
    with pytest.raises(DataError) as err:  # dev questions whose gold context is dev-only
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path, source="local", corpus_splits=["test"]))
    msg = str(err.value)
    assert "\n" not in msg and "dataset.corpus_splits=['test']" in msg and "split 'dev'" in msg

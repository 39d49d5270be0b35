"""Dataset validation: each bad input is one line naming file, row and column (the cases
tests/data/test_data.py does not cover)."""

from __future__ import annotations

import logging
import math

import pandas as pd
import pytest

from t2exp.config.schema import dataset_args
from t2exp.data.loader import load_subsets
from t2exp.data.rows import rows_to_subset
from t2exp.errors import DataError
from t2exp.evaluation.metrics import aggregate, question_metrics


def frame(n: int = 4) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "context_id": [f"c{i % 2}" for i in range(n)],
            "split": ["test"] * n,
            "question": [f"What is value {i}?" for i in range(n)],
            "program_answer": [str(float(i + 1)) for i in range(n)],
            "original_answer": [str(i + 1) for i in range(n)],
            "context": [f"context text {i % 2}" for i in range(n)],
        }
    )


def load_error(tmp_path, df: pd.DataFrame, name: str = "FinQA_test.parquet") -> str:
    f = tmp_path / name
    if name.endswith(".parquet"):
        df.to_parquet(f)
    else:
        df.to_json(f, orient="records", lines=True)
    with pytest.raises(DataError) as e:
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and str(f) in msg, msg
    return msg


def test_renamed_column_is_named_with_a_hint(tmp_path):
    msg = load_error(tmp_path, frame().rename(columns={"program_answer": "programAnswer"}))
    assert "missing column(s) program_answer (row 0)" in msg and "'programAnswer' for 'program_answer'" in msg


def test_several_missing_columns(tmp_path):
    msg = load_error(tmp_path, frame().drop(columns=["id", "context_id"]))
    assert "missing column(s) id, context_id (row 0)" in msg


@pytest.mark.parametrize("value", [None, "", "   ", float("nan")])
def test_empty_id_names_the_row(tmp_path, value):
    df = frame()
    df["id"] = df["id"].astype(object)
    df.loc[2, "id"] = value
    msg = load_error(tmp_path, df)
    assert "row 2: column 'id' is empty" in msg


def test_missing_value_is_empty_not_the_text_nan_or_na(tmp_path):
    df = frame()
    df["id"] = pd.array(["q0", "q1", pd.NA, "q3"], dtype="string")
    msg = load_error(tmp_path, df)
    assert "row 2: column 'id' is empty" in msg


def test_empty_context_id_and_context(tmp_path):
    df = frame()
    df.loc[1, "context_id"] = ""
    assert "row 1: column 'context_id' is empty" in load_error(tmp_path, df)
    df = frame()
    df.loc[3, "context"] = None
    assert "row 3: column 'context' is empty for context_id 'c1'" in load_error(tmp_path, df)


def test_duplicate_id_across_files_names_both(tmp_path):
    frame(2).to_parquet(tmp_path / "FinQA_dev.parquet")
    msg = load_error(tmp_path, frame(3), "FinQA_test.parquet")
    assert "row 0: column 'id' value 'q0' duplicates" in msg and "FinQA_dev.parquet row 0" in msg


def test_same_context_id_with_other_text_across_files(tmp_path):
    other = frame(2)
    other["id"] = ["d0", "d1"]
    other.loc[1, "context"] = "another text for c1"
    other.to_parquet(tmp_path / "FinQA_dev.parquet")
    msg = load_error(tmp_path, frame(3), "FinQA_test.parquet")
    assert "row 1: column 'context' for context_id 'c1' differs from" in msg and "FinQA_dev.parquet row 1" in msg


def test_empty_corpus(tmp_path):
    frame(0).to_parquet(tmp_path / "FinQA_test.parquet")
    with pytest.raises(DataError, match=r"subset FinQA: the corpus is empty \(sources: .*FinQA_test.parquet\)"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))


def test_empty_jsonl_file_is_an_empty_corpus(tmp_path):
    (tmp_path / "FinQA_test.jsonl").write_text("")
    with pytest.raises(DataError, match="the corpus is empty"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))


def test_bad_jsonl_line_is_named(tmp_path):
    f = tmp_path / "FinQA_test.jsonl"
    good = frame(2).to_json(orient="records", lines=True).strip().splitlines()
    f.write_text(good[0] + "\n" + '{"id": "q1", "context_id": ' + "\n" + good[1] + "\n")
    with pytest.raises(DataError) as e:
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert str(e.value).startswith(f"{f}: line 2: not valid JSON")
    f.write_text(good[0] + "\n[1, 2]\n")
    with pytest.raises(DataError, match=r"line 2: expected a JSON object per line, got list"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    f.write_bytes(good[0].encode() + b"\n\xff\xfe\n")
    with pytest.raises(DataError, match=r"not UTF-8"):
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))


def test_jsonl_blank_lines_are_skipped(tmp_path):
    f = tmp_path / "FinQA_test.jsonl"
    lines = frame(3).to_json(orient="records", lines=True).strip().splitlines()
    f.write_text("\n".join([lines[0], "", lines[1], "   ", lines[2]]) + "\n")
    (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert [q.id for q in sub.questions] == ["q0", "q1", "q2"]


def test_non_numeric_gold_is_counted_and_left_out_of_nm(tmp_path, caplog):
    df = frame(4)
    df.loc[1, "program_answer"] = "yes"
    df.loc[3, "program_answer"] = None
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    with caplog.at_level(logging.WARNING, logger="t2exp.data.loader"):
        (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert sub.stats["non_numeric_gold"] == 2
    assert "non-numeric" not in caplog.text  # a run that computes NM says so (tests/cli/test_command_line.py), loading does not
    rows = []
    for q in sub.questions:  # every prediction "1": right for q0, wrong for q2, no NM for q1/q3
        m = question_metrics(["c0"], q.context_id, 3, 1.0, q.gold)
        rows.append({"subset": q.subset, **m})
    assert [r["nm"] for r in rows] == [1.0, None, 0.0, None]
    table = aggregate(rows, ["nm"])
    assert table["FinQA"]["nm"].n == 2 and math.isclose(table["FinQA"]["nm"].mean, 50.0)


def test_numeric_looking_golds_parse(tmp_path):
    df = frame(3)
    df["program_answer"] = ["1,234.5", "-0.25", "12%"]
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert [q.gold for q in sub.questions] == [1234.5, -0.25, 12.0]


def test_rows_to_subset_reports_the_source_it_was_given():
    df = frame(2)
    df.loc[1, "id"] = "q0"
    with pytest.raises(DataError, match=r"^hub:G4KMU/t2-ragbench/FinQA/test: row 1: column 'id' value 'q0' duplicates"):
        rows_to_subset("FinQA", [("hub:G4KMU/t2-ragbench/FinQA/test", df)])


def test_files_are_read_and_checked_once_per_process(tmp_path, monkeypatch):
    """The pre-flight check, the run and each cell of a sweep load the same files: read and checked
    once, each load with its own lists; a changed file is read again."""
    from t2exp.data import loader

    frame(3).to_parquet(tmp_path / "FinQA_test.parquet")
    calls, checked = [], []
    real, check = pd.read_parquet, loader.rows_to_subset
    monkeypatch.setattr(loader.pd, "read_parquet", lambda f, *a, **k: calls.append(f) or real(f, *a, **k))
    monkeypatch.setattr(loader, "rows_to_subset", lambda *a, **k: checked.append(1) or check(*a, **k))
    (first,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    first.questions.clear()
    first.stats["rows"] = -1
    (second,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path, limit=1))
    assert len(calls) == 1 and len(checked) == 1
    assert len(second.questions) == 1 and second.stats["rows"] == 3  # the first load's lists were its own
    frame(2).to_parquet(tmp_path / "FinQA_test.parquet")  # a changed file is read again
    (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert len(calls) == 2 and len(sub.questions) == 2


def test_a_file_whose_questions_are_all_empty_names_the_file_and_column(tmp_path):
    """A file whose questions are all empty is named with its empty column; the hint does not name
    dataset.question_splits, which is not the cause."""
    import pandas as pd

    from t2exp.data.loader import load_subsets
    from t2exp.errors import DataError

    pd.DataFrame(
        {"id": ["a", "b"], "context_id": ["c", "d"], "question": ["", " "], "program_answer": ["1", "2"], "context": ["t1", "t2"]}
    ).to_parquet(tmp_path / "FinQA_test.parquet")
    with pytest.raises(DataError) as err:
        load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path, source="local"))
    msg = str(err.value)
    assert "FinQA_test.parquet" in msg and "column 'question' is empty in all 2 rows" in msg and "question_splits" not in msg


@pytest.mark.parametrize("change", ["gold", "question", "metadata", "document_metadata"])
def test_a_subset_with_the_same_ids_and_other_content_is_other_data(tmp_path, change):
    """The cell's data identity covers every field a run reads, not only the ids."""
    from t2exp.pipeline.identity import data_fingerprint

    df = frame(4).assign(company_name="ACME")
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    (before,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    if change == "gold":
        df.loc[1, "program_answer"] = "42"
    elif change == "question":
        df.loc[1, "question"] = "What is value 1 in 2019?"
    elif change == "metadata":  # company_name is a question's and its document's metadata
        df.loc[1, "company_name"] = "ACME Corp"
    else:  # a document's metadata only: the row whose context the document takes
        df.loc[df.context_id == "c0", "company_name"] = "ACME Corp"
    other = tmp_path / "other"
    other.mkdir()
    df.to_parquet(other / "FinQA_test.parquet")
    (after,) = load_subsets(**dataset_args(subsets=["FinQA"], path=other))
    assert [q.id for q in before.questions] == [q.id for q in after.questions]
    assert data_fingerprint([before]) != data_fingerprint([after])
    (again,) = load_subsets(**dataset_args(subsets=["FinQA"], path=tmp_path))
    assert data_fingerprint([before]) == data_fingerprint([again])


def test_a_corrected_gold_is_scored_again_not_resumed(tmp_path):
    """A run on a file whose golds are wrong, then the same command on the corrected file (same
    ids, same questions, same documents): the second run scores the corrected golds (its own
    cell), and the LLM cache answers it (no request sent twice)."""
    from fakes.openai_server import FakeOpenAIServer
    from helpers.app import run_app
    from helpers.paths import ROOT
    from helpers.tracking import mlflow_runs
    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import load_subsets

    src = pd.read_parquet(ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet").head(3).copy()
    src["split"] = "test"
    data = tmp_path / "data"
    data.mkdir()
    wrong = src.assign(program_answer="42")
    wrong.to_parquet(data / "FinQA_test.parquet")
    golds = [q.gold for q in load_subsets(**dataset_args(subsets=["FinQA"], path=data))[0].questions]
    assert golds == [42.0] * 3
    args = [
        "rag_method=oracle",
        "dataset=finqa",
        f"dataset.path={data}",
        "dataset.limit=null",
        "generator=openai_compat",
        "generator.model=gold-check",
        "generator.max_retries=0",
    ]
    with FakeOpenAIServer(model="gold-check", reply=lambda messages: "Final answer: 42") as srv:
        run_app([*args, f"generator.base_url={srv.base_url}"], tmp_path / "cache", tmp_path / "track")
        src.to_parquet(data / "FinQA_test.parquet")  # the corrected file: same ids, the real golds
        proc = run_app([*args, f"generator.base_url={srv.base_url}"], tmp_path / "cache", tmp_path / "track")
        asked = len(srv.requests)
    assert "resuming" not in proc.stdout + proc.stderr
    _, runs = mlflow_runs(tmp_path / "track")
    nm = sorted(r.data.metrics["FinQA/nm"] for r in runs)
    assert nm[1] == 100.0 and nm[0] < 100.0, nm  # the wrong golds said 100; the corrected ones do not
    assert asked == 3  # the second run's answers came from the LLM cache


def test_a_named_data_directory_without_the_subset_is_one_line_not_a_trip_to_the_hub(tmp_path):
    """dataset=finqa with a dataset.path holding no FinQA file stops with one line naming the path
    and the files looked for, not a trip to the hub. The hub fallback is kept for the bundled data
    only, the dataset options' default path, which lacks ConvFinQA and VQAonBD."""
    frame().to_parquet(tmp_path / "TAT-DQA_test.parquet")
    for path in (tmp_path, tmp_path / "TAT-DQA_test.parquet"):  # a folder, or one file of another subset
        with pytest.raises(DataError) as e:
            load_subsets(**dataset_args(subsets=["FinQA"], path=path))
        assert str(e.value) == (
            f"dataset.path={path}: no FinQA file found there (looked for FinQA_<split>.parquet or FinQA_<split>.jsonl, e.g. "
            "FinQA_test.parquet); point dataset.path at the folder holding them, or set dataset.source=hub to load FinQA from the hub"
        )
    with pytest.raises(DataError, match=r"no VQAonBD file found there .*holding them$"):  # not on the hub any more
        load_subsets(**dataset_args(subsets=["VQAonBD"], source="local", path=tmp_path))
    assert [s.name for s in load_subsets(**dataset_args(subsets=["TAT-DQA"], path=tmp_path))] == ["TAT-DQA"]
    # the bundled data: what it holds is read, the rest is left to the hub
    from t2exp.data.loader import local_files
    from t2exp.infra.paths import DATA_DIR

    assert set(local_files(DATA_DIR, ["FinQA", "ConvFinQA"], "auto")) == {"FinQA"}
    with pytest.raises(DataError, match=r"no ConvFinQA file found there"):
        local_files(DATA_DIR, ["FinQA", "ConvFinQA"], "local")


def test_the_preflight_stops_a_run_whose_named_data_directory_lacks_the_subset(tmp_path):
    from t2exp.cli.app import preflight

    frame().to_parquet(tmp_path / "TAT-DQA_test.parquet")
    with pytest.raises(DataError, match=r"^dataset.path=.*: no FinQA file found there"):
        preflight(["dataset=finqa", f"dataset.path={tmp_path}", "generator=none"])
    assert preflight(["dataset=convfinqa", "generator=none"]) == 1  # the bundle's default path: ConvFinQA from the hub, when the job runs

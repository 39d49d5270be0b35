"""The MLflow run a cell logs to (t2exp.tracking.mlflow_run.Tracker), on a real SQLite store."""
from __future__ import annotations

from types import SimpleNamespace

from t2exp.tracking.mlflow_run import Tracker


def _subset(name: str) -> SimpleNamespace:
    questions = [SimpleNamespace(split="dev") for _ in range(5)]
    return SimpleNamespace(name=name, sources=["data/finqa.parquet"], content_hash="ab" * 16,
                           questions=questions, corpus=["doc"] * 7)


def test_two_cells_logging_one_dataset_at_once_both_link_it(tmp_path):
    """MLflow reads which datasets exist, then inserts the missing ones. The second cell's insert
    is made to happen between the first cell's read and its insert (a SQLAlchemy event on the
    first cell's INSERT, not timing): the first insert then breaks the unique constraint, as two
    Slurm tasks of one sweep did. Both runs must end with the dataset as their input."""
    import sqlalchemy
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = Tracker(uri, "t2exp", str(tmp_path / "artifacts"), "lancedb", {})
    second = Tracker(uri, "t2exp", str(tmp_path / "artifacts"), "weaviate", {})
    subsets = [_subset("FinQA")]
    engine = first.client._tracking_client.store.engine
    raced: list[str] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO DATASETS") and not raced:
            raced.append(statement)
            second.log_inputs(subsets)  # the other task wins the insert

    sqlalchemy.event.listen(engine, "before_cursor_execute", before)
    try:
        first.log_inputs(subsets)
    finally:
        sqlalchemy.event.remove(engine, "before_cursor_execute", before)
    assert raced, "the first cell never inserted the dataset: the race was not staged"
    client = MlflowClient(tracking_uri=uri)
    for tracker in (first, second):
        (logged,) = client.get_run(tracker.run_id).inputs.dataset_inputs
        assert (logged.dataset.name, logged.dataset.digest) == ("FinQA", "ab" * 10)
    datasets = {(d.dataset.name, d.dataset.digest) for t in (first, second)
                for d in client.get_run(t.run_id).inputs.dataset_inputs}
    assert len(datasets) == 1

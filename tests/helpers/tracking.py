"""A test's MLflow store: seeded with the session's migrated copy, and its runs read back."""

from __future__ import annotations

from pathlib import Path

# one migrated MLflow store per test session (seed_tracking); where it goes is set by the session
# fixture ``_mlflow_template`` of tests/conftest.py
MLFLOW_TEMPLATE: list[Path] = []


def seed_tracking(tracking_dir: Path) -> None:
    """Give a test's MLflow store (``tracking_dir/mlflow.db``) the session's migrated copy when it
    has none: MLflow migrates a new SQLite store's schema on first use (~2 s a store), once a
    session now. Only for runs expected to succeed: a refused run must leave no store behind."""
    import shutil

    target = Path(tracking_dir) / "mlflow.db"
    if target.exists() or not MLFLOW_TEMPLATE:
        return
    template = MLFLOW_TEMPLATE[0]
    if not template.exists():
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=f"sqlite:///{template}").search_experiments()  # creates and migrates it
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)


def mlflow_runs(tracking_dir: Path, experiment: str = "t2exp"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tracking_dir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])

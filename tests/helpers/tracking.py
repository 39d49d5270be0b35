"""A test's MLflow store: seeded with the session's migrated copy, and its runs read back; a real
``mlflow server`` for the tests of a tracking server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers.net import free_port

# one migrated MLflow store per test session (seed_tracking); where it goes is set by the session
# fixture ``_mlflow_template`` of tests/conftest.py
MLFLOW_TEMPLATE: list[Path] = []


def seed_tracking(tracking_dir: Path) -> None:
    """Give a test's MLflow store (``tracking_dir/mlflow.db``) the session's migrated copy when it
    has none: MLflow migrates a new SQLite store's schema on first use, so this
    happens once a session. Only for runs expected to succeed: a refused run must leave no store behind."""
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


def logged_sweep(tracking_dir: Path, cells: list[dict]) -> tuple[str, str]:
    """A sweep logged by hand in ``tracking_dir/mlflow.db`` (artifacts under ``tracking_dir``): a
    parent run and one FINISHED child per cell, each a dict of ``name``, ``params``, ``overrides``
    (the tag's text), ``metrics`` and ``rows`` (its predictions.jsonl). The store's URI and the
    parent's run id."""
    import json

    from mlflow.tracking import MlflowClient

    seed_tracking(tracking_dir)
    uri = f"sqlite:///{tracking_dir / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("t2exp", artifact_location=(tracking_dir / "artifacts").as_uri())
    parent = client.create_run(exp_id, run_name="sweep", tags={"t2exp.sweep": "parent"}).info.run_id
    for cell in cells:
        tags = {"mlflow.parentRunId": parent, "t2exp.overrides": cell.get("overrides", "")}
        rid = client.create_run(exp_id, run_name=cell["name"], tags=tags).info.run_id
        for key, value in cell.get("params", {}).items():
            client.log_param(rid, key, value)
        for key, value in cell.get("metrics", {}).items():
            client.log_metric(rid, key, value)
        rows = tracking_dir / "predictions.jsonl"
        rows.write_text("".join(json.dumps(r) + "\n" for r in cell["rows"]), encoding="utf-8")
        client.log_artifact(rid, str(rows))
        client.set_terminated(rid, "FINISHED")
    return uri, parent


class MlflowServer:
    """A real ``mlflow server`` on a free loopback port, started and killed by the test: on a SQLite
    store in ``tmp_path`` (artifacts under it as the default root), or on ``store`` serving artifacts
    itself into ``tmp_path``; its log is ``tmp_path/server.log``. MLflow's server-side job execution
    is off: t2exp runs no server jobs, and it starts a job runner and seven consumer processes beside
    the workers."""

    def __init__(self, tmp_path: Path, *, store: str | None = None, workers: int = 1) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        port = free_port()
        artifacts = (
            ["--artifacts-destination", str(tmp_path / "artifacts")]
            if store is not None
            else ["--default-artifact-root", str(tmp_path / "server_artifacts")]
        )
        self.args = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            store or f"sqlite:///{tmp_path / 'server.db'}",
            *artifacts,
            "--workers",
            str(workers),
        ]
        self.uri, self.log = f"http://127.0.0.1:{port}", tmp_path / "server.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> MlflowServer:
        import time
        import urllib.request

        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        end = time.monotonic() + 180  # a new store: MLflow migrates its schema first (slow on a busy 2-core machine)
        while True:  # waiting for a condition (the server answers), not for time to pass
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2):
                    return self
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < end, self.log.read_text()[-2000:]
                time.sleep(0.2)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)

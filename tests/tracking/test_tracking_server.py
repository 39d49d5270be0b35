"""One tracking server for all nodes: a real ``mlflow server`` over a PostgreSQL backend (Debian's
postgresql, a private cluster from ``scripts/pg_local.sh``), and a sharded cell whose shards log
to it from three processes at once: nothing lost — every run, its metrics and its traces are there.

The fixture starts what is missing itself (CI starts PostgreSQL beside the install, as it does the
Slurm cluster) and skips, with the reason, where it cannot: no psycopg2 (``pip install
't2exp[server]'``), no PostgreSQL binaries and not root to install them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from helpers.command import cli
from helpers.net import free_port
from helpers.paths import ROOT
from helpers.tracking import MlflowServer

pytestmark = [pytest.mark.slow, pytest.mark.full]  # a database server, a tracking server and three cell processes

PG = ROOT / "scripts" / "pg_local.sh"


def _pg(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(PG), *args], capture_output=True, text=True, timeout=300, env={**os.environ, **env})


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """A running PostgreSQL: CI's (``pg_local.sh``'s defaults), or a private one for this module."""
    pytest.importorskip("psycopg2", reason="no psycopg2: pip install 't2exp[server]' (psycopg2-binary)")
    if _pg("status", env={}).returncode == 0:
        yield {}
        return
    own = {"T2EXP_PG_DIR": tempfile.mkdtemp(prefix="t2exp-pg-"), "T2EXP_PG_PORT": str(free_port())}
    up = _pg("up", env=own)
    if up.returncode != 0:
        last = (up.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"no PostgreSQL for the tracking server: `scripts/pg_local.sh up` failed ({last})")
    try:
        yield own
    finally:
        _pg("down", env=own)


@pytest.fixture(scope="module")
def tracking_server(postgres, tmp_path_factory) -> Iterator[str]:
    """``mlflow server`` over a fresh PostgreSQL database, serving artifacts itself; its URL."""
    db = _pg("uri", f"t2exp_{uuid.uuid4().hex[:8]}", env=postgres)
    assert db.returncode == 0, db.stderr
    store = db.stdout.strip().replace("postgresql://", "postgresql+psycopg2://", 1)
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"), store=store, workers=2)
    try:
        yield server.start().uri
    finally:
        server.kill()  # the server and its workers: the process group it started


def test_three_shards_log_to_one_server_at_once_and_nothing_is_lost(tracking_server, tmp_path):
    from mlflow.tracking import MlflowClient

    from t2exp.__main__ import main

    proc = cli(
        main,
        [
            "generator=none",
            "dataset.limit=6",
            "shards=3",
            "hydra/launcher=local_parallel",
            "hydra.launcher.n_jobs=3",
            f"paths.work={tmp_path}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.models={ROOT / '.t2exp_cache' / 'models'}",
            f"tracking.uri={tracking_server}",
            f"hydra.sweep.dir={tmp_path / 'multirun'}",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    client = MlflowClient(tracking_uri=tracking_server)
    exp = client.get_experiment_by_name("t2exp")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    shards = [r for r in runs if "t2exp.shard" in r.data.tags]
    cells = [r for r in runs if r not in parents and r not in shards]
    assert (len(parents), len(cells), len(shards)) == (1, 1, 3), [r.info.run_name for r in runs]
    (cell,) = cells
    assert all(r.info.status == "FINISHED" for r in runs), {r.info.run_name: r.data.tags.get("t2exp.error") for r in runs}
    assert sorted(r.data.tags["t2exp.shard"] for r in shards) == ["0/3", "1/3", "2/3"]
    assert all(r.data.tags["mlflow.parentRunId"] == cell.info.run_id for r in shards)
    # every question counted once: in the cell's metrics and across its shards'
    for subset in ("FinQA", "TAT-DQA"):
        assert cell.data.metrics[f"{subset}/questions"] == 6
        assert sum(r.data.metrics.get(f"{subset}/questions", 0) for r in shards) == 6
    assert "avg/mrr_at_3" in cell.data.metrics and "avg/mrr_at_3" in {m for r in shards for m in r.data.metrics}
    # one trace per question on the cell, and on the shards together
    assert len(client.search_traces(locations=[exp.experiment_id], run_id=cell.info.run_id)) == 12
    assert sum(len(client.search_traces(locations=[exp.experiment_id], run_id=r.info.run_id)) for r in shards) == 12
    assert {a.path for a in client.list_artifacts(cell.info.run_id)} >= {"predictions.jsonl", "metrics.json"}

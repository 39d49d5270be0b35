from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the whole test session (embeddings, indices, LLM calls); models are shared
    with the project's own cache so the offline generator is converted at most once."""
    return tmp_path_factory.mktemp("cache")


def compose_cfg(*overrides: str):
    """The app's config as ``python -m t2exp <overrides>`` composes it (schemas applied)."""
    from hydra import compose, initialize_config_dir

    from t2exp.infra.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def app_overrides(cache: Path, tracking_dir: Path) -> list[str]:
    return [
        f"paths.cache={cache}",
        f"paths.models={ROOT / '.t2exp_cache' / 'models'}",
        f"tracking.uri=sqlite:///{tracking_dir / 'mlflow.db'}",
        f"tracking.artifact_location={tracking_dir / 'artifacts'}",
        f"hydra.run.dir={tracking_dir / 'hydra'}",
        f"hydra.sweep.dir={tracking_dir / 'multirun'}",
    ]


def run_app(args: list[str], cache: Path, tracking_dir: Path, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "t2exp", *args, *app_overrides(cache, tracking_dir)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"t2exp failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def mlflow_runs(tracking_dir: Path, experiment: str = "t2exp"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tracking_dir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


@pytest.fixture
def weaviate_wire():
    """The Weaviate stand-in (tests/weaviate_wire): REST + gRPC on free loopback ports, for one test."""
    pytest.importorskip("weaviate")
    from weaviate_wire import WeaviateWire

    with WeaviateWire() as wire:
        yield wire

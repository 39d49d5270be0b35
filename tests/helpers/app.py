"""The app (``python -m t2exp``) as the tests compose and run it: its config, the overrides that
point it at a test's cache and MLflow store, and a run in this process or as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.command import cli
from helpers.paths import ROOT
from helpers.tracking import seed_tracking


def compose_cfg(*overrides: str):
    """The app's config as ``python -m t2exp <overrides>`` composes it (schemas applied)."""
    from hydra import compose, initialize_config_dir

    from t2exp import config
    from t2exp.infra.paths import CONF_DIR
    from t2exp.pipeline.tuning import register_sweeper

    config.register()
    register_sweeper()  # as the app does: hydra/sweeper=held_out_optuna (conf/experiment/beyond_tune) is found

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def app_overrides(cache: Path, tracking_dir: Path, *, traces: bool = False) -> list[str]:
    """The test's cache and MLflow store. Per-question traces are off unless the test is about them
    (``traces=True``; tests/tracking/test_genai.py, tests/app/test_progress.py): logging them adds noticeably
    to a retrieval run's time."""
    return [
        *([] if traces else ["tracking.traces=false"]),
        f"paths.work={tracking_dir}",  # what else goes under the working directory (a sweep's report)
        f"paths.cache={cache}",
        f"paths.models={ROOT / '.t2exp_cache' / 'models'}",
        f"tracking.uri=sqlite:///{tracking_dir / 'mlflow.db'}",
        f"tracking.artifact_location={tracking_dir / 'artifacts'}",
        f"hydra.run.dir={tracking_dir / 'hydra'}",
        f"hydra.sweep.dir={tracking_dir / 'multirun'}",
    ]


def answering_args(base_url: str, n_questions: int, *extra: str) -> list[str]:
    """A run answering ``n_questions`` FinQA questions (their gold documents as context) with the
    stand-in OpenAI server at ``base_url`` (tests/fakes), one request at a time, one retry, no backoff."""
    return [
        "rag_method=oracle",
        "dataset=finqa",
        f"dataset.limit={n_questions}",
        "generator=openai_compat",
        f"generator.base_url={base_url}",
        "generator.model=fake-model",
        "generator.max_concurrency=1",
        "generator.batch_size=1",
        "generator.max_retries=1",
        "generator.backoff_base=0",
        *extra,
    ]


def run_app(
    args: list[str],
    cache: Path,
    tracking_dir: Path,
    timeout: float = 900,
    check: bool = True,
    *,
    process: bool = False,
    env: dict[str, str] | None = None,
    traces: bool = False,
) -> subprocess.CompletedProcess:
    """``python -m t2exp <args>`` with the test's cache and MLflow store: in this process (the
    entry point ``t2exp.__main__.main`` with this argv, see :func:`cli`), or as a real process
    when the process itself is the subject (``process=True``: signals, a kill, what a fresh
    interpreter reads from its environment). ``timeout`` bounds the real process only. Either way
    it starts in ``tracking_dir``, as a user starts it in their own folder: what the app writes
    under the working directory by default (a sweep's report in ``outputs/reports``) stays there,
    never in the checkout."""
    argv = [*args, *app_overrides(cache, tracking_dir, traces=traces)]
    tracking_dir.mkdir(parents=True, exist_ok=True)
    if check:
        seed_tracking(tracking_dir)
    if process:
        cmd = [sys.executable, "-m", "t2exp", *argv]
        full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", **(env or {})}
        full_env.pop("T2EXP_PARENT_RUN_ID", None)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tracking_dir, env=full_env)
    else:
        from t2exp.__main__ import main

        proc = cli(main, argv, env=env, cwd=tracking_dir, prog="t2exp")
    if check and proc.returncode != 0:
        raise AssertionError(f"t2exp failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc

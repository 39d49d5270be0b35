"""Every use of Hydra's private package ``hydra._internal``, in one place: the command-line parser
Hydra reads ``argv`` with, its basic sweeper (the name a config selects it by, and how it splits a
sweep into jobs), the global Hydra created with the app's search path, the reporter every
Hydra run goes through, and the copy of the ConfigStore it makes at each composition. No other
module of t2exp names ``hydra._internal`` (tests/project/test_layout.py), so a Hydra release that
moves one of these breaks here, in one file."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

# hydra.sweeper._target_ of Hydra's default sweeper (hydra/sweeper=basic)
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def args_parser() -> argparse.ArgumentParser:
    """A new copy of the parser Hydra reads an app's command line with (``-m``, ``--cfg``, ...)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def basic_sweep_jobs(overrides: Sequence[Any]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper makes of parsed ``overrides`` (one batch: no max_batch_size)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    (batch,) = BasicSweeper.split_arguments(list(overrides), None)
    return batch


def expected_jobs(sweep_dir: Path) -> list[list[str]]:
    """The overrides of every job of the sweep in ``sweep_dir``, in job order, as Hydra's basic
    sweeper makes them from its ``multirun.yaml``; [] for another sweeper or no readable file."""
    path = sweep_dir / "multirun.yaml"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return []
    return [list(job) for job in _jobs_of(str(path), stamp)]


@functools.lru_cache(maxsize=8)
def _jobs_of(path: str, stamp: int) -> tuple[tuple[str, ...], ...]:
    """:func:`expected_jobs` of one version (``stamp``) of the file: read once per process, not once per cell run."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    try:
        cfg = OmegaConf.load(path)
        if OmegaConf.select(cfg, "hydra.sweeper._target_") != BASIC_SWEEPER:
            return ()
        params = cfg.hydra.sweeper.get("params")
        plain = cast(dict[str, Any], OmegaConf.to_container(params, resolve=False)) if params else {}
        task = cast(list[str], OmegaConf.to_container(cfg.hydra.overrides.task, resolve=False))  # ${oc.env:...} kept as written
        overrides = [f"{k}={v}" for k, v in plain.items()] + [str(o) for o in task]
        return tuple(tuple(job) for job in basic_sweep_jobs(OverridesParser.create().parse_overrides(overrides)))
    except Exception:  # a multirun.yaml Hydra cannot read back: the jobs that started still tell
        return ()


def task_name(task_function: Callable[..., Any]) -> str:
    """The task name ``@hydra.main`` gives the app of ``task_function`` (its module's last part)."""
    from hydra._internal.utils import detect_calling_file_or_module_from_task_function, detect_task_name

    return detect_task_name(*detect_calling_file_or_module_from_task_function(task_function))


def create_main_hydra(conf_dir: str, job_name: str, prepend: Callable[[Any], None] | None = None) -> None:
    """The global Hydra with the search path a ``@hydra.main`` app of ``conf_dir`` gets;
    ``prepend(search_path)`` adds to that path first (a ``--config-dir``)."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path

    search_path = create_config_search_path(conf_dir)
    if prepend is not None:
        prepend(search_path)
    Hydra.create_main_hydra2(task_name=job_name, config_search_path=search_path)


def share_config_store() -> None:
    """Hydra copies its config repository at every composition (``CachingConfigRepository``, so that
    ``initialize_sources`` leaves the original alone), and with it the ConfigStore singleton and every
    schema stored there: 15 ms a composition in a fresh process, about 40 ms in a long-lived one. The
    store is not what that copy protects (it hands out a copy of a node at each load), so a copy of it
    is the store itself. Idempotent."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.__deepcopy__ = _the_store_itself  # type: ignore[attr-defined]


def _the_store_itself(store: Any, memo: dict[int, Any]) -> Any:
    return store


@contextmanager
def wrapped_run_and_report(wrap: Callable[[Callable[[], Any]], Callable[[], Any]]) -> Iterator[None]:
    """While inside: Hydra's reporter (``run_and_report``, which runs the app and prints its
    errors) runs ``wrap(func)`` instead of ``func``. A Hydra without that reporter is left alone."""
    from hydra._internal import utils

    original = getattr(utils, "run_and_report", None)
    if original is None:
        yield
        return
    utils.run_and_report = lambda func: original(wrap(func))
    try:
        yield
    finally:
        utils.run_and_report = original


@contextmanager
def composed_once() -> Iterator[None]:
    """While inside: Hydra composes each command line once. A plain run is composed three times
    otherwise (the pre-flight check, Hydra's ``get_mode``, its ``run``; a sweep's cells twice each),
    about 0.1 CPU-s each. The same config name, search path, overrides (Hydra's own and the app's,
    each in order), task name, working directory and the environment variables it copies
    (``hydra.job.env_copy``) give the same config: a later request gets a copy of the first one's
    result, after Hydra's check of sweep overrides for its mode, with the ``hydra.mode`` that Hydra's
    run adds applied. A multirun request may take a run's result (it only skips defaults a run would
    refuse as missing)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    original = ConfigLoaderImpl.load_configuration
    memo = _Compositions(original)
    ConfigLoaderImpl.load_configuration = lambda loader, *args, **kwargs: memo.load(loader, *args, **kwargs)  # type: ignore[method-assign]
    try:
        yield
    finally:
        ConfigLoaderImpl.load_configuration = original  # type: ignore[method-assign]


class _Compositions:
    """What :func:`composed_once` has composed: a copy of each config, and the environment variables it copied."""

    def __init__(self, original: Callable[..., Any]) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.original = original
        self.parser = OverridesParser.create()
        self.done: dict[tuple[Any, ...], tuple[Any, dict[str, str | None]]] = {}

    def load(
        self,
        loader: Any,
        config_name: str | None,
        overrides: list[str],
        run_mode: Any,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> Any:
        """``ConfigLoaderImpl.load_configuration`` of ``loader``, from a copy where one is done."""
        import copy
        import os

        from hydra.core.utils import JobRuntime
        from hydra.types import RunMode

        try:
            parsed = self.parser.parse_overrides(list(overrides))
        except Exception:  # Hydra reports it in its own words
            return self.original(loader, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        mode = [o for o in parsed if o.key_or_group == "hydra.mode"]  # what Hydra's run adds: applied to a copy
        rest = [o for o in parsed if o.key_or_group != "hydra.mode"]
        key = (
            tuple((p.provider, p.path) for p in loader.config_search_path.get_path()),
            config_name,
            tuple(o.input_line for o in rest if o.is_hydra_override()),
            tuple(o.input_line for o in rest if not o.is_hydra_override()),
            JobRuntime().get("name"),  # the job's name where the config gives none
            os.getcwd(),
        )
        for kind in [run_mode] + ([RunMode.RUN] if run_mode == RunMode.MULTIRUN else []):
            hit, copied = self.done.get((*key, kind), (None, {}))
            if hit is not None and all(os.environ.get(k) == v for k, v in copied.items()):
                if validate_sweep_overrides:
                    loader.validate_sweep_overrides_legal(overrides=parsed, run_mode=run_mode, from_shell=from_shell)
                cfg = copy.deepcopy(hit)
                if mode:
                    type(loader)._apply_overrides_to_config(mode, cfg)
                    cfg.hydra.overrides.hydra = [o.input_line for o in parsed if o.is_hydra_override()]
                return cfg
        cfg = self.original(loader, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        if not mode:  # with the variables it copied from the environment (hydra.job.env_copy)
            self.done[(*key, run_mode)] = (copy.deepcopy(cfg), {k: os.environ.get(k) for k in cfg.hydra.job.env_copy})
        return cfg

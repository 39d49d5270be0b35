"""The experiment app, ``python -m t2exp <overrides>``: secret overrides moved into the environment (Hydra's
files never hold them), every job's config and local data checked (a bad one: one line, exit 2, nothing
written), then Hydra (configs: ``t2exp.infra.paths.CONF_DIR``)."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn, cast

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from t2exp import config as t2exp_config
from t2exp.cli.argv import hydra_argv
from t2exp.cli.hydra_faults import guard_hydra
from t2exp.errors import ConfigError, T2ExpError, exit_with, one_line, os_error_line
from t2exp.infra.collector import collect_less_often
from t2exp.infra.hydra_internals import BASIC_SWEEPER, args_parser, basic_sweep_jobs, composed_once, task_name
from t2exp.infra.mlflow_store import move_login
from t2exp.infra.paths import CONF_DIR
from t2exp.infra.redaction import has_url_password, install_log_redaction, is_secret_key, redact_text
from t2exp.infra.signals import end_local_workers
from t2exp.pipeline.stop import Interrupted, StoppedCell
from t2exp.pipeline.submit import register_launcher
from t2exp.pipeline.tuning import SWEEPER_CLASS, check_folds, register_sweeper

t2exp_config.register()  # the schemas and resolvers Hydra composes with (importing t2exp registers nothing)
collect_less_often()  # as `t2exp` does: a process that runs cells without it (a Slurm job, a local worker) too
log = logging.getLogger("t2exp")

SECRET_ENV_PREFIX = "T2EXP_SECRET_"
PREFLIGHT_MAX_JOBS = 1000  # larger sweeps are validated per job, after Hydra made the job's directory


def _fail(exc: BaseException, status: int = 2) -> NoReturn:
    exit_with(redact_text(str(exc)), status)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def hydra_main(cfg: DictConfig) -> float | StoppedCell | None:
    from hydra.core.hydra_config import HydraConfig

    from t2exp.pipeline.cell import run
    from t2exp.tracking.callbacks import is_joblib_launcher

    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    try:
        result = run(cfg, overrides)
    except T2ExpError as exc:
        _fail(exc)
    except OSError as exc:  # a full disk, a read-only or misplaced path: the path, the fault, the fix
        exit_with(redact_text(os_error_line(exc)))
    except Interrupted as exc:
        msg = f"interrupted by {exc}"
        if str(exc) == exc.signal_name:  # not explained by the cell: it came before the MLflow run was opened
            msg += " before the run started; nothing to resume"
        print(f"t2exp: {redact_text(msg)}", file=sys.stderr)
        if HydraConfig.initialized() and is_joblib_launcher(HydraConfig.get().launcher):
            # a cell in a loky worker (local_parallel): raising past Hydra would make joblib end every other
            # worker before its answers in flight are written, and Hydra print a traceback; the launcher reads this
            return StoppedCell(exc.signal_name, redact_text(msg))
        sys.exit(exc.exit_status)
    from t2exp.pipeline.cell import objective_value

    try:
        return objective_value(cfg, result.metrics)
    except T2ExpError as exc:
        _fail(exc)
        return None


# --- pre-flight -------------------------------------------------------------------------------------
def move_secret_overrides(argv: list[str], environ: Any = None) -> list[str]:
    """``key=VALUE`` of a secret-named key or a URL with a password becomes ``key=${oc.env:T2EXP_SECRET_KEY}``,
    VALUE going into ``environ`` (default ``os.environ``): Hydra's files never hold it. A tracking server's
    login goes to MLflow's own variables instead (``infra.mlflow_store.move_login``), the URI stays."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    environ = os.environ if environ is None else environ
    out: list[str] = []
    parser = None
    for arg in argv:
        key, sep, value = arg.partition("=")
        secret = is_secret_key(key.lstrip("+~")) or has_url_password(value)
        if arg.startswith("-") or not sep or not secret or value in ("", "null") or "${" in value:
            out.append(arg)
            continue
        parser = parser or OverridesParser.create()
        try:
            (o,) = parser.parse_overrides([arg])
        except Exception:  # not an override Hydra accepts: Hydra reports it
            out.append(arg)
            continue
        if o.is_sweep_override():  # Hydra would write every value to multirun.yaml and each cell's .hydra/
            raise ConfigError(
                f"{o.key_or_group} is invalid as a sweep: a secret cannot be swept, its values would be written in clear to "
                f"Hydra's files; allowed: one key per environment variable, swept by name "
                f"(e.g. {o.key_or_group}_env=KEY_A,KEY_B where the component has one)"
            )
        if o.is_delete():
            out.append(arg)
            continue
        given = str(o.value())
        server = move_login(given, environ) if o.key_or_group == "tracking.uri" else given
        if server != given:  # a tracking server's login: into MLflow's own variables
            out.append(f"{o.get_key_element()}={server}")
            continue
        env = SECRET_ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", o.key_or_group).upper()
        environ[env] = str(o.value())
        out.append(f"{o.get_key_element()}=${{oc.env:{env}}}")
    return out


class _Skip(Exception):
    """The command line is not a plain run/multirun of our config: leave it all to Hydra."""


def _job_overrides(overrides: list[str], multirun: bool) -> tuple[list[list[str]], list[str], DictConfig]:
    """The overrides of every job Hydra will run (basic sweeper); the command line's overrides without
    its sweeps, and their config composed with Hydra's own node (a job of just those overrides has it
    without that node: composed once)."""
    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    parsed = parser.parse_overrides(overrides)
    plain = cast(list[str], [o.input_line for o in parsed if not o.is_sweep_override()])  # parsed from strings: input_line is set
    base = compose("config", overrides=plain, return_hydra_config=True)
    mode = OmegaConf.select(base, "hydra.mode", default=None)
    multirun = multirun or getattr(mode, "name", str(mode)) == "MULTIRUN"
    if not multirun:
        if len(plain) != len(parsed):
            raise _Skip("sweep without --multirun")  # Hydra explains
        return [overrides], plain, base
    sweeper = OmegaConf.select(base, "hydra.sweeper._target_", default=None)
    if sweeper == SWEEPER_CLASS:  # hydra/sweeper=held_out_optuna: its folds, then the job without the searched keys
        check_folds(base, bool(base.hydra.sweeper.get("held_out", True)))
        return [plain], plain, base
    if sweeper != BASIC_SWEEPER:
        raise _Skip("another sweeper")
    params = base.hydra.sweeper.get("params")
    params_dict = cast(dict[str, Any], OmegaConf.to_container(params, resolve=False)) if params else {}
    params_list = [f"{k}={v}" for k, v in params_dict.items()]
    return basic_sweep_jobs(parser.parse_overrides(params_list + overrides)), plain, base


def preflight(argv: list[str]) -> int:
    """Validate every job's config and its local data before Hydra writes anything. Raises
    ``T2ExpError``; returns the number of jobs checked (0 when the command is left to Hydra)."""
    parsed = _app_overrides(argv)
    if parsed is None:
        return 0
    composed = _compose_jobs(*parsed)
    if composed is None:
        return 0
    _check_jobs(*composed)
    return len(composed[0])


def _app_overrides(argv: list[str]) -> tuple[list[str], bool, str | None] | None:
    """The overrides, ``-m`` and ``--config-dir`` of an app command line as Hydra reads them; None for one Hydra
    answers itself (--help, --cfg, --info, another config, a rerun, a config dir not there) or cannot parse."""
    parser = args_parser()

    def _error(message: str) -> NoReturn:
        raise _Skip(message)

    parser.error = _error  # type: ignore[method-assign]
    if any(a in ("--version", "-h", "--help", "-hh", "--hydra-help") for a in argv):
        return None
    try:
        args = parser.parse_args(argv)
    except (_Skip, SystemExit):
        return None
    if args.cfg or args.info or args.shell_completion or args.config_path or args.config_name:
        return None
    if getattr(args, "experimental_rerun", None) or (args.config_dir is not None and not os.path.isdir(args.config_dir)):
        return None
    return list(args.overrides), bool(args.multirun), args.config_dir


def _compose_jobs(overrides: list[str], multirun: bool, config_dir: str | None = None) -> tuple[list[DictConfig], list[list[str]]] | None:
    """Every job's composed config and overrides; None when there are too many to compose up
    front or Hydra should report the problem in its own words (an unknown option, a syntax error)."""
    from hydra import compose

    from t2exp.config.composition import app_context, composition_error  # the typed schema's one line, else None

    cfgs = []
    try:
        with app_context(config_dir, job_name=task_name(hydra_main)):  # the name Hydra's own run composes with
            jobs, plain, base = _job_overrides(overrides, multirun)
            if len(jobs) > PREFLIGHT_MAX_JOBS:
                log.info("pre-flight: %d jobs; each is validated when it starts", len(jobs))
                return None
            for i, job in enumerate(jobs):
                try:
                    cfgs.append(_without_hydra(base) if job == plain else compose("config", overrides=job))
                except Exception as exc:  # Hydra's composition error
                    if len(jobs) == 1:
                        raise
                    # a sweep would run the cells before this one first: stop now
                    detail = str(composition_error(exc) or one_line(exc))
                    raise ConfigError(f"sweep cell #{i} ({' '.join(job)}): {detail}") from None
    except _Skip:
        return None
    except T2ExpError:
        raise
    except Exception as exc:  # a composition error
        if (schema_error := composition_error(exc)) is not None:  # a value the typed schema refuses: one line
            raise schema_error from None
        return None
    return cfgs, jobs


def _without_hydra(cfg: DictConfig) -> DictConfig:
    """``cfg`` as ``hydra.compose`` returns it by default: without Hydra's own node."""
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def _check_jobs(cfgs: list[DictConfig], jobs: list[list[str]]) -> None:
    """The typed schema and the cross-group rules of every job, then each distinct local dataset
    loaded once (a bad file is one line before any work)."""
    from t2exp import config
    from t2exp.data.loader import load_subsets, loader_args, local_files

    datasets: dict[str, dict[str, Any]] = {}
    for cfg, job in zip(cfgs, jobs, strict=True):
        config.check(cfg, job)
        kw = loader_args(cfg)
        datasets.setdefault(json.dumps(kw, sort_keys=True, default=str), kw)
    for kw in datasets.values():
        path = kw.get("path")
        if kw["source"] == "hub" or path is None:
            continue
        if set(local_files(Path(path), kw["subsets"], kw["source"])) != set(kw["subsets"]):
            continue  # some subsets come from the hub (the bundle lacks them): checked when the job loads them
        load_subsets(**kw)


def main() -> None:
    """The experiment app on ``sys.argv[1:]`` (``t2exp.__main__`` answers commands and ``--help`` first)."""
    install_log_redaction()
    register_sweeper()
    register_launcher()
    with composed_once():  # the pre-flight check's configs are the ones Hydra runs
        try:
            sys.argv[1:] = hydra_argv(sys.argv[1:])  # options ahead of the overrides
            sys.argv[1:] = move_secret_overrides(sys.argv[1:])
            preflight(sys.argv[1:])
            from t2exp.pipeline.shard_expand import expand_shards

            sys.argv[1:] = expand_shards(sys.argv[1:], _app_overrides)  # shards=N: a sweep of the cell's N shards
        except T2ExpError as exc:
            _fail(exc)
        try:
            with guard_hydra():  # what Hydra raises itself (its output directory, a stopped sweep): one line too
                hydra_main()
        finally:
            end_local_workers()  # a local_parallel sweep's worker processes end with it

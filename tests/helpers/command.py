"""A command-line entry point run in this process as its console script would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.paths import ROOT


def cli(
    main, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path = ROOT, prog: str = "t2exp", replace_env: bool = False
) -> subprocess.CompletedProcess:
    """A command-line entry point run in this process as its console script would run it: ``argv``
    as ``sys.argv[1:]``, ``env`` added to the environment (``replace_env``: the whole environment),
    ``cwd`` the working directory; its exit
    status (``SystemExit`` or ``main``'s return value), stdout and stderr come back as a
    ``CompletedProcess``. Everything the command changes in the process is put back: argv, the
    environment (a sweep's parent-run id, moved secrets), the working directory, Hydra's global
    state, an MLflow run left active, the signal handlers and the root logger's handlers."""
    import contextlib
    import io
    import logging
    import signal
    from unittest import mock

    from hydra.core.global_hydra import GlobalHydra

    saved_argv, saved_env, saved_cwd = sys.argv[:], dict(os.environ), os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    out, err = io.StringIO(), io.StringIO()
    if replace_env:
        os.environ.clear()
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", **(env or {})})
    os.environ.pop("T2EXP_PARENT_RUN_ID", None)
    sys.argv = [prog, *argv]
    code: int = 0
    # Hydra re-raises instead of printing its one-line error when it believes a debugger is
    # attached, and it takes any trace function (coverage's tracer) for one.
    not_debugging = mock.patch("hydra._internal.utils.is_under_debugger", return_value=False)
    try:
        os.chdir(cwd)
        GlobalHydra.instance().clear()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), not_debugging:
            try:
                ret = main()
                code = ret if isinstance(ret, int) else 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int | None):
                    err.write(f"{exc.code}\n")
    finally:
        import mlflow
        from hydra.core.hydra_config import HydraConfig

        while mlflow.active_run() is not None:
            mlflow.end_run()
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # a job's config (its runtime.cwd: work_dir) does not outlive the command
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for s, h in saved_signals.items():
            signal.signal(s, h)
        for h in root.handlers[:]:
            if h not in saved_handlers:
                root.removeHandler(h)
                h.close()
        for h in saved_handlers:
            if h not in root.handlers:
                root.addHandler(h)
        root.setLevel(saved_level)
    return subprocess.CompletedProcess([prog, *argv], code, out.getvalue(), err.getvalue())

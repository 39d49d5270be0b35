"""What Hydra raises around the app's task (its output directory, ``.hydra/*.yaml``, a failed sweep
cell), as the one line a user reads instead of Hydra's traceback (:func:`guard_hydra`):

- a file-system fault: :func:`t2exp.errors.os_error_line` naming the path, exit 2;
- a ``local_parallel`` sweep sent SIGTERM/SIGINT (passed on to its cells): one line, exit 128 + signal;
- a cell killed by SIGKILL (the OOM killer, joblib's ``TerminatedWorkerError``): one line, resume
  with ``resume=true``, exit 2. Anything else is Hydra's to report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NoReturn

from hydra.experimental.callback import Callback

from t2exp.errors import OS_FAULTS, exit_with, os_error_line
from t2exp.infra.hydra_internals import wrapped_run_and_report
from t2exp.infra.redaction import redact_text
from t2exp.infra.signals import forwarded_signal, signal_exit_status

_OUTPUT_DIR: list[str] = []  # the directory Hydra writes for the run or sweep now starting


class OutputDirCallback(Callback):
    """Remembers the output directory of the run (``hydra.run.dir``) or sweep
    (``hydra.sweep.dir``) Hydra starts: the path a file-system fault there names."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        _OUTPUT_DIR[:] = [str(config.hydra.run.dir)]

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        _OUTPUT_DIR[:] = [str(config.hydra.sweep.dir)]


def _os_fault(exc: BaseException) -> OSError | None:
    """The file-system fault ``exc`` is, or was raised from (``raise ... from``: logging's "Unable to
    configure handler" when Hydra's job log cannot be created)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and (cause.errno in OS_FAULTS or cause.filename is not None):
            return cause
        cause = cause.__cause__
    return None


def _stopped_cell(result: Any) -> Any:
    """A cell of a finished sweep (Hydra's job returns, per batch) that a signal stopped, or None."""
    from t2exp.pipeline.stop import StoppedCell

    batches = result if isinstance(result, list) else []
    for batch in batches:
        for job in batch if isinstance(batch, (list, tuple)) else []:
            value = getattr(job, "_return_value", None)  # the property re-raises a failed job's error
            if isinstance(value, StoppedCell):
                return value
    return None


def _stopped_sweep(signal_name: str) -> NoReturn:
    print(
        f"t2exp: interrupted by {signal_name}: the sweep's cells stopped after their requests in flight, their MLflow "
        "runs and the sweep's parent run are marked KILLED; the predictions so far are kept: run the same command "
        "again to resume",
        file=sys.stderr,
    )
    sys.exit(signal_exit_status(signal_name))


def _report(exc: Exception) -> None:
    """End the process with one line when ``exc`` is one of ours; return to let Hydra report it."""
    stopped = forwarded_signal()
    if stopped is not None:
        _stopped_sweep(stopped)
    if type(exc).__name__ == "TerminatedWorkerError":  # joblib's, when the OS killed a loky worker
        exit_with(
            "a cell process of this hydra/launcher=local_parallel sweep was killed (SIGKILL, e.g. by the out-of-memory "
            "killer) and the sweep stopped; the answers written so far are kept: run the same command with resume=true "
            "(with fewer hydra.launcher.n_jobs if memory ran out)"
        )
    fault = _os_fault(exc)
    if fault is not None:
        if fault.filename is None and _OUTPUT_DIR:
            fault.filename = _OUTPUT_DIR[0]
        exit_with(redact_text(os_error_line(fault)))


def guard_hydra() -> AbstractContextManager[None]:
    """While the app runs under Hydra: its reporter hands our faults to :func:`_report` first."""
    return wrapped_run_and_report(_guarded)


def _guarded(func: Callable[[], Any]) -> Callable[[], Any]:
    """``func`` (the app under Hydra's reporter) with our faults reported first and a stopped
    cell's signal stopping the sweep."""

    def guarded() -> Any:
        try:
            result = func()
        except Exception as exc:
            _report(exc)  # SystemExit is not an Exception: Hydra's reporter lets it through
            raise
        stopped = _stopped_cell(result)
        if stopped is not None:
            _stopped_sweep(forwarded_signal() or stopped.signal_name)
        return result

    return guarded

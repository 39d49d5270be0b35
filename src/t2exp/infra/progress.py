"""What a user sees while a run works: a progress bar (count, rate, ETA) for every stage that can
take more than a few seconds, one log line per finished stage, and library noise turned down.

Bars are tqdm's, on stderr, shown when stderr is a terminal (``T2EXP_PROGRESS=1`` forces them,
``0`` hides them); the finished-stage line is always logged, so a Slurm log or a CI log reads as
a list of stages with their counts and durations.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("t2exp")

PROGRESS_ENV = "T2EXP_PROGRESS"
# loggers whose INFO lines say nothing a t2exp user acts on (model loading, database migrations,
# HTTP requests); their warnings and errors still show
QUIET_LOGGERS = (
    "sentence_transformers",
    "transformers",
    "alembic",
    "mlflow",
    "httpx",
    "httpcore",
    "urllib3",
    "filelock",
    "huggingface_hub",
    "lancedb",
    "numexpr",
)
# the loggers whose INFO lines a run shows; any other library's (an HTTP client's line per request,
# whatever its package is called) only with hydra.verbose
OWN_LOGGERS = ("t2exp", "hydra", "__main__", "root")


def _disable() -> bool | None:
    value = os.environ.get(PROGRESS_ENV, "").strip()
    if value == "0":
        return True
    if value == "1":
        return False
    return None  # tqdm: no bar unless stderr is a terminal


@dataclass
class Stage:
    """A running stage: ``advance(n)`` moves the bar; ``tally(label)`` counts something its
    finished line reports (``3 from the LLM cache``)."""

    name: str
    unit: str
    bar: Any
    started: float = field(default_factory=time.perf_counter)
    done: int = 0
    tallies: dict[str, int] = field(default_factory=dict)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.bar.update(n)

    def tally(self, label: str, n: int = 1) -> None:
        self.tallies[label] = self.tallies.get(label, 0) + n

    @property
    def note(self) -> str:
        return ", ".join(f"{v} {k}" for k, v in self.tallies.items())

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started


@contextmanager
def stage(name: str, total: int | None, unit: str = "item") -> Iterator[Stage]:
    """``with stage("generate FinQA", 6, "answer") as s: ... s.advance()`` — a bar while it runs,
    then ``generate FinQA: 6 answers in 81.2s (13.5s/answer)`` in the log."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=name, unit=f" {unit}", file=sys.stderr, leave=False, dynamic_ncols=True, disable=_disable())
    s = Stage(name, unit, bar)
    ok = False
    try:
        yield s
        ok = True
    finally:
        bar.close()
        dt = s.seconds
        rate = f", {dt / s.done:.1f}s/{unit}" if s.done and dt / s.done >= 0.1 else ""
        plural = unit if s.done == 1 else f"{unit}s"
        end = "" if ok else " (stopped)"
        log.info("%s: %d %s in %.1fs%s%s%s", name, s.done, plural, dt, rate, f"; {s.note}" if s.note else "", end)


class ThirdPartyInfo(logging.Filter):
    """Drops the records below WARNING of every logger outside ``OWN_LOGGERS`` and ``shown`` (the
    loggers ``hydra.verbose`` names); set on the handlers Hydra configured for the job."""

    def __init__(self, shown: Sequence[str] = ()) -> None:
        super().__init__()
        self.shown = tuple(shown)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or _named(record.name, OWN_LOGGERS + self.shown)


def _named(name: str, prefixes: Sequence[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def hydra_verbose() -> bool | list[str]:
    """``hydra.verbose`` of the running job: True (every logger at DEBUG), the logger names it
    lists, or False (also outside a Hydra job)."""
    from hydra.core.hydra_config import HydraConfig

    verbose = HydraConfig.get().verbose if HydraConfig.initialized() else False
    if isinstance(verbose, str):
        return [verbose]
    return [str(v) for v in verbose] if isinstance(verbose, Sequence) else bool(verbose)


def quiet_libraries(verbose: bool | Sequence[str] = False) -> None:
    """Turn the libraries' chatter down to their warnings: model-loading bars and INFO lines, the
    embedded store's "dataset will be created" notices, MLflow's database-migration lines, an HTTP
    client's line per request. ``verbose`` (:func:`hydra_verbose`): True keeps every logger as
    Hydra set it, a list of names keeps those."""
    os.environ.setdefault("LANCEDB_LOG", "error")  # the Rust logger of lancedb (read when it loads)
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # mlflow sets its logger's level from it on import
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if verbose is True:
        return
    shown = () if verbose is False else tuple(verbose)
    for name in QUIET_LOGGERS:
        if not _named(name, shown):
            logging.getLogger(name).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, ThirdPartyInfo) for f in handler.filters):
            handler.addFilter(ThirdPartyInfo(shown))
    # logs a store failure with its traceback before raising it; the run reports it in one line
    # (tracking.mlflow_run: TrackingError)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    if "transformers" in sys.modules:  # else it reads the level when a model loads it (not for cached runs)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    else:
        os.environ["TRANSFORMERS_VERBOSITY"] = "error"

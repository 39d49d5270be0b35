"""What a user sees while a run works: a progress bar (count, rate, ETA) for every stage that can
take more than a few seconds, one log line per finished stage, and library noise turned down.

Bars are tqdm's, on stderr, shown when stderr is a terminal (``T2EXP_PROGRESS=1`` forces them,
``0`` hides them); the finished-stage line is always logged, so a Slurm log or a CI log reads as
a list of stages with their counts and durations. Where no bar is shown, a stage also logs a line
when it starts and at least every ``T2EXP_PROGRESS_EVERY`` seconds (default 30) while it runs:
done/total, rate and ETA.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("t2exp")

PROGRESS_ENV = "T2EXP_PROGRESS"
EVERY_ENV, EVERY = "T2EXP_PROGRESS_EVERY", 30.0  # seconds between a stage's lines where no bar is shown
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


def _every() -> float:
    """``T2EXP_PROGRESS_EVERY`` in seconds (0: a line at every step); the default when unset or no number >= 0."""
    raw = os.environ.get(EVERY_ENV, "").strip()
    try:
        value = float(raw) if raw else EVERY
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        log.warning("%s=%s is invalid: seconds between progress lines, a number >= 0; using %g", EVERY_ENV, raw, EVERY)
        return EVERY
    return value


def _plural(unit: str, n: float) -> str:
    return unit if n == 1 else f"{unit}s"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    return f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class Stage:
    """A running stage: ``advance(n)`` moves the bar; ``tally(label)`` counts something its
    finished line reports (``3 from the LLM cache``). With ``every`` (no bar shown) it logs a
    progress line when ``every`` seconds of ``clock`` have passed since its last one."""

    name: str
    unit: str
    bar: Any
    total: int | None = None
    clock: Callable[[], float] = time.perf_counter
    every: float | None = None
    done: int = 0
    tallies: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.started = self.last = self.clock()
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.bar.update(n)
        self.beat()

    def tally(self, label: str, n: int = 1) -> None:
        self.tallies[label] = self.tallies.get(label, 0) + n

    def beat(self) -> None:
        """The progress line, when it is due."""
        if self.every is None:
            return
        with self._lock:
            now = self.clock()
            if now - self.last < self.every:
                return
            self.last = now
        log.info("%s", self.line(now))

    def due_in(self) -> float:
        return self.last + (self.every or 0.0) - self.clock()

    def line(self, now: float) -> str:
        """``generate FinQA: 2/10 answers, 15.0s/answer, ETA 2m00s``."""
        dt, total = now - self.started, f"/{self.total}" if self.total is not None else ""
        text = f"{self.name}: {self.done}{total} {_plural(self.unit, self.done if self.total is None else self.total)}"
        if not self.done or dt <= 0:
            return text
        per = dt / self.done
        text += f", {per:.1f}s/{self.unit}" if per >= 1 else f", {self.done / dt:.1f} {self.unit}s/s"
        return text + (f", ETA {_duration(per * max(self.total - self.done, 0))}" if self.total is not None else "")

    @property
    def note(self) -> str:
        return ", ".join(f"{v} {k}" for k, v in self.tallies.items())

    @property
    def seconds(self) -> float:
        return self.clock() - self.started


def _tick(s: Stage, stop: threading.Event) -> None:
    """Wakes the stage when its next line is due, however long its current step takes."""
    while not stop.wait(max(s.due_in(), 0.01)):
        s.beat()


@contextmanager
def stage(
    name: str, total: int | None, unit: str = "item", *, clock: Callable[[], float] = time.perf_counter, every: float | None = None
) -> Iterator[Stage]:
    """``with stage("generate FinQA", 6, "answer") as s: ... s.advance()`` — a bar while it runs,
    then ``generate FinQA: 6 answers in 81.2s (13.5s/answer)`` in the log. Where no bar is shown,
    a line at its start and one at least every ``every`` seconds (default: ``T2EXP_PROGRESS_EVERY``)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=name, unit=f" {unit}", file=sys.stderr, leave=False, dynamic_ncols=True, disable=_disable())
    lines = bool(bar.disable)
    s = Stage(name, unit, bar, total, clock, (_every() if every is None else every) if lines else None)
    stop = threading.Event()
    ticker = threading.Thread(target=_tick, args=(s, stop), name=f"progress {name}", daemon=True)
    if lines:
        log.info("%s", s.line(s.started))
        if s.every:
            ticker.start()
    ok = False
    try:
        yield s
        ok = True
    finally:
        stop.set()
        if ticker.is_alive():
            ticker.join()  # its last line comes before the stage's end line
        bar.close()
        dt = s.seconds
        rate = f", {dt / s.done:.1f}s/{unit}" if s.done and dt / s.done >= 0.1 else ""
        end = "" if ok else " (stopped)"
        log.info("%s: %d %s in %.1fs%s%s%s", name, s.done, _plural(unit, s.done), dt, rate, f"; {s.note}" if s.note else "", end)


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

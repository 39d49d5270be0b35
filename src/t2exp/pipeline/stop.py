"""A request to stop a run at its next safe point (after the predictions in flight are written,
so a resumed run repeats no finished work), and the SIGTERM/SIGINT handling that makes it
(:class:`StopOnSignals`). The app makes one per cell and hands it to the steps; nothing is shared
through module state."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from t2exp.infra.signals import Interrupted, handle_stop_signals

__all__ = ["DEFAULT_STOP_GRACE", "STOP_GRACE_ENV", "Interrupted", "StopOnSignals", "StopRequest", "StoppedCell", "stop_grace"]

log = logging.getLogger("t2exp")

# seconds between the first SIGTERM/SIGINT (finish the requests in flight, write their
# predictions, stop) and the hard stop; a second signal stops at once
STOP_GRACE_ENV = "T2EXP_STOP_GRACE_SECONDS"
DEFAULT_STOP_GRACE = 5.0


class StoppedCell:
    """What a sweep cell stopped by a signal returns to its launcher in another process
    (``hydra/launcher=local_parallel``): a cell that raised instead would print as a traceback
    there. The launching process ends the sweep with one line and 128 + the signal
    (``t2exp.cli.hydra_faults``)."""

    def __init__(self, signal_name: str, message: str) -> None:
        self.signal_name, self.message = signal_name, message

    def __repr__(self) -> str:
        return f"StoppedCell({self.signal_name!r})"


class StopRequest:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._signal = "SIGTERM"
        self._held = 0  # depth of atomic() blocks in progress
        self._deferred: str | None = None  # a stop-now that arrived inside one

    def request(self, signal_name: str) -> None:
        self._signal = signal_name
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def signal_name(self) -> str | None:
        """The signal that asked this run to stop, or None."""
        return self._signal if self._event.is_set() else None

    def check(self) -> None:
        """At a safe point: raise ``Interrupted`` if a stop was requested."""
        if self._event.is_set():
            raise Interrupted(self._signal)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """A block a stop-now does not cut in two (a prediction's line and the record that it was
        written: cut between them, the answer was written twice). A stop-now signal that arrives
        inside raises ``Interrupted`` when the block ends."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held and self._deferred is not None:
            name, self._deferred = self._deferred, None
            raise Interrupted(name)

    def defer_stop_now(self, signal_name: str) -> bool:
        """For the signal handler: inside :meth:`atomic`, remember a stop-now and return True
        (the block raises it at its end); outside, return False (stop at once)."""
        if self._held:
            self._deferred = signal_name
            return True
        return False


def stop_grace() -> float:
    """``$T2EXP_STOP_GRACE_SECONDS`` (default 5; not a number: the default)."""
    try:
        return max(0.0, float(os.environ.get(STOP_GRACE_ENV, DEFAULT_STOP_GRACE)))
    except ValueError:
        return DEFAULT_STOP_GRACE


class StopOnSignals:
    """SIGTERM/SIGINT while a cell runs: the first asks :attr:`stop` to stop at its next safe point
    (after the predictions in flight are written and their LLM answers cached) and arms a timer; a
    second signal, or the timer after ``$T2EXP_STOP_GRACE_SECONDS`` (default 5), raises
    ``Interrupted`` at once (inside a :meth:`StopRequest.atomic` block: at its end). Once the cell
    is :meth:`closing` its MLflow run, a signal only asks to stop: the run is closed first.

    ``with StopOnSignals() as signals:`` installs the handler (main thread only: elsewhere nothing
    is installed, :func:`t2exp.infra.signals.handle_stop_signals`) and puts the previous ones back."""

    def __init__(self, stop: StopRequest | None = None) -> None:
        self.stop = stop or StopRequest()
        self.grace = stop_grace()
        self._closing = False
        self._timer: threading.Timer | None = None
        self._put_back = lambda: None

    def install(self) -> StopOnSignals:
        self._put_back = handle_stop_signals(self._handle)
        return self

    def closing(self) -> None:
        """The cell is closing its MLflow run: a signal from now on waits for that."""
        self._closing = True

    def restore(self) -> None:
        """Cancel the grace timer and put the previous handlers back."""
        if self._timer is not None:
            self._timer.cancel()
        self._put_back()

    def __enter__(self) -> StopOnSignals:
        return self.install()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.restore()

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self._closing:  # closing the MLflow run: finish that first
            log.warning("%s received while closing the run; exiting when done", name)
            self.stop.request(name)
            return
        if self.stop.is_set() or self.grace <= 0:
            if self.stop.defer_stop_now(name):  # inside an atomic block: raised at its end
                return
            raise Interrupted(name)
        self.stop.request(name)
        log.warning("%s: stopping after the requests in flight (at most %.0fs; send %s again to stop now)", name, self.grace, name)
        self._timer = threading.Timer(self.grace, os.kill, (os.getpid(), signum))
        self._timer.daemon = True
        self._timer.start()

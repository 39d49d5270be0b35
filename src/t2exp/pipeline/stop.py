"""A request to stop a run at its next safe point (after the predictions in flight are written,
so a resumed run repeats no finished work). The app makes one per run and hands it to the signal
handler and to the experiment; nothing is shared through module state."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(BaseException):
    """The run was stopped by SIGTERM/SIGINT; its MLflow run is closed as KILLED."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


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

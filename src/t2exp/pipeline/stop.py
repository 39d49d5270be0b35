"""A request to stop a run at its next safe point (after the predictions in flight are written,
so a resumed run repeats no finished work). The app makes one per run and hands it to the signal
handler and to the experiment; nothing is shared through module state."""

from __future__ import annotations

import threading


class Interrupted(BaseException):
    """The run was stopped by SIGTERM/SIGINT; its MLflow run is closed as KILLED."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class StopRequest:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._signal = "SIGTERM"

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

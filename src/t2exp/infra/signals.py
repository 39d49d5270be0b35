"""SIGINT and SIGTERM, the two signals every t2exp process stops on: one way to handle both for a
while and put the previous handlers back."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """A run was stopped by SIGTERM/SIGINT (``signal_name``); its MLflow run is closed as KILLED."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def handle_stop_signals(handler: Callable[[int, Any], Any]) -> Callable[[], None]:
    """``handler`` for SIGTERM and SIGINT; returns what puts the previous handlers back. Handlers
    can only be set from the main thread: elsewhere nothing is set and the restore does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore

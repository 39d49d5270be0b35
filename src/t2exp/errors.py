"""User-facing errors: one line that names the field, the bad value and the fix."""

from __future__ import annotations

import sys
from typing import NoReturn


class T2ExpError(Exception):
    """Base class; ``__main__`` prints ``str(exc)`` on one line and exits non-zero."""


class ConfigError(T2ExpError):
    pass


class DataError(T2ExpError):
    pass


class TrackingError(T2ExpError):
    """The MLflow tracking store cannot be reached or written; the run's predictions are kept."""


class RemoteError(T2ExpError):
    """A remote endpoint (embedding, generation, reranking) failed after bounded retries."""


def exit_with(message: str, status: int = 2) -> NoReturn:
    """End the process with the one line a user reads (``t2exp: error: ...``); callers redact first."""
    print(f"t2exp: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(status)

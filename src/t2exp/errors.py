"""User-facing errors: one line that names the field, the bad value and the fix."""

from __future__ import annotations


class T2ExpError(Exception):
    """Base class; ``__main__`` prints ``str(exc)`` on one line and exits non-zero."""


class ConfigError(T2ExpError):
    pass


class DataError(T2ExpError):
    pass


class RemoteError(T2ExpError):
    """A remote endpoint (embedding, generation, reranking) failed after bounded retries."""

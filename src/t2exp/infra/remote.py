"""Calls to remote services (hosted embedders, rerankers, OpenAI-protocol generators), once for all:
:func:`resolve_api_key` (a missing key is one ``ConfigError`` line), :func:`import_client` (lazy;
a missing library says ``pip install 't2exp[api]'``) and :func:`with_retries`, the one bounded retry
loop (the libraries' own are off): a retryable :class:`Failure` (408/429/5xx, no response, or what
``classify`` says) is retried ``max_retries`` times with :func:`backoff_delay`, then one
:class:`RemoteError` line; ``abort`` ends it at once.
"""

from __future__ import annotations

import importlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from t2exp.errors import ConfigError, RemoteError, one_line
from t2exp.infra.redaction import register_secret

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 429})  # plus every 5xx


@dataclass(frozen=True)
class Failure:
    """A remote call that did not succeed, as far as retrying and reporting care."""

    status: int | str  # HTTP status, or "connection" / "timeout" when no response came back
    message: str
    retry_after: float | None = None
    retry: bool | None = None  # the caller's decision; None: by status (408, 429, 5xx, no response)
    hint: str = ""  # what the user can do about it

    @property
    def retryable(self) -> bool:
        if self.retry is not None:
            return self.retry
        if isinstance(self.status, str):
            return True
        return self.status in RETRYABLE_STATUSES or self.status >= 500


def import_client(module: str, provider: str, group: str = "embedder") -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{group} provider={provider!r} needs the {module.split('.')[0]} client library: pip install 't2exp[api]'"
        ) from None


def resolve_api_key(name: str, api_key: str | None, envs: Sequence[str], group: str = "embedder") -> str:
    if api_key:
        register_secret(api_key)
        return api_key
    for env in envs:
        value = os.environ.get(env)
        if value:
            register_secret(value)  # whatever the variable's name: its value is redacted everywhere
            return value
    raise ConfigError(f"{group}={name} needs an API key: set {' or '.join(envs)} (or {group}.api_key)")


def transport_errors() -> tuple[type[BaseException], ...]:
    """httpx / httpx2 transport errors (connect, read, timeouts) from whichever is installed."""
    found: list[type[BaseException]] = []
    for mod_name in ("httpx", "httpx2"):
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        cls = getattr(mod, "TransportError", None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def transport_failure(exc: BaseException) -> Failure | None:
    errors = transport_errors()
    if errors and isinstance(exc, errors):
        kind = "timeout" if "timeout" in type(exc).__name__.lower() else "connection"
        return Failure(kind, f"{type(exc).__name__}: {exc}")
    return None


def retry_after_seconds(headers: Any) -> float | None:
    """The ``Retry-After`` header in seconds when it is a number (HTTP dates are ignored)."""
    try:
        value = headers.get("retry-after") if headers is not None else None
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


class _RemoteFailure(Exception):
    """A classified remote failure inside the retry loop (carries the ``Failure``)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class _Abandoned(Exception):
    """``abort`` was set while waiting to retry."""


def _classified(call: Callable[[], Any], classify: Callable[[BaseException], Failure | None]) -> Callable[[], Any]:
    """``call``, its remote failures raised as ``_RemoteFailure`` (anything else as it is)."""

    def attempt() -> Any:
        try:
            return call()
        except Exception as exc:  # classified here, re-raised when not remote
            failure = classify(exc) or transport_failure(exc)
            if failure is None:
                raise
            raise _RemoteFailure(failure) from exc

    return attempt


def _failure_of(state: Any) -> Failure:
    """The Failure of a tenacity attempt that failed."""
    exc = state.outcome.exception() if state.outcome is not None else None
    assert isinstance(exc, _RemoteFailure)
    return exc.failure


def with_retries(
    call: Callable[[], Any],
    classify: Callable[[BaseException], Failure | None],
    max_retries: int,
    delay: Callable[[int, float | None], float],
    error_line: Callable[[Failure, int | None], str],
    label: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
    abort: threading.Event | None = None,
) -> Any:
    """Run ``call`` under tenacity: retryable failures are retried ``max_retries`` times with the
    ``delay(attempt, retry_after)`` backoff, then ``RemoteError(error_line(failure, attempts))`` is
    raised. ``classify`` reads an exception as a Failure (None: not a remote failure, re-raised as
    is). Once ``abort`` is set (another call of the batch failed for good) no retry is made and a
    wait is cut short: ``error_line(failure, None)``."""
    import tenacity

    def retryable(exc: BaseException) -> bool:
        return isinstance(exc, _RemoteFailure) and exc.failure.retryable and not (abort is not None and abort.is_set())

    def wait(seconds: float) -> None:
        if abort is not None:
            if abort.wait(seconds):
                raise _Abandoned()
        elif seconds > 0:
            sleep(seconds)

    last: list[BaseException | None] = []  # the failure a wait follows (a wait always follows one)

    def log_retry(state: tenacity.RetryCallState) -> None:
        f = _failure_of(state)
        last[:] = [state.outcome.exception() if state.outcome is not None else None]
        pause = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "%s: %s (%s); retry %d/%d in %.1fs", label, f.status, one_line(f.message, 120), state.attempt_number, max_retries, pause
        )

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max_retries + 1),
        retry=tenacity.retry_if_exception(retryable),
        wait=lambda state: delay(state.attempt_number - 1, _failure_of(state).retry_after),
        sleep=wait,
        before_sleep=log_retry,
        reraise=True,
    )
    try:
        return retrying(_classified(call, classify))
    except (_Abandoned, _RemoteFailure) as exc:
        failed = last[0] if isinstance(exc, _Abandoned) else exc
        assert isinstance(failed, _RemoteFailure)
        abandoned = abort is not None and abort.is_set()
        attempts = None if abandoned else retrying.statistics.get("attempt_number", 1)
        raise RemoteError(error_line(failed.failure, attempts)) from failed.__cause__


class Retrying:
    """A remote client's bounded retries: its ``max_retries``, ``backoff_base`` and ``backoff_max``
    (seconds), and :meth:`retried`, which counts each request sent (``requests_sent``)."""

    max_retries: int
    backoff_base: float
    backoff_max: float
    requests_sent: int = 0

    def retried(
        self,
        call: Callable[[], Any],
        classify: Callable[[BaseException], Failure | None],
        error_line: Callable[[Failure, int | None], str],
        label: str,
        abort: threading.Event | None = None,
    ) -> Any:
        def counted() -> Any:
            self.requests_sent += 1
            return call()

        def delay(attempt: int, retry_after: float | None) -> float:
            return backoff_delay(attempt, retry_after, self.backoff_base, self.backoff_max)

        return with_retries(counted, classify, self.max_retries, delay, error_line, label, abort=abort)


def backoff_delay(attempt: int, retry_after: float | None, base: float, cap: float) -> float:
    """Exponential backoff with jitter, at least ``Retry-After`` (both capped at ``cap``)."""
    wait = min(cap, base * (2.0**attempt))
    if retry_after is not None:
        wait = max(wait, min(retry_after, cap))
    return wait * (1.0 + 0.25 * random.random()) if wait > 0 else 0.0

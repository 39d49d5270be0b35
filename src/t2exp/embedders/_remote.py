"""Shared plumbing for embedders behind a remote API (OpenAI, Gemini, Cohere).

A provider module subclasses :class:`RemoteEmbedder` and supplies three things: a client built
from the resolved key, one batch call (texts → list of vectors), and a way to read an exception
as an HTTP status. Everything else lives here once:

- the API key is resolved in the constructor (argument, else the provider's env vars) and a
  missing key is a one-line :class:`ConfigError` before any request;
- client libraries are imported lazily (``import t2exp`` never needs them); a missing one is a
  :class:`ConfigError` that says ``pip install 't2exp[api]'``;
- the client libraries' own retries are switched off, so the retry count is ours and bounded
  (tenacity runs the loop):
  408/429/5xx and transport errors are retried ``max_retries`` times with exponential backoff
  (``backoff_base * 2**attempt`` seconds, capped at ``backoff_max``); other statuses fail at once;
  either way the user sees one :class:`RemoteError` line (provider, status, base_url, hint);
- texts are sent in batches of ``batch_size`` (checked against the provider's per-request
  limit), vectors come back float32 and unit length, in input order.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from t2exp.errors import ConfigError, RemoteError
from t2exp.infra.cache import content_key

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 429})  # plus every 5xx


@dataclass(frozen=True)
class Failure:
    """A remote call that did not succeed, as far as retrying and reporting care."""

    status: int | str  # HTTP status, or "connection" / "timeout" when no response came back
    message: str
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        if isinstance(self.status, str):
            return True
        return self.status in RETRYABLE_STATUSES or self.status >= 500


def import_client(module: str, provider: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"embedder provider={provider!r} needs the {module.split('.')[0]} client library: pip install 't2exp[api]'"
        ) from None


def resolve_api_key(name: str, api_key: str | None, envs: Sequence[str]) -> str:
    if api_key:
        return api_key
    for env in envs:
        value = os.environ.get(env)
        if value:
            return value
    raise ConfigError(f"embedder={name} needs an API key: set {' or '.join(envs)} (or embedder.api_key)")


def batched(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit L2 norm (all-zero rows stay zero instead of becoming NaN)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0.0, 1.0, norms)).astype(np.float32)


def estimate_tokens(text: str) -> int:
    """Cheap token estimate (~4 characters per token for English BPE vocabularies); not exact."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


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


def one_line(text: object, limit: int = 200) -> str:
    s = re.sub(r"\s+", " ", str(text)).strip()
    return s if len(s) <= limit else s[: limit - 1] + "…"


class _RemoteFailure(Exception):
    """A classified remote failure inside the retry loop (carries the ``Failure``)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def with_retries(
    call: Callable[[], Any],
    classify: Callable[[BaseException], Failure | None],
    max_retries: int,
    delay: Callable[[int, float | None], float],
    sleep: Callable[[float], None],
    error_line: Callable[[Failure, int], str],
    label: str,
) -> Any:
    """Run ``call`` under tenacity: retryable failures are retried ``max_retries`` times with the
    ``delay(attempt, retry_after)`` backoff, then one ``RemoteError`` line is raised.

    ``classify`` reads an exception as a Failure (None: not a remote failure, re-raised as is).
    """
    import tenacity

    def attempt() -> Any:
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classified here, re-raised when not remote
            failure = classify(exc) or transport_failure(exc)
            if failure is None:
                raise
            raise _RemoteFailure(failure) from exc

    def failure_of(state: tenacity.RetryCallState) -> Failure:
        exc = state.outcome.exception() if state.outcome is not None else None
        assert isinstance(exc, _RemoteFailure)
        return exc.failure

    def log_retry(state: tenacity.RetryCallState) -> None:
        f = failure_of(state)
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("%s: %s (%s); retry %d/%d in %.1fs", label, f.status, one_line(f.message, 120),
                    state.attempt_number, max_retries, wait)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max_retries + 1),
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, _RemoteFailure) and e.failure.retryable),
        wait=lambda state: delay(state.attempt_number - 1, failure_of(state).retry_after),
        sleep=lambda seconds: sleep(seconds) if seconds > 0 else None,
        before_sleep=log_retry,
        reraise=True,
    )
    try:
        return retrying(attempt)
    except _RemoteFailure as exc:
        raise RemoteError(error_line(exc.failure, retrying.statistics.get("attempt_number", 1))) from exc.__cause__


def backoff_delay(attempt: int, retry_after: float | None, base: float, cap: float) -> float:
    """Exponential backoff with jitter, at least ``Retry-After`` (both capped at ``cap``)."""
    wait = min(cap, base * (2.0**attempt))
    if retry_after is not None:
        wait = max(wait, min(retry_after, cap))
    return wait * (1.0 + 0.25 * random.random()) if wait > 0 else 0.0


class RemoteEmbedder:
    """Base class: batching, bounded retries, normalisation, fingerprint, token estimate."""

    provider: ClassVar[str]
    key_envs: ClassVar[tuple[str, ...]]
    max_batch: ClassVar[int]
    default_base_url: ClassVar[str]

    def __init__(
        self,
        name: str,
        model: str,
        *,
        provider: str,
        dim: int = 0,
        max_tokens: int = 512,
        batch_size: int = 64,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 5,
        timeout: float = 60.0,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        query_template: str = "{text}",
        document_template: str = "{text}",
        dimensions: int | None = None,
        revision: str | None = None,
    ) -> None:
        self.name = name
        self.model_id = model
        self.dim = int(dimensions or dim or 0)
        self._configured_dim = self.dim  # the fingerprint must not change when dim is learnt
        self.dimensions = int(dimensions) if dimensions is not None else None
        self.max_tokens = int(max_tokens)
        self.batch_size = int(batch_size)
        self.base_url = base_url
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.query_template = query_template
        self.document_template = document_template
        self.revision = revision
        self.requests_sent = 0
        self._sleep: Callable[[float], None] = time.sleep
        key = resolve_api_key(name, api_key, self.key_envs)
        self._client = self._make_client(key)

    # --- provider hooks -------------------------------------------------------------------------

    def _make_client(self, api_key: str) -> Any:
        raise NotImplementedError

    def _embed_batch(self, texts: list[str], role: str) -> list[Sequence[float]]:
        """One request; ``role`` is "query" or "document". Returns one vector per text, in order."""
        raise NotImplementedError

    def _failure(self, exc: BaseException) -> Failure | None:
        """Read a client exception as a Failure; None means "not a remote failure" (re-raised)."""
        raise NotImplementedError

    def _role_options(self) -> dict[str, object]:
        """Provider options that change the vectors (task types, input types); part of the fingerprint."""
        return {}

    # --- Embedder protocol ------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        return content_key(
            "remote", self.provider, self.model_id, self._configured_dim, self.dimensions, self.revision, self._role_options()
        )[:16]

    @property
    def endpoint(self) -> str:
        return self.base_url or self.default_base_url

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed([self.query_template.format(text=t) for t in texts], "query")

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed([self.document_template.format(text=t) for t in texts], "document")

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Estimated tokens per document (characters / 4); the provider's tokenizer is not called."""
        return [estimate_tokens(self.document_template.format(text=t)) for t in texts]

    # --- internals --------------------------------------------------------------------------------

    def _embed(self, texts: list[str], role: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim or 1), dtype=np.float32)
        rows: list[np.ndarray] = []
        for batch in batched(texts, self.batch_size):
            vectors = self._with_retries(partial(self._embed_batch, batch, role))
            if len(vectors) != len(batch):
                raise RemoteError(
                    f"embedder={self.name} ({self.provider}): {self.endpoint} returned {len(vectors)} vectors for "
                    f"{len(batch)} inputs; hint: check that embedder.base_url serves the {self.provider} API"
                )
            arr = np.asarray(vectors, dtype=np.float32)
            if arr.ndim != 2:
                raise RemoteError(f"embedder={self.name} ({self.provider}): {self.endpoint} returned ragged vectors")
            if not self.dim:
                self.dim = int(arr.shape[1])
            elif arr.shape[1] != self.dim:
                raise ConfigError(
                    f"embedder.dim={self.dim}: {self.provider} model {self.model_id} returned {arr.shape[1]}-d vectors"
                )
            rows.append(unit_rows(arr))
        return np.concatenate(rows, axis=0)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        return backoff_delay(attempt, retry_after, self.backoff_base, self.backoff_max)

    def _with_retries(self, call: Callable[[], list[Sequence[float]]]) -> list[Sequence[float]]:
        def count_and_call() -> list[Sequence[float]]:
            self.requests_sent += 1
            return call()

        return with_retries(
            count_and_call, self._failure, self.max_retries, self._delay, self._sleep, self._error_line,
            f"{self.provider} embeddings",
        )

    def _error_line(self, failure: Failure, attempts: int) -> str:
        status = failure.status
        what = f"HTTP {status} from" if isinstance(status, int) else f"{status} error reaching"
        return (
            f"embedder={self.name} ({self.provider} {self.model_id}): {what} {self.endpoint} after {attempts} "
            f"attempt(s): {one_line(failure.message)}; hint: {self._hint(status)}"
        )

    def _hint(self, status: int | str) -> str:
        if isinstance(status, str):
            return "cannot reach the endpoint; check embedder.base_url and the network (or raise embedder.timeout)"
        if status in (401, 403):
            return f"the API key was refused; check {' / '.join(self.key_envs)} (or embedder.api_key)"
        if status == 404:
            return f"check embedder.model={self.model_id!r} and embedder.base_url"
        if status == 429:
            return "rate limited or out of quota; lower embedder.batch_size, raise embedder.max_retries/backoff_max, or wait"
        if status >= 500 or status == 408:
            return "provider-side failure; retry later (embeddings already computed are cached)"
        return "the provider rejected the request; check embedder.model, embedder.dimensions and the input sizes"

"""Shared plumbing for embedders behind a remote API: a provider module subclasses
:class:`RemoteEmbedder` with a client built from the key, one batch call and a reader of its
exceptions. Here once: the key resolved up front (a missing one is a one-line ``ConfigError``),
lazy client imports, bounded retries ending in one ``RemoteError`` line, batches of ``batch_size``,
float32 unit-length vectors in input order.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any, ClassVar

import numpy as np

from t2exp.errors import ConfigError, RemoteError, one_line
from t2exp.infra.cache import content_key
from t2exp.infra.remote import Failure, Retrying, resolve_api_key

log = logging.getLogger(__name__)


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


class RemoteEmbedder(Retrying):
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
        provider: str = "",  # the config's key; the class names its provider
        dim: int = 0,
        max_tokens: int = 512,
        batch_size: int = 32,
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
        options: dict[str, object] | None = None,
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
        self.options = options or {}  # provider options that change the vectors (task types): in the fingerprint
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

    # --- Embedder protocol ------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        return content_key("remote", self.provider, self.model_id, self._configured_dim, self.dimensions, self.revision, self.options)[:16]

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
            vectors = self.retried(partial(self._embed_batch, batch, role), self._failure, self._error_line, f"{self.provider} embeddings")
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
                raise ConfigError(f"embedder.dim={self.dim}: {self.provider} model {self.model_id} returned {arr.shape[1]}-d vectors")
            rows.append(unit_rows(arr))
        return np.concatenate(rows, axis=0)

    def _error_line(self, failure: Failure, attempts: int | None) -> str:
        status = failure.status
        what = f"HTTP {status} from" if isinstance(status, int) else f"{status} error reaching"
        return (
            f"embedder={self.name} ({self.provider} {self.model_id}): {what} {self.endpoint} after {attempts} "
            f"attempt(s): {one_line(failure.message, 200)}; hint: {self._hint(status)}"
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

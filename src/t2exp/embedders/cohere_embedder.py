"""Cohere embeddings (``POST {base_url}/v2/embed``) through ``cohere.ClientV2``.

Request ``{model, texts, input_type, embedding_types: ["float"], truncate?, output_dimension?}``;
response ``{id, embeddings: {float: [[...]]}, texts, meta, response_type}``. ``CO_API_URL`` is
read by the SDK at import time, so the base URL is always passed explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from t2exp.embedders._remote import RemoteEmbedder
from t2exp.errors import one_line
from t2exp.infra.remote import Failure, import_client, retry_after_seconds

INPUT_TYPES = ("search_query", "search_document", "classification", "clustering")
TRUNCATE = (None, "NONE", "START", "END")


def cohere_failure(exc: BaseException, api_error: type[Any]) -> Failure | None:
    """Read a cohere ``ApiError`` as a Failure (status, its ``message``, ``Retry-After``)."""
    if isinstance(exc, api_error) and getattr(exc, "status_code", None) is not None:
        body = exc.body
        msg = body.get("message") if isinstance(body, dict) and body.get("message") else body
        return Failure(int(exc.status_code), one_line(msg, 200), retry_after_seconds(exc.headers))
    return None


class CohereEmbedder(RemoteEmbedder):
    provider = "cohere"
    key_envs = ("CO_API_KEY",)
    max_batch = 96  # texts per /v2/embed call
    default_base_url = "https://api.cohere.com"

    def __init__(
        self,
        name: str,
        model: str,
        *,
        query_input_type: str = "search_query",
        document_input_type: str = "search_document",
        truncate: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, model, options={"query": query_input_type, "document": document_input_type, "truncate": truncate}, **kwargs)

    @property
    def endpoint(self) -> str:
        return (self.base_url or os.environ.get("CO_API_URL") or self.default_base_url).rstrip("/")

    def _make_client(self, api_key: str) -> Any:
        cohere = import_client("cohere", self.provider)
        self._api_error = import_client("cohere.core.api_error", self.provider).ApiError
        # max_retries=0: the bounded retry loop in RemoteEmbedder is the only one.
        return cohere.ClientV2(
            api_key=api_key,
            base_url=self.endpoint,
            timeout=self.timeout,
            max_retries=0,
            log_warning_experimental_features=False,
        )

    def _embed_batch(self, texts: list[str], role: str) -> list[Sequence[float]]:
        kwargs: dict[str, Any] = {
            "model": self.model_id,
            "texts": texts,
            "input_type": self.options[role],
            "embedding_types": ["float"],
        }
        if self.options["truncate"] is not None:
            kwargs["truncate"] = self.options["truncate"]
        if self.dimensions is not None:
            kwargs["output_dimension"] = self.dimensions
        resp = self._client.embed(**kwargs)
        return list(resp.embeddings.float_ or [])

    def _failure(self, exc: BaseException) -> Failure | None:
        return cohere_failure(exc, self._api_error)

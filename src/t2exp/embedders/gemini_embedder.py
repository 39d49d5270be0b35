"""Gemini embeddings through ``google-genai``.

``google-generativeai`` is end-of-life (support ended
2025-11-30) and pins protobuf<6, so this uses its successor ``google-genai``. For the Gemini
Developer API, ``client.models.embed_content(contents=[...])`` sends one
``POST {base_url}/{api_version}/models/{model}:batchEmbedContents`` with
``{"requests": [{"model": "models/…", "content": {"parts": [{"text": …}], "role": "user"},
"taskType": …, "outputDimensionality": …}]}`` and reads ``{"embeddings": [{"values": [...]}]}``.
Vertex AI mode is not used (``vertexai=False`` regardless of GOOGLE_GENAI_USE_VERTEXAI).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from t2exp.embedders._remote import RemoteEmbedder
from t2exp.errors import one_line
from t2exp.infra.remote import Failure, import_client, retry_after_seconds

TASK_TYPES = (
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
    "CODE_RETRIEVAL_QUERY",
)


class GeminiEmbedder(RemoteEmbedder):
    provider = "gemini"
    key_envs = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    max_batch = 100  # requests per batchEmbedContents call
    default_base_url = "https://generativelanguage.googleapis.com"

    def __init__(
        self, name: str, model: str, *, query_task_type: str = "RETRIEVAL_QUERY", document_task_type: str = "RETRIEVAL_DOCUMENT", **kw: Any
    ) -> None:
        super().__init__(name, model, options={"query": query_task_type, "document": document_task_type}, **kw)

    def _make_client(self, api_key: str) -> Any:
        genai = import_client("google.genai", self.provider)
        self._types = import_client("google.genai.types", self.provider)
        self._errors = import_client("google.genai.errors", self.provider)
        options = self._types.HttpOptions(
            base_url=self.base_url,
            timeout=int(self.timeout * 1000),  # milliseconds
            # attempts=1: no SDK retries (and no implicit connection retries); ours are bounded.
            retry_options=self._types.HttpRetryOptions(attempts=1),
        )
        # Keep the reference: google-genai closes the HTTP client when the Client is collected.
        return genai.Client(api_key=api_key, vertexai=False, http_options=options)

    @property
    def endpoint(self) -> str:
        return (self.base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or self.default_base_url).rstrip("/")

    def _embed_batch(self, texts: list[str], role: str) -> list[Sequence[float]]:
        config = self._types.EmbedContentConfig(
            task_type=self.options[role],
            output_dimensionality=self.dimensions,
        )
        resp = self._client.models.embed_content(model=self.model_id, contents=texts, config=config)
        return [e.values or [] for e in resp.embeddings or []]

    def _failure(self, exc: BaseException) -> Failure | None:
        if isinstance(exc, self._errors.APIError):
            headers = getattr(getattr(exc, "response", None), "headers", None)
            msg = exc.message or exc.status or str(exc)
            return Failure(int(exc.code), one_line(msg, 200), retry_after_seconds(headers))
        return None

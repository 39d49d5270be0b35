"""Cohere Rerank (``POST {base_url}/v2/rerank``) through the official ``cohere.ClientV2``.

Request ``{model, query, documents: [str], top_n?, max_tokens_per_doc?}``; response
``{id, results: [{index, relevance_score}], meta}``. The client's own retries are off; ours are
bounded (429/5xx/transport) and end in one ``RemoteError`` line.
"""

from __future__ import annotations

from typing import Any

from t2exp.embedders.cohere_embedder import cohere_failure
from t2exp.errors import one_line
from t2exp.infra.remote import Failure, Retrying, import_client, resolve_api_key
from t2exp.rerankers import TruncationCounter


class CohereReranker(Retrying):
    provider = "cohere"
    key_envs = ("CO_API_KEY",)

    def __init__(
        self,
        name: str,
        model: str = "rerank-v3.5",
        *,
        provider: str = "cohere",
        base_url: str | None = None,
        api_key: str | None = None,
        max_chars: int | None = None,
        max_tokens_per_doc: int | None = None,
        max_retries: int = 5,
        timeout: float = 60.0,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
    ) -> None:
        self.name = name
        self.model_id = model
        self.base_url = (base_url or "https://api.cohere.com").rstrip("/")
        self.max_tokens_per_doc = max_tokens_per_doc
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.trunc = TruncationCounter(max_chars)
        key = resolve_api_key(name, api_key, self.key_envs, group="reranker")
        cohere = import_client("cohere", provider, group="reranker")
        self._api_error = import_client("cohere.core.api_error", provider, group="reranker").ApiError
        self._client: Any = cohere.ClientV2(
            api_key=key, base_url=self.base_url, timeout=timeout, max_retries=0, log_warning_experimental_features=False
        )

    def _failure(self, exc: BaseException) -> Failure | None:
        return cohere_failure(exc, self._api_error)

    def _error_line(self, failure: Failure, attempts: int | None) -> str:
        return (
            f"reranker={self.name} (cohere {self.model_id}): {failure.status} from {self.base_url} after "
            f"{attempts} attempt(s): {one_line(failure.message, 200)}; hint: check CO_API_KEY, reranker.model and reranker.base_url"
        )

    def score(self, query: str, documents: list[str]) -> list[float]:
        docs = self.trunc.apply(documents)
        if not docs:
            return []
        kwargs: dict[str, Any] = {"model": self.model_id, "query": query, "documents": docs, "top_n": len(docs)}
        if self.max_tokens_per_doc:
            kwargs["max_tokens_per_doc"] = self.max_tokens_per_doc
        resp = self.retried(lambda: self._client.rerank(**kwargs), self._failure, self._error_line, "cohere rerank")
        scores = [float("-inf")] * len(docs)
        for r in resp.results:
            scores[r.index] = float(r.relevance_score)
        return scores

    def stats(self) -> dict[str, float]:
        return {**self.trunc.stats(), "requests": self.requests_sent}

"""OpenAI embeddings (``POST {base_url}/embeddings``) through the ``openai`` client.

Also talks to any OpenAI-compatible embeddings server (vLLM, TEI, LiteLLM, Azure-style proxies)
via ``base_url``; set ``revision`` to something that names the served weights so that their
vectors do not share cache entries with OpenAI's model of the same name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from t2exp.embedders._remote import RemoteEmbedder
from t2exp.errors import one_line
from t2exp.infra.remote import Failure, import_client, retry_after_seconds


class OpenAIEmbedder(RemoteEmbedder):
    provider = "openai"
    key_envs = ("OPENAI_API_KEY",)
    max_batch = 2048  # inputs per request (OpenAI also caps a request at 300k tokens in total)
    default_base_url = "https://api.openai.com/v1"

    def _make_client(self, api_key: str) -> Any:
        self._openai = import_client("openai", self.provider)
        # max_retries=0: the bounded retry loop in RemoteEmbedder is the only one.
        return self._openai.OpenAI(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout)

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def _embed_batch(self, texts: list[str], role: str) -> list[Sequence[float]]:
        kwargs: dict[str, Any] = {"model": self.model_id, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        resp = self._client.embeddings.create(**kwargs)
        return [item.embedding for item in sorted(resp.data, key=lambda d: d.index)]

    def _failure(self, exc: BaseException) -> Failure | None:
        o = self._openai
        if isinstance(exc, o.APIStatusError):
            body = exc.body
            msg = body.get("message") if isinstance(body, dict) and body.get("message") else exc.message
            return Failure(exc.status_code, one_line(msg, 200), retry_after_seconds(exc.response.headers))
        if isinstance(exc, o.APITimeoutError):
            return Failure("timeout", f"no response within {self.timeout:g}s")
        if isinstance(exc, o.APIConnectionError):
            return Failure("connection", one_line(exc.__cause__ or exc, 200))
        return None

"""Fake OpenAI, Gemini and Cohere embedding endpoints that check the request shape.

Vectors are derived from the text (``fake_vector``) and deliberately not unit length, so a
test can check order and normalisation against ``unit(fake_vector(text, dim))``.

Wire formats (as the real client libraries send them, checked against openai 3.x, google-genai
3.x and cohere 7.x):

- OpenAI ``POST /v1/embeddings``, ``Authorization: Bearer KEY``,
  ``{model, input: [str], encoding_format?: float|base64, dimensions?, user?}`` →
  ``{object: list, data: [{object: embedding, index, embedding}], model, usage}``
  (``embedding`` is a base64 string of little-endian float32 when ``encoding_format=base64``).
- Gemini ``POST /{v1|v1beta}/models/{model}:batchEmbedContents``, ``x-goog-api-key: KEY``,
  ``{requests: [{model: models/{model}, content: {parts: [{text}], role?}, taskType?, title?,
  outputDimensionality?}]}`` → ``{embeddings: [{values: [...]}]}``; errors
  ``{error: {code, message, status}}``.
- Cohere ``POST /v2/embed``, ``Authorization: Bearer KEY``,
  ``{model, texts, input_type, embedding_types: [float], truncate?, output_dimension?}`` →
  ``{id, embeddings: {float: [[...]]}, texts, meta, response_type: embeddings_by_type}``;
  errors ``{message}``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from typing import Any

import numpy as np

from . import FakeHTTPServer, Recorded, Reply, Route, expect


def fake_vector(text: str, dim: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return (np.random.default_rng(seed).standard_normal(dim) * 3.0 + 0.5).astype(np.float32).tolist()


def unit(vectors: Any) -> np.ndarray:
    a = np.asarray(vectors, dtype=np.float64)
    return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)


def _tokens(texts: list[str]) -> int:
    return sum(max(1, len(t) // 4) for t in texts)


def _check_keys(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = set(obj) - allowed
    expect(not extra, f"{where}: unexpected fields {sorted(extra)}")


class OpenAIFake(FakeHTTPServer):
    """OpenAI-style server (``/v1`` prefix); more routes can be added to ``self.routes``."""

    max_inputs = 2048

    def __init__(self, model: str = "text-embedding-3-large", api_key: str = "sk-test", dim: int = 8, shuffle: bool = False) -> None:
        super().__init__()
        self.model = model
        self.api_key = api_key
        self.dim = dim
        self.shuffle = shuffle  # answer data[] in reverse order (clients must sort by index)
        self.routes[("POST", "/v1/embeddings")] = self.embeddings

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _auth(self, rec: Recorded) -> Reply | None:
        if rec.headers.get("authorization") != f"Bearer {self.api_key}":
            error = {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}
            return Reply(401, {"error": error})
        return None

    def embeddings(self, rec: Recorded) -> Reply:
        if (denied := self._auth(rec)) is not None:
            return denied
        b = rec.body
        expect(isinstance(b, dict), "body must be a JSON object")
        _check_keys(b, {"model", "input", "encoding_format", "dimensions", "user"}, "embeddings request")
        expect(b.get("model") == self.model, f"model={b.get('model')!r}, expected {self.model!r}")
        texts = b.get("input")
        expect(isinstance(texts, list) and texts, "input must be a non-empty list of strings")
        expect(all(isinstance(t, str) and t for t in texts), "input items must be non-empty strings")
        expect(len(texts) <= self.max_inputs, f"input has {len(texts)} items; at most {self.max_inputs}")
        fmt = b.get("encoding_format", "float")
        expect(fmt in ("float", "base64"), f"encoding_format={fmt!r}")
        dim = b.get("dimensions", self.dim)
        expect(isinstance(dim, int) and 1 <= dim <= self.dim, f"dimensions={dim!r}")
        data = []
        for i, t in enumerate(texts):
            vec = fake_vector(t, self.dim)[:dim]
            emb: Any = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode() if fmt == "base64" else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        if self.shuffle:
            data.reverse()
        n = _tokens(texts)
        return Reply(200, {"object": "list", "data": data, "model": self.model, "usage": {"prompt_tokens": n, "total_tokens": n}})


GEMINI_TASK_TYPES = {
    "TASK_TYPE_UNSPECIFIED",
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
    "CODE_RETRIEVAL_QUERY",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class GeminiFake(FakeHTTPServer):
    max_requests = 100
    _path = re.compile(r"^/(v1|v1beta)/models/([^/:]+):batchEmbedContents$")

    def __init__(self, model: str = "text-embedding-004", api_key: str = "gm-test", dim: int = 8) -> None:
        super().__init__()
        self.model = model
        self.api_key = api_key
        self.dim = dim

    @property
    def base_url(self) -> str:
        return self.url

    def match(self, method: str, path: str) -> Route | None:
        return self.batch_embed if method == "POST" and self._path.match(path) else None

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(status, {"error": {"code": status, "message": message, "status": _GEMINI_STATUS.get(status, "UNKNOWN")}})

    def batch_embed(self, rec: Recorded) -> Reply:
        if rec.headers.get("x-goog-api-key") != self.api_key:
            return self.error_reply(400, "API key not valid. Please pass a valid API key.")
        m = self._path.match(rec.path.split("?", 1)[0])
        assert m is not None
        expect(m.group(2) == self.model, f"path model {m.group(2)!r}, expected {self.model!r}")
        b = rec.body
        expect(isinstance(b, dict), "body must be a JSON object")
        _check_keys(b, {"requests"}, "batchEmbedContents request")
        reqs = b.get("requests")
        expect(isinstance(reqs, list) and reqs, "requests must be a non-empty list")
        expect(len(reqs) <= self.max_requests, f"{len(reqs)} requests; at most {self.max_requests} per batch")
        out = []
        for i, r in enumerate(reqs):
            expect(isinstance(r, dict), f"requests[{i}] must be an object")
            _check_keys(r, {"model", "content", "taskType", "title", "outputDimensionality"}, f"requests[{i}]")
            expect(r.get("model") == f"models/{self.model}", f"requests[{i}].model={r.get('model')!r}, expected 'models/{self.model}'")
            content = r.get("content")
            expect(isinstance(content, dict), f"requests[{i}].content must be an object")
            _check_keys(content, {"parts", "role"}, f"requests[{i}].content")
            parts = content.get("parts")
            one_part = isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], dict)
            expect(one_part, f"requests[{i}].content.parts must hold one part")
            _check_keys(parts[0], {"text"}, f"requests[{i}].content.parts[0]")
            text = parts[0].get("text")
            expect(isinstance(text, str) and text, f"requests[{i}].content.parts[0].text must be a non-empty string")
            task = r.get("taskType")
            expect(task is None or task in GEMINI_TASK_TYPES, f"requests[{i}].taskType={task!r}")
            dim = r.get("outputDimensionality", self.dim)
            expect(isinstance(dim, int) and 1 <= dim <= self.dim, f"requests[{i}].outputDimensionality={dim!r}")
            out.append({"values": fake_vector(text, self.dim)[:dim]})
        return Reply(200, {"embeddings": out})


COHERE_INPUT_TYPES = {"search_query", "search_document", "classification", "clustering", "image"}


class CohereFake(FakeHTTPServer):
    max_texts = 96

    def __init__(self, model: str = "embed-v4.0", api_key: str = "co-test", dim: int = 8) -> None:
        super().__init__()
        self.model = model
        self.api_key = api_key
        self.dim = dim
        self.routes[("POST", "/v2/embed")] = self.embed

    @property
    def base_url(self) -> str:
        return self.url

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(status, {"id": str(uuid.uuid4()), "message": message})

    def embed(self, rec: Recorded) -> Reply:
        if rec.headers.get("authorization") != f"Bearer {self.api_key}":
            return self.error_reply(401, "invalid api token")
        b = rec.body
        expect(isinstance(b, dict), "body must be a JSON object")
        allowed = {"model", "texts", "input_type", "embedding_types", "truncate", "output_dimension", "max_tokens", "priority"}
        _check_keys(b, allowed, "embed request")
        expect(b.get("model") == self.model, f"model={b.get('model')!r}, expected {self.model!r}")
        texts = b.get("texts")
        expect(isinstance(texts, list) and texts and all(isinstance(t, str) for t in texts), "texts must be a non-empty list of strings")
        expect(len(texts) <= self.max_texts, f"{len(texts)} texts; at most {self.max_texts} per call")
        expect(b.get("input_type") in COHERE_INPUT_TYPES, f"input_type={b.get('input_type')!r}")
        expect(b.get("embedding_types") == ["float"], f"embedding_types={b.get('embedding_types')!r}; this fake serves ['float']")
        expect(b.get("truncate") in (None, "NONE", "START", "END"), f"truncate={b.get('truncate')!r}")
        dim = b.get("output_dimension", self.dim)
        expect(isinstance(dim, int) and 1 <= dim <= self.dim, f"output_dimension={dim!r}")
        return Reply(
            200,
            {
                "id": str(uuid.uuid4()),
                "embeddings": {"float": [fake_vector(t, self.dim)[:dim] for t in texts]},
                "texts": texts,
                "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": _tokens(texts)}},
                "response_type": "embeddings_by_type",
            },
        )

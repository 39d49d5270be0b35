"""Persistent, content-addressed embedding cache around any Embedder.

Key = sha256(embedder fingerprint, role, template, text). Missing vectors are computed in chunks
and committed after each chunk, so a killed indexing job resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from t2exp.embedders import Embedder
from t2exp.infra.cache import KVCache, content_key


class CachedEmbedder:
    def __init__(self, inner: Embedder, cache: KVCache, chunk: int = 256) -> None:
        self.inner = inner
        self.cache = cache
        self.chunk = chunk
        self.computed = 0

    def __getattr__(self, item: str):  # name, dim, max_tokens, ...; count_tokens kept in the cache
        value = getattr(self.inner, item)
        return self._kept_counts(value) if item == "count_tokens" else value

    def _kept_counts(self, count: Callable[[list[str]], list[int]]) -> Callable[[list[str]], list[int]]:
        """The inner ``count_tokens`` of documents, each count kept beside the vectors: a run whose
        counts and vectors are all cached loads no tokenizer (nor its model)."""

        def counts(texts: list[str]) -> list[int]:
            fp, tpl = self.inner.fingerprint, self._template("document")
            keys = [content_key(fp, "tokens", tpl, t) for t in texts]
            found = self.cache.get_many(keys)
            missing = [i for i, k in enumerate(keys) if k not in found]
            if missing:
                new = {keys[i]: str(n).encode() for i, n in zip(missing, count([texts[i] for i in missing]), strict=True)}
                self.cache.put_many(new)
                found.update(new)
            return [int(found[k]) for k in keys]

        return counts

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def _template(self, role: str) -> str:
        return getattr(self.inner, f"{role}_template", "{text}")

    def _embed(self, role: str, texts: list[str]) -> np.ndarray:
        fp, tpl = self.inner.fingerprint, self._template(role)
        keys = [content_key(fp, role, tpl, t) for t in texts]
        found = self.cache.get_many(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        fn = self.inner.embed_queries if role == "query" else self.inner.embed_documents
        vectors: dict[str, np.ndarray] = {k: np.frombuffer(v, dtype=np.float32) for k, v in found.items()}
        todo = list(dict.fromkeys(keys[i] for i in missing))
        text_of = {keys[i]: texts[i] for i in missing}
        for start in range(0, len(todo), self.chunk):
            batch = todo[start : start + self.chunk]
            vecs = np.asarray(fn([text_of[k] for k in batch]), dtype=np.float32)
            self.cache.put_many({k: v.tobytes() for k, v in zip(batch, vecs, strict=False)})
            vectors.update(zip(batch, vecs, strict=False))
            self.computed += len(batch)
        if not texts:
            return np.zeros((0, getattr(self.inner, "dim", 0) or 1), dtype=np.float32)
        out = np.stack([vectors[k] for k in keys]).astype(np.float32)
        if getattr(self.inner, "dim", 0) in (0, None):
            self.inner.dim = out.shape[1]
        return out

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed("query", texts)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed("document", texts)

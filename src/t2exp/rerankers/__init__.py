"""Rerankers: score (query, document) pairs; higher is more relevant.

- ``cross_encoder``: sentence-transformers ``CrossEncoder`` (the paper: ms-marco-MiniLM-L-6-v2).
- ``chunk_maxsim`` (offline): embedding rescoring — each candidate document is split into
  passages that fit the embedder's window and scored by its best passage (max cosine). The
  first stage embeds only the first ``max_tokens`` of a document; this sees all of it.
- ``cohere``: Cohere Rerank through the official client (``ClientV2.rerank``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Reranker(Protocol):
    name: str

    def score(self, query: str, documents: list[str]) -> list[float]: ...

    def stats(self) -> dict[str, float]: ...


class TruncationCounter:
    """Counts documents cut to ``max_chars`` before reranking."""

    def __init__(self, max_chars: int | None) -> None:
        self.max_chars = max_chars
        self.seen = 0
        self.truncated = 0

    def apply(self, docs: list[str]) -> list[str]:
        self.seen += len(docs)
        if not self.max_chars:
            return docs
        out = []
        for d in docs:
            if len(d) > self.max_chars:
                self.truncated += 1
                d = d[: self.max_chars]
            out.append(d)
        return out

    def stats(self) -> dict[str, float]:
        return {"docs_scored": self.seen, "docs_truncated": self.truncated}

"""Offline reranker: embedding rescoring by the best-matching passage of each document.

Documents are split into overlapping word windows that fit the embedder (``chunk_words``), every
passage is embedded (through the shared embedding cache), and a document's score is
``max_passage cos(query, passage)`` blended with its whole-document score. It is not a
cross-encoder; it fixes the first stage's blind spot: the dense index only sees a document's first
``max_tokens`` tokens (256 for MiniLM), while T²-RAGBench documents average ~1,200 tokens.
"""

from __future__ import annotations

import numpy as np

from t2exp.rerankers import TruncationCounter


def split_passages(text: str, words: int, stride: int) -> list[str]:
    toks = text.split()
    if len(toks) <= words:
        return [text]
    return [" ".join(toks[i : i + words]) for i in range(0, max(1, len(toks) - words + stride), stride)]


class ChunkMaxSimReranker:
    def __init__(
        self, name: str = "chunk_maxsim", chunk_words: int = 120, stride: int = 90, max_chars: int | None = None, doc_weight: float = 0.0
    ) -> None:
        self.name = name
        self.chunk_words = chunk_words
        self.stride = stride
        self.doc_weight = doc_weight
        self.trunc = TruncationCounter(max_chars)
        self.embedder = None  # bound by the experiment (the run's embedder, cached)

    def bind(self, embedder) -> None:
        self.embedder = embedder

    def score(self, query: str, documents: list[str]) -> list[float]:
        if self.embedder is None:
            raise RuntimeError("chunk_maxsim reranker used before an embedder was bound")
        docs = self.trunc.apply(documents)
        if not docs:
            return []
        q = self.embedder.embed_queries([query])[0]
        passages = [split_passages(d, self.chunk_words, self.stride) for d in docs]
        flat = [p for ps in passages for p in ps]
        vecs = self.embedder.embed_documents(flat)
        sims = vecs @ q
        out, i = [], 0
        for ps in passages:
            s = float(np.max(sims[i : i + len(ps)]))
            i += len(ps)
            out.append(s)
        if self.doc_weight:
            whole = self.embedder.embed_documents(docs) @ q
            out = [(1 - self.doc_weight) * s + self.doc_weight * float(w) for s, w in zip(out, whole, strict=False)]
        return out

    def stats(self) -> dict[str, float]:
        return self.trunc.stats()

"""Base RAG: dense top-k by cosine similarity of question and document embeddings."""

from __future__ import annotations

from t2exp.methods import RetrievingMethod, dense_rankings


class Base(RetrievingMethod):
    def retrieve(self, questions, index, k):
        qv = index.embedder.embed_queries(self.queries(questions))
        return dense_rankings(index.store.dense(qv, k))

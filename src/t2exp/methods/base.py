"""Base RAG: dense top-k by cosine similarity of question and document embeddings."""

from __future__ import annotations

from t2exp.methods import RetrievingMethod


class Base(RetrievingMethod):
    def retrieve(self, questions, index, k):  # noqa: ANN001, ANN201
        qv = index.embedder.embed_queries(self.queries(questions))
        return index.store.dense(qv, k)

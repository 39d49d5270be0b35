"""No retrieval: the generator answers from its parameters alone."""

from __future__ import annotations


class PretrainedOnly:
    needs_index = False
    needs_generator = False
    needs_reranker = False

    def __init__(self, name: str = "pretrained_only") -> None:
        self.name = name

    def prepare(self, subset, services):
        return None

    def retrieve(self, questions, index, k):
        return None

    def contexts(self, question, hits, index, k):
        return []

    def stats(self) -> dict[str, float]:
        return {}

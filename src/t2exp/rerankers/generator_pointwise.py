"""A second stage by the run's own generator: pointwise LLM relevance grading.

Not a trained reranker: the generator (the offline Qwen2.5-Coder-1.5B by default, any configured
generator otherwise) is asked, for each first-stage candidate, for a 0-10 grade of how likely the
document (cut to ``max_chars``) holds what the question needs (``prompts/rerank_pointwise.j2``).
The grade is the score; an unreadable reply scores -1, so it sorts last; equal grades keep the
first stage's order. Every call goes through the run's LLM cache, so a re-run grades nothing again.
A trained cross-encoder is ``reranker=cross_encoder`` (the hub's ms-marco-MiniLM-L-6-v2).
"""

from __future__ import annotations

import re
from typing import Any

from t2exp.generators import Sampling
from t2exp.rerankers import TruncationCounter

_GRADE = re.compile(r"\b(10|[0-9])\b")


def parse_grade(text: str) -> float:
    """The first integer 0-10 in a reply, else -1."""
    m = _GRADE.search(text or "")
    return float(m.group(1)) if m else -1.0


class GeneratorReranker:
    needs_generator = True

    def __init__(
        self, name: str = "generator_pointwise", max_chars: int | None = 3000, prompt: str = "rerank_pointwise", max_tokens: int = 4
    ) -> None:
        self.name = name
        self.prompt = prompt
        self.sampling = Sampling(temperature=0.0, max_tokens=max_tokens)
        self.trunc = TruncationCounter(max_chars)
        self.generator: Any = None  # bound by the method (the run's cached generator)
        self.prompts: Any = None
        self.unreadable = 0

    def bind_generator(self, generator: Any, prompts: Any) -> None:
        self.generator, self.prompts = generator, prompts

    def score(self, query: str, documents: list[str]) -> list[float]:
        if self.generator is None:
            raise RuntimeError("generator_pointwise reranker used before a generator was bound")
        docs = self.trunc.apply(documents)
        messages = [[{"role": "user", "content": self.prompts.render(self.prompt, question=query, document=d)}] for d in docs]
        grades = [parse_grade(g.text) for g in self.generator.generate(messages, self.sampling)]
        self.unreadable += sum(1 for g in grades if g < 0)
        return grades

    def stats(self) -> dict[str, float]:
        return {**self.trunc.stats(), "unreadable_grades": float(self.unreadable)}

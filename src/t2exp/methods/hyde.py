"""HyDE: the generator writes a hypothetical report passage (text + a markdown table) for the
question (``prompts/hyde.j2``); its embedding (optionally averaged with the question's) is the
dense query. Passages go through the shared LLM cache.
"""

from __future__ import annotations

import numpy as np

from t2exp.methods import RetrievingMethod, Services, dense_rankings


class HyDE(RetrievingMethod):
    needs_generator = True

    def __init__(self, name: str = "hyde", question_weight: float = 0.0, prompt: str = "hyde") -> None:
        super().__init__(name)
        self.prompt = prompt  # the template in prompts/ (hyde_paper: the authors' plain request)
        self.question_weight = question_weight
        self.services: Services | None = None
        self.passages: dict[str, str] = {}

    def prepare(self, subset, services):
        self.services = services
        return super().prepare(subset, services)

    def hypothetical(self, questions) -> list[str]:
        s = self.services
        assert s is not None and s.generator is not None, "prepare() sets the services, with a generator"
        prompts = [[{"role": "user", "content": s.prompts.render(self.prompt, question=q.question)}] for q in questions]
        gens = s.generate_aux(prompts, f"hyde passages ({questions[0].subset})" if questions else "hyde passages", "passage")
        return [g.text.strip() for g in gens]

    def query_vectors(self, questions, index) -> np.ndarray:
        passages = self.hypothetical(questions)
        self.passages.update({q.id: p for q, p in zip(questions, passages, strict=False)})
        pv = index.embedder.embed_queries([p or q.question for p, q in zip(passages, questions, strict=False)])
        if self.question_weight > 0:
            qv = index.embedder.embed_queries(self.queries(questions))
            pv = (1 - self.question_weight) * pv + self.question_weight * qv
            pv = pv / np.maximum(np.linalg.norm(pv, axis=1, keepdims=True), 1e-12)
        return pv

    def retrieve(self, questions, index, k):
        return dense_rankings(index.store.dense(self.query_vectors(questions, index), k))

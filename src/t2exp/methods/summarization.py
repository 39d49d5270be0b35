"""Summary-based methods. Every corpus document is summarised once by the generator
(``prompts/summarize.j2``) through the shared LLM cache, so summaries are computed once per
(corpus, generator) and shared by both methods; the summaries are embedded and indexed.

- ``summarization``: retrieve on summaries, generate from the summaries.
- ``sumcontext``: retrieve on summaries, generate from the original full documents.
"""

from __future__ import annotations

from t2exp.index import documents
from t2exp.index.build import build_index
from t2exp.methods import RetrievingMethod, dense_rankings


def summarize_corpus(subset, services) -> dict[str, str]:
    docs = sorted(subset.corpus, key=lambda d: d.context_id)
    prompts = [
        [{"role": "user", "content": services.prompts.render("summarize", document=documents.render(d, services.variant))}] for d in docs
    ]
    gens = services.generate_aux(prompts, f"summarise {subset.name}", "summary")
    return {d.context_id: (g.text.strip() or d.text) for d, g in zip(docs, gens, strict=False)}


class _SummaryIndexed(RetrievingMethod):
    needs_generator = True
    generate_from = "summary"

    def prepare(self, subset, services):
        self.query = services.query
        summaries = summarize_corpus(subset, services)
        return build_index(
            subset,
            services.embedder,
            services.store_factory(),
            services.variant,
            services.lock_dir,
            texts=summaries,
            key_suffix="+summary-" + services.generator.fingerprint[:8],
        )

    def retrieve(self, questions, index, k):
        return dense_rankings(index.store.dense(index.embedder.embed_queries(self.queries(questions)), k))

    def contexts(self, question, hits, index, k):
        ids = [cid for cid, _ in (hits or [])[:k]]
        if self.generate_from == "summary":
            return [index.texts[cid] for cid in ids]
        return [index.docs[cid].text for cid in ids]


class Summarization(_SummaryIndexed):
    generate_from = "summary"


class SumContext(_SummaryIndexed):
    generate_from = "document"

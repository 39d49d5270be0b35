"""RAG methods: how a question's contexts are chosen. One module per method, built from the
``_target_`` of its ``conf/rag_method/*.yaml`` (its schema: ``t2exp.config.components``).

A method
- ``prepare(subset, services)``: returns the ``Index`` it retrieves from (or ``None``);
- ``retrieve(questions, index, depth)``: per question a ranked list of ``(context_id, score)`` of
  up to ``depth`` entries (the run's ``max(k, 5)``, so Recall@5 is defined), or ``None`` when the
  method does no retrieval (batched over all questions of a subset); a procedure that depends on
  the run's k itself reads ``Services.k`` in ``prepare``;
- ``contexts(question, hits, index, k)``: the texts handed to the generator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from t2exp.data.records import Question, Subset
from t2exp.errors import ConfigError
from t2exp.index.build import Index, build_index
from t2exp.index.store import Hits
from t2exp.methods.queries import QueryBuilder

if TYPE_CHECKING:
    from t2exp.answering.prompts import PromptLibrary
    from t2exp.embedders.cached import CachedEmbedder
    from t2exp.generators import Generation, Sampling
    from t2exp.generators.cached import CachedGenerator
    from t2exp.index.store import Store


class Ranking(list):
    """A method's ranked hits ``[(context_id, score), ...]`` (a list, usable as ``Hits``) and, for
    the documents its dense retriever returned, their dense similarities (``dense``). Fused or
    reranked scores never overwrite them; the T²-RAGBench authors' metrics re-sort by them
    (``*_paper_order`` in t2exp.evaluation.metrics). ``depth``: how many documents the method
    ranked at most (a reranker's candidates), when that is fewer than asked; a Recall@r past it is
    undefined, not 0."""

    def __init__(
        self, hits: Iterable[tuple[str, float]] = (), dense: Iterable[tuple[str, float]] | dict[str, float] = (), depth: int | None = None
    ) -> None:
        super().__init__(hits)
        self.dense: dict[str, float] = dict(dense)
        self.depth = depth

    @classmethod
    def of(cls, hits: Iterable[tuple[str, float]]) -> Ranking:
        """``hits`` as a Ranking: itself when it is one, else plain hits with no dense similarities
        and no depth limit (a plugin method may return plain ``Hits``)."""
        return hits if isinstance(hits, Ranking) else cls(hits)


def dense_rankings(hits_per_question: list[Hits]) -> list[Ranking]:
    """Rankings of a dense retriever: each hit's score is its dense similarity."""
    return [Ranking(h, dense=h) for h in hits_per_question]


@dataclass
class Services:
    """What methods may use: built once per run by the experiment."""

    embedder: CachedEmbedder | None  # every vector goes through the one embedding cache
    store_factory: Callable[[], Store] | None
    generator: CachedGenerator | None  # every LLM call goes through the one cache
    prompts: PromptLibrary
    variant: str
    lock_dir: Path
    aux_sampling: Sampling | None = None  # sampling for auxiliary LLM calls (HyDE, summaries)
    query: QueryBuilder = field(default_factory=QueryBuilder)  # the retrieval query of a question (query.*)
    # the run's k: procedures defined by it (the authors' hybrid's dense top-k, the reranker's 3k
    # candidates) read it here; retrieve's own argument is the depth the metrics read (>= k).
    # None: the depth asked (a caller outside a run)
    k: int | None = None

    def open(self) -> None:
        """Open (and check) the caches before the run's first step."""
        for cached in (self.embedder, self.generator):
            if cached is not None:
                cached.cache.open()

    def close(self) -> None:
        """Close the caches: their files are free once the run is done."""
        for cached in (self.embedder, self.generator):
            if cached is not None:
                cached.cache.close()

    def generate_aux(self, prompts: list[Any], stage: str, unit: str) -> list[Any]:
        """Auxiliary LLM calls (HyDE passages, summaries) with ``aux_sampling``, shown as a stage."""
        from t2exp.infra import progress

        assert self.generator is not None, "a method that generates declares needs_generator"
        assert self.aux_sampling is not None, "the experiment sets aux_sampling (generator.aux_sampling or its default)"
        with progress.stage(stage, len(prompts), unit) as bar:

            def arrived(i: int, g: Generation) -> None:
                bar.advance()
                if g.cached:
                    bar.tally("from the LLM cache")

            return list(self.generator.generate(prompts, self.aux_sampling, on_result=arrived))


@runtime_checkable
class RagMethod(Protocol):
    name: str
    needs_index: bool  # prepare builds an index: the run builds an embedder and a store
    needs_generator: bool  # it calls the generator itself (HyDE, summaries)
    needs_reranker: bool  # its constructor takes the `reranker` group's component

    def prepare(self, subset: Subset, services: Services) -> Index | None: ...

    def retrieve(self, questions: Sequence[Question], index: Index | None, k: int) -> list[Hits] | None: ...

    def contexts(self, question: Question, hits: Hits | None, index: Index | None, k: int) -> list[str]: ...

    def stats(self) -> dict[str, float]: ...


class RetrievingMethod:
    """Shared behaviour: index the corpus (document variant from config); generation gets the
    original documents of the top-k hits."""

    needs_index = True
    needs_generator = False
    needs_reranker = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.query = QueryBuilder()

    def queries(self, questions: Sequence[Question]) -> list[str]:
        """The retrieval query of each question (``query.template`` / ``query.instruction``)."""
        return self.query.texts(questions)

    def prepare(self, subset: Subset, services: Services) -> Index | None:
        if services.embedder is None or services.store_factory is None:
            raise ConfigError(f"rag_method={self.name} needs an embedder and a store")
        self.query = services.query
        return build_index(subset, services.embedder, services.store_factory(), services.variant, services.lock_dir)

    def contexts(self, question: Question, hits: Hits | None, index: Index | None, k: int) -> list[str]:
        assert index is not None
        return [index.docs[cid].text for cid, _ in (hits or [])[:k]]

    def stats(self) -> dict[str, float]:
        return {}

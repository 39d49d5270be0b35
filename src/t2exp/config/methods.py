"""Schemas of the ``rag_method`` group (re-exported by ``t2exp.config.components``): the keys of
each method option and their checks; allowed values are read from the method modules."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from t2exp.config.checks import at_least, between, one_of, require
from t2exp.infra.option_meta import OptionMeta


@dataclass
class RagMethodConfig:
    _target_: str = MISSING
    name: str = MISSING
    meta: OptionMeta = field(default_factory=OptionMeta)


@dataclass
class LexicalConfig:
    """The in-memory BM25 of ``rag_method.lexical=bm25s|rank_bm25|fielded`` (``t2exp.index.lexical``,
    ``t2exp.index.fielded``). ``fields``, ``body_weight``, ``passage_words`` and ``passage_agg`` are read by
    ``fielded`` only: metadata fields (company_name, company_symbol, report_year, company_sector,
    ...) scored apart from the body with these weights (0 = left out)."""

    tokenizer: str = "paper"  # paper (lower-cased whitespace split) | alnum | numeric
    k1: float = 1.5
    b: float = 0.75
    fields: dict[str, float] = field(default_factory=dict)
    body_weight: float = 1.0
    passage_words: int | None = None  # null or 0 = whole documents; N = N-word passages, a document scores their passage_agg
    passage_agg: str = "max"

    def check(self, prefix: str) -> None:
        from t2exp.data.rows import METADATA_COLUMNS
        from t2exp.index.fielded import AGGREGATIONS
        from t2exp.index.lexical import TOKENIZERS

        one_of(f"{prefix}.tokenizer", self.tokenizer, TOKENIZERS)
        at_least(f"{prefix}.k1", self.k1, 0.0)
        between(f"{prefix}.b", self.b, 0.0, 1.0)
        for name, weight in self.fields.items():
            one_of(f"{prefix}.fields", name, METADATA_COLUMNS)
            at_least(f"{prefix}.fields.{name}", weight, 0.0)
        at_least(f"{prefix}.body_weight", self.body_weight, 0.0)
        at_least(f"{prefix}.passage_words", self.passage_words, 0, optional=True)
        one_of(f"{prefix}.passage_agg", self.passage_agg, AGGREGATIONS)


@dataclass
class HybridConfig(RagMethodConfig):
    alpha: float = 0.5  # 1 = pure dense, 0 = pure BM25 (Weaviate's meaning)
    fusion: str = "relative_score"
    lexical: str = "bm25s"
    candidate_depth: int = 50
    bm25: LexicalConfig = field(default_factory=LexicalConfig)

    def __post_init__(self) -> None:
        from t2exp.index.fusion import FUSIONS, WHOLE_CORPUS
        from t2exp.methods.hybrid import LEXICAL, WHOLE_CORPUS_LEXICAL

        between("rag_method.alpha", self.alpha, 0.0, 1.0, " (1 = dense, 0 = BM25)")
        one_of("rag_method.fusion", self.fusion, FUSIONS)
        one_of("rag_method.lexical", self.lexical, LEXICAL)
        if self.fusion in WHOLE_CORPUS:  # it reads every document's BM25 score
            require(
                self.lexical in WHOLE_CORPUS_LEXICAL,
                "rag_method.lexical",
                self.lexical,
                f"{' or '.join(WHOLE_CORPUS_LEXICAL)} with rag_method.fusion={self.fusion} (it scores every document of the corpus)",
            )
        at_least("rag_method.candidate_depth", self.candidate_depth, 1)
        self.bm25.check("rag_method.bm25")


@dataclass
class MetadataHybridConfig(HybridConfig):
    company_boost: float = 0.3
    year_boost: float = 0.1
    year_window: int = 2
    company_match: str = "prior"  # prior: company_boost added | filter: only the named company's documents

    def __post_init__(self) -> None:
        from t2exp.methods.metadata_hybrid import COMPANY_MATCH

        super().__post_init__()
        at_least("rag_method.company_boost", self.company_boost, 0.0)
        at_least("rag_method.year_boost", self.year_boost, 0.0)
        at_least("rag_method.year_window", self.year_window, 0)
        one_of("rag_method.company_match", self.company_match, COMPANY_MATCH)


@dataclass
class RerankMethodConfig(HybridConfig):
    first_stage: str = "hybrid"
    candidates: int | None = None  # null = 3k; >= k is a cross-group rule (t2exp.config.rules)

    def __post_init__(self) -> None:
        from t2exp.methods.reranker import FIRST_STAGES

        super().__post_init__()
        one_of("rag_method.first_stage", self.first_stage, FIRST_STAGES)
        at_least("rag_method.candidates", self.candidates, 1, optional=True)


@dataclass
class HydeConfig(RagMethodConfig):
    question_weight: float = 0.0
    prompt: str = "hyde"  # a template in prompts/: hyde (a 10-K passage with a table) or hyde_paper

    def __post_init__(self) -> None:
        between("rag_method.question_weight", self.question_weight, 0.0, 1.0)

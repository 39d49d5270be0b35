"""Metadata-aware hybrid (beyond the paper): documents indexed with their metadata prepended
(``document.variant=metadata_prefix``); fused candidates (mapped onto [0, 1] by
``t2exp.index.fusion.unit_scale``) get an additive boost when the question names the document's
company (normalised name or ticker) and its report year or one of the ``year_window`` years before.

``company_match=filter`` keeps only the named company's candidates instead (the year boost still
applies); its cost is counted: ``metadata_filtered_questions`` and ``metadata_filter_dropped_gold``
(the gold is read for this count only, never for ranking).
"""

from __future__ import annotations

import re

from t2exp.index.fusion import unit_scale
from t2exp.methods import Ranking
from t2exp.methods.hybrid import Hybrid

_SUFFIXES = {
    "inc",
    "incorporated",
    "corp",
    "corporation",
    "co",
    "company",
    "plc",
    "ltd",
    "limited",
    "llc",
    "lp",
    "holdings",
    "holding",
    "group",
    "the",
    "sa",
    "ag",
    "nv",
    "se",
    "n.v",
    "s.a",
    "&",
    "and",
    "of",
    "international",
}
_WORD = re.compile(r"[a-z0-9]+")
_YEAR = re.compile(r"\b(19[5-9]\d|20\d\d)\b")
COMPANY_MATCH = ("prior", "filter")


def company_tokens(name: str) -> list[str]:
    toks = _WORD.findall(name.lower().replace("-", " "))
    return [t for t in toks if t not in _SUFFIXES]


def mentions_company(question_words: set[str], tokens: list[str], symbol: str = "") -> bool:
    if symbol and len(symbol) >= 2 and symbol.lower() in question_words:
        return True
    if not tokens:
        return False
    head = tokens[:2]
    return all(t in question_words for t in head)


class MetadataHybrid(Hybrid):
    def __init__(
        self,
        name: str = "metadata_hybrid",
        company_boost: float = 0.3,
        year_boost: float = 0.1,
        year_window: int = 2,
        company_match: str = "prior",
        **hybrid,
    ) -> None:
        super().__init__(name, **hybrid)
        self.company_boost = company_boost
        self.year_boost = year_boost
        self.year_window = year_window
        self.company_match = company_match
        self.boosted = 0
        self.filtered = 0
        self.dropped_gold = 0

    @staticmethod
    def names_company(question: str, cid: str, index) -> bool:
        meta = index.docs[cid].metadata
        words = set(_WORD.findall(question.lower().replace("-", " ")))
        return mentions_company(words, company_tokens(meta.get("company_name", "")), meta.get("company_symbol", ""))

    def boost(self, question: str, cid: str, index) -> float:
        meta = index.docs[cid].metadata
        b = 0.0
        if self.company_boost and self.company_match == "prior" and self.names_company(question, cid, index):
            b += self.company_boost
        year = meta.get("report_year", "")
        if self.year_boost and year.isdigit():
            years = {int(y) for y in _YEAR.findall(question)}
            if any(int(year) - self.year_window <= y <= int(year) for y in years):
                b += self.year_boost
        return b

    def retrieve(self, questions, index, k):
        depth = max(k, self.candidate_depth)
        fused = super().retrieve(questions, index, depth)
        out = []
        for q, hits in zip(questions, fused, strict=True):
            if self.company_match == "filter":
                kept = self.company_filter(q.question, hits, index)
                if len(kept) < len(hits):
                    self.filtered += 1
                    self.dropped_gold += int(any(c == q.context_id for c, _ in hits) and all(c != q.context_id for c, _ in kept))
                hits = Ranking(kept, dense=Ranking.of(hits).dense)
            out.append(Ranking(self.boosted_ranking(q.question, hits, index, k), dense=Ranking.of(hits).dense))
        return out

    def company_filter(self, question: str, hits: list[tuple[str, float]], index) -> list[tuple[str, float]]:
        """The candidates of the company the question names; all of them when it names none of theirs."""
        named = [(c, s) for c, s in hits if self.names_company(question, c, index)]
        return named or list(hits)

    def boosted_ranking(self, question: str, hits: list[tuple[str, float]], index, k: int) -> list[tuple[str, float]]:
        """Fused candidates on [0, 1] plus their boosts, best first (ties keep the fused order)."""
        scaled = unit_scale(hits, self.fusion, self.alpha)
        boosts = [self.boost(question, cid, index) for cid, _ in scaled]
        self.boosted += sum(1 for b in boosts if b)
        rescored = [(cid, s + b) for (cid, s), b in zip(scaled, boosts, strict=True)]
        return sorted(rescored, key=lambda t: -t[1])[:k]

    def stats(self) -> dict[str, float]:
        out = {"metadata_boosted_candidates": float(self.boosted)}
        if self.company_match == "filter":
            out.update(metadata_filtered_questions=float(self.filtered), metadata_filter_dropped_gold=float(self.dropped_gold))
        return out

"""BM25 indexes and their tokenisers (``TOKENIZERS``).

- ``paper``: the T²-RAGBench authors' lower-cased whitespace split (``$1,234`` stays glued);
- ``alnum``: LanceDB's FTS ``simple`` tokenizer (lower case, ASCII folding, letter/digit runs,
  tokens over 40 bytes dropped): ``$1,234`` gives ``1`` and ``234``;
- ``numeric``: numbers first as one token each (``$1,234`` → ``1234``, ``(12.3)`` → ``12.3``), then ``alnum``.

Indexes return per query the top-k ``(context_id, score)`` with a positive score: ``bm25s`` (default;
Lucene IDF) or ``rank_bm25`` (``BM25Okapi``'s defaults, as the authors' code). ``BM25sIndex(tokenizer="alnum",
k1=1.2, b=0.75, scale=2.2)`` reproduces LanceDB's FTS scores.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import bm25s
import numpy as np

from t2exp.index.maxscore import ImpactIndex

logging.getLogger("bm25s").setLevel(logging.WARNING)

MAX_TOKEN_BYTES = 40  # LanceDB FTS's max_token_length
_ALNUM = re.compile(r"[^\W_]+")
# a number: digits with optional thousands separators and decimals (1,234.5 / 12.3 / 2019)
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")


def paper_tokenize(text: str) -> list[str]:
    return text.lower().split()


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def alnum_tokenize(text: str) -> list[str]:
    return [t for t in _ALNUM.findall(_fold(text)) if len(t.encode()) <= MAX_TOKEN_BYTES]


def numeric_tokenize(text: str) -> list[str]:
    folded = _fold(text)
    numbers = [m.group(0).replace(",", "") for m in _NUMBER.finditer(folded)]
    rest = _NUMBER.sub(" ", folded)
    return numbers + [t for t in _ALNUM.findall(rest) if len(t.encode()) <= MAX_TOKEN_BYTES]


TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"paper": paper_tokenize, "alnum": alnum_tokenize, "numeric": numeric_tokenize}


class BM25sIndex:
    name = "bm25s"

    def __init__(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        k1: float = 1.5,
        b: float = 0.75,
        tokenizer: str = "paper",
        scale: float = 1.0,
        pruned: bool = False,
    ) -> None:
        self.ids = list(ids)
        self.tokenize = TOKENIZERS[tokenizer]
        self.tokenizer, self.scale, self.pruned = tokenizer, scale, pruned
        self.retriever = bm25s.BM25(k1=k1, b=b)
        self.retriever.index([self.tokenize(t) for t in texts], show_progress=False)
        self._impacts: ImpactIndex | None = None
        if pruned:  # sorted by impact now, at build time, not inside the first query
            self._impact_index()

    def _impact_index(self) -> ImpactIndex:
        if self._impacts is None:
            s = self.retriever.scores
            self._impacts = ImpactIndex(s["data"], s["indices"], s["indptr"], s["num_docs"])
        return self._impacts

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Per query the top k; ``pruned`` indexes answer from part of the postings
        (:mod:`t2exp.index.maxscore`, same top k and scores), the others add up every posting (bm25s)."""
        if not queries:
            return []
        k = min(k, len(self.ids))
        if self.pruned:
            impacts = self._impact_index()
            found = (impacts.topk(np.asarray(self.retriever.get_tokens_ids(self.tokenize(q)), dtype=np.int64), k) for q in queries)
            return [[(self.ids[int(d)], float(s) * self.scale) for d, s in zip(docs, scores, strict=True)] for docs, scores in found]
        toks = [self.tokenize(q) or ["\x00"] for q in queries]
        docs, scores = self.retriever.retrieve(toks, k=k, show_progress=False, n_threads=0)
        out = []
        for row_d, row_s in zip(np.asarray(docs), np.asarray(scores), strict=True):
            out.append([(self.ids[int(d)], float(s) * self.scale) for d, s in zip(row_d, row_s, strict=True) if s > 0])
        return out

    def rank_all(self, queries: Sequence[str]) -> list[list[tuple[str, float]]]:
        """Per query every document with its score, zeros included, in the authors' hybrid's BM25
        order (``RankBM25Index.rank_all``)."""
        return [_all_ranked(self.ids, np.asarray(self.retriever.get_scores(self.tokenize(q)), dtype=float)) for q in queries]

    def save(self, directory: Path) -> None:
        self.retriever.save(str(directory), show_progress=False)
        (Path(directory) / "t2exp.json").write_text(
            json.dumps({"ids": self.ids, "tokenizer": self.tokenizer, "scale": self.scale, "pruned": self.pruned})
        )

    @classmethod
    def load(cls, directory: Path, pruned: bool | None = None) -> BM25sIndex:
        """The saved index; ``pruned`` overrides how it was saved (None: as saved)."""
        meta = json.loads((Path(directory) / "t2exp.json").read_text())
        index = cls.__new__(cls)
        index.ids, index.tokenizer, index.scale = meta["ids"], meta["tokenizer"], float(meta["scale"])
        index.pruned, index._impacts = bool(meta.get("pruned", False)) if pruned is None else pruned, None
        index.tokenize = TOKENIZERS[index.tokenizer]
        index.retriever = bm25s.BM25.load(str(directory), mmap=True, show_progress=False)
        if index.pruned:
            index._impact_index()
        return index


class RankBM25Index:
    name = "rank_bm25"

    def __init__(self, ids: Sequence[str], texts: Sequence[str], k1: float = 1.5, b: float = 0.75, tokenizer: str = "paper") -> None:
        from rank_bm25 import BM25Okapi

        self.ids = list(ids)
        self.tokenize = TOKENIZERS[tokenizer]
        self.retriever = BM25Okapi([self.tokenize(t) for t in texts], k1=k1, b=b)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        out = []
        for q in queries:
            scores = np.asarray(self.retriever.get_scores(self.tokenize(q)), dtype=float)
            top = np.argsort(-scores, kind="stable")[: min(k, len(self.ids))]
            out.append([(self.ids[int(i)], float(scores[i])) for i in top if scores[i] > 0])
        return out

    def rank_all(self, queries: Sequence[str]) -> list[list[tuple[str, float]]]:
        """Per query every document with its score, zeros included, in BM25 order as the authors'
        hybrid orders it (``np.argsort(scores)[::-1]``: equal scores in reverse index order of
        numpy's sort) — the lexical list of ``fusion=paper``."""
        return [_all_ranked(self.ids, np.asarray(self.retriever.get_scores(self.tokenize(q)), dtype=float)) for q in queries]


def _all_ranked(ids: Sequence[str], scores: np.ndarray) -> list[tuple[str, float]]:
    return [(ids[int(i)], float(scores[i])) for i in np.argsort(scores)[::-1]]


LEXICAL_INDEXES: dict[str, type[BM25sIndex] | type[RankBM25Index]] = {"bm25s": BM25sIndex, "rank_bm25": RankBM25Index}

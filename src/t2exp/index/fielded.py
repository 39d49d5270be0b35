"""Field-aware, passage-level BM25 (``rag_method.lexical=fielded``), batched; Robertson & Zaragoza's BM25F:

    tf~(t, u) = sum_f  w_f * tf_f(t, u) / ((1 - b_f) + b_f * len_f(u) / avglen_f)
    score(q, u) = sum_{t in q} idf(t) * tf~(t, u) / (k1 + tf~(t, u))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))        (Lucene's, always positive)

``b_f = b`` for the body, 0 for the metadata fields. With ``passage_words`` the body is cut into
windows (each with the metadata) and a document scores the ``max`` or ``sum`` of its passages.
Term weights are one sparse matrix: a batch of queries is one sparse product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import sparse

from t2exp.index.lexical import TOKENIZERS

AGGREGATIONS = ("max", "sum")
BODY = "body"
_BLOCK = 2**24  # query x unit scores held at once (128 MB of float64)


def passages(words: list[str], size: int | None) -> list[list[str]]:
    """Non-overlapping windows of ``size`` words (the whole text when ``size`` is None or 0)."""
    if not size or len(words) <= size:
        return [words]
    return [words[i : i + size] for i in range(0, len(words), size)]


class FieldedBM25:
    name = "fielded"

    def __init__(
        self,
        ids: Sequence[str],
        bodies: Sequence[str],
        metadata: Sequence[Mapping[str, str]],
        fields: Mapping[str, float] | None = None,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        tokenizer: str = "numeric",
        passage_words: int | None = None,
        aggregate: str = "max",
        body_weight: float = 1.0,
    ) -> None:
        self.ids = list(ids)
        self.tokenize = TOKENIZERS[tokenizer]
        self.aggregate = aggregate
        weights = {BODY: body_weight, **{f: float(w) for f, w in (fields or {}).items() if w}}
        units_of_doc: list[int] = []
        field_tokens: dict[str, list[list[str]]] = {f: [] for f in weights}
        for d, (body, meta) in enumerate(zip(bodies, metadata, strict=True)):
            meta_tokens = {f: self.tokenize(str(meta.get(f, ""))) for f in weights if f != BODY}
            for window in passages(self.tokenize(body), passage_words):
                units_of_doc.append(d)
                field_tokens[BODY].append(window)
                for f, toks in meta_tokens.items():
                    field_tokens[f].append(toks)
        self.unit_doc = np.asarray(units_of_doc, dtype=np.int64)
        # passages of a document are contiguous: its first unit, for np.*.reduceat
        self.doc_starts = np.flatnonzero(np.r_[True, self.unit_doc[1:] != self.unit_doc[:-1]])
        self.vocab: dict[str, int] = {}
        n = len(self.unit_doc)
        mats = []
        for f, w in weights.items():
            tf = self._tf(field_tokens[f])
            lengths = np.asarray(tf.sum(axis=1)).ravel()
            avg = lengths.mean() if lengths.size and lengths.mean() > 0 else 1.0
            bf = b if f == BODY else 0.0
            norm = 1.0 / ((1 - bf) + bf * lengths / avg)
            mats.append((w, sparse.diags(norm) @ tf))
        width = len(self.vocab)
        combined = sparse.csr_matrix((n, width), dtype=np.float64)
        for w, m in mats:
            m = m.tocsr()
            m.resize((n, width))
            combined = combined + w * m
        combined = combined.tocsr()
        df = np.bincount(combined.indices, minlength=width)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        data = combined.data
        combined.data = idf[combined.indices] * data / (k1 + data)
        self.weights_t = combined.T.tocsr()  # vocab x units

    def _tf(self, docs: list[list[str]]) -> sparse.csr_matrix:
        rows, cols = [], []
        for i, toks in enumerate(docs):
            for t in toks:
                rows.append(i)
                cols.append(self.vocab.setdefault(t, len(self.vocab)))
        data = np.ones(len(rows), dtype=np.float64)
        m = sparse.csr_matrix((data, (rows, cols)), shape=(len(docs), max(len(self.vocab), 1)))
        m.sum_duplicates()
        return m

    def _queries(self, queries: Sequence[str]) -> sparse.csr_matrix:
        rows, cols = [], []
        for i, q in enumerate(queries):
            for t in set(self.tokenize(q)):
                j = self.vocab.get(t)
                if j is not None:
                    rows.append(i)
                    cols.append(j)
        return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(queries), self.weights_t.shape[0]))

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        out: list[list[tuple[str, float]]] = []
        k = min(k, len(self.ids))
        chunk = max(1, _BLOCK // max(len(self.unit_doc), 1))
        for start in range(0, len(queries), chunk):
            q = self._queries(queries[start : start + chunk])
            units = np.asarray((q @ self.weights_t).todense())  # queries x units
            reduce = np.maximum if self.aggregate == "max" else np.add
            docs = reduce.reduceat(units, self.doc_starts, axis=1) if units.shape[1] else units
            for row in docs:
                top = np.argpartition(-row, k - 1)[:k] if k < row.size else np.arange(row.size)
                top = top[np.lexsort((top, -row[top]))]  # best first; ties: corpus order
                out.append([(self.ids[int(i)], float(row[i])) for i in top if row[i] > 0])
        return out

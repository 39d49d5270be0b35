"""Retrieval quality of t2exp's methods next to an independent reference of the paper's setup.

Ours (t2exp's own components: ``data.load_subsets``, ``indexing.build_index`` through each method's
``prepare``, ``methods.build_method`` with the configs in ``conf/rag_method``, the offline MiniLM
embedder behind the shared embedding cache, the embedded LanceDB store):

- BM25 through bm25s with the paper's tokenisation, and BM25 through LanceDB's native FTS index;
- dense (``rag_method=base``); hybrid (``rag_method=hybrid``: relative-score fusion of bm25s and
  dense, alpha 0.5), also with RRF and with the store's BM25; reranker (``rag_method=reranker``,
  chunk_maxsim); metadata_hybrid (``rag_method=metadata_hybrid``).

Reference (written here, sharing nothing with t2exp's retrieval code but the embedding vectors):

- BM25: ``rank_bm25.BM25Okapi`` (k1 1.5, b 0.75, its defaults) on ``text.lower().split()``;
- dense: cosine of the same MiniLM vectors, exact (numpy);
- hybrid, as we read the authors' description of their library's fusion: each retriever returns
  its top-``d`` list; every document in the union of the two lists scores
  ``0.5 * (1 - pos/d) + 0.5 * bm25/max(bm25)``, where ``pos`` is its 0-based position in the dense
  list (the term is 0 when it is not in that list; the dense *score* is never used, only the rank)
  and ``bm25/max(bm25)`` its BM25 score over the best BM25 score of the query (0 when it is not in
  the BM25 list); ties keep the dense-then-BM25 order. ``d`` is the evaluation depth (5, so that
  Recall@5 is defined). Two other readings are printed as sensitivity rows: lists of depth k=3,
  and the BM25 term taken from the full-corpus score of every union member.

MRR@k (k=3), Recall@1/3/5 in percent, all questions of each subset (``--limit`` samples).

    python benchmarks/retrieval_quality.py                      # bundled FinQA + TAT-DQA dev
    python benchmarks/retrieval_quality.py --data DIR_OR_PARQUET [--subset FinQA]
    python benchmarks/retrieval_quality.py --quick               # 40-document corpora, seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

RECALLS = (1, 3, 5)


# ---------------------------------------------------------------------------------------------
# reference implementation (independent of t2exp's retrieval code)


class Reference:
    def __init__(self, ids: list[str], texts: list[str], doc_vecs: np.ndarray) -> None:
        try:
            from rank_bm25 import BM25Okapi
        except ImportError:
            sys.exit("retrieval_quality: the reference needs rank-bm25: pip install -e '.[bench]' (or pip install rank-bm25)")
        self.ids = ids
        self.bm25 = BM25Okapi([t.lower().split() for t in texts])
        v = np.asarray(doc_vecs, dtype=np.float32)
        self.doc_vecs = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    @staticmethod
    def _top(scores: np.ndarray, d: int) -> list[int]:
        return [int(i) for i in np.argsort(-scores, kind="stable")[:d]]

    def rank_all(self, questions: list[str], q_vecs: np.ndarray, d: int, k: int) -> dict[str, list[list[str]]]:
        q = np.asarray(q_vecs, dtype=np.float32)
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        dense_scores = q @ self.doc_vecs.T
        out: dict[str, list[list[str]]] = {"bm25": [], "dense": [], "hybrid": [], "hybrid_k3": [], "hybrid_fullbm25": []}
        for qi, text in enumerate(questions):
            bm = np.asarray(self.bm25.get_scores(text.lower().split()), dtype=float)
            dense_top = self._top(dense_scores[qi], d)
            bm_top = self._top(bm, d)
            out["bm25"].append([self.ids[i] for i in bm_top])
            out["dense"].append([self.ids[i] for i in dense_top])
            out["hybrid"].append(self._fuse(self._top(dense_scores[qi], d), self._top(bm, d), bm, d, full_bm25=False))
            out["hybrid_k3"].append(self._fuse(self._top(dense_scores[qi], k), self._top(bm, k), bm, k, full_bm25=False))
            out["hybrid_fullbm25"].append(self._fuse(dense_top, bm_top, bm, d, full_bm25=True))
        return out

    def _fuse(self, dense_top: list[int], bm_top: list[int], bm: np.ndarray, d: int, full_bm25: bool) -> list[str]:
        best = max((bm[i] for i in bm_top), default=0.0)
        pos = {i: p for p, i in enumerate(dense_top)}
        in_bm = set(bm_top)
        union = list(dict.fromkeys(dense_top + bm_top))
        scored = []
        for order, i in enumerate(union):
            dense_part = 1.0 - pos[i] / d if i in pos else 0.0
            if full_bm25 or i in in_bm:
                lex_part = bm[i] / best if best > 0 else 0.0
            else:
                lex_part = 0.0
            scored.append((0.5 * dense_part + 0.5 * lex_part, order, i))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [self.ids[i] for _, _, i in scored]


# ---------------------------------------------------------------------------------------------


def score(ranked: list[list[str]], gold: list[str], k: int) -> dict[str, float]:
    n = len(gold)
    mrr = 0.0
    rec = dict.fromkeys(RECALLS, 0)
    for ids, g in zip(ranked, gold, strict=False):
        top = list(ids)
        if g in top[:k]:
            mrr += 1.0 / (top.index(g) + 1)
        for r in RECALLS:
            rec[r] += g in top[:r]
    return {"mrr": 100.0 * mrr / n, **{f"r@{r}": 100.0 * rec[r] / n for r in RECALLS}}


def ours(subset, emb, cache_dir: Path, k: int, depth: int, reranker: bool = True) -> dict[str, tuple[list[list[str]], float]]:
    from t2exp.methods import build_method

    out: dict[str, tuple[list[list[str]], float]] = {}
    qs = subset.questions
    texts = [q.question for q in qs]
    store_uri = cache_dir / "lancedb"

    def ids(hits):
        return [[cid for cid, _ in h] for h in hits]

    def run(label: str, name: str, extra=()):
        cfg, variant, reranker_cfg = C.method_config(name, extra)
        reranker = C.instantiate(reranker_cfg) if reranker_cfg is not None else None
        method = build_method(cfg, reranker=reranker)
        index = method.prepare(subset, C.services(emb, store_uri, cache_dir, variant))
        t0 = time.perf_counter()
        hits = method.retrieve(qs, index, depth)
        out[label] = (ids(hits), time.perf_counter() - t0)
        return index

    index = run("dense (base)", "base")
    t0 = time.perf_counter()
    out["BM25 bm25s (paper tokens)"] = (ids(index.bm25s.search(texts, depth)), time.perf_counter() - t0)
    t0 = time.perf_counter()
    out["BM25 LanceDB FTS"] = (ids(index.store.bm25(texts, depth)), time.perf_counter() - t0)
    run("hybrid (relative, bm25s)", "hybrid")
    run("hybrid (rrf, bm25s)", "hybrid", ["rag_method.fusion=rrf"])
    run("hybrid (relative, store BM25)", "hybrid", ["rag_method.lexical=store"])
    if reranker:
        run("reranker (chunk_maxsim)", "reranker")
    run("metadata_hybrid", "metadata_hybrid")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])  # noqa: E501
    ap.add_argument("--data", default=str(C.DEFAULT_DATA), help="directory of <Subset>_<split>.parquet|jsonl files, or one file")
    ap.add_argument("--subset", action="append", help="subset name(s) to load (default: every subset found in --data)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="questions per subset (seeded sample); default all")
    ap.add_argument("--corpus-size", type=int, default=None, help="seeded nested document subsample per subset")
    ap.add_argument("--cache-dir", default=str(C.SHARED_CACHE), help="embedding cache + LanceDB tables (default: the project's)")
    ap.add_argument("--no-reranker", action="store_true", help="skip rag_method=reranker (cold, it embeds every candidate's passages)")
    ap.add_argument("--quick", action="store_true", help="30-document corpora, 30 questions per subset, no reranker")
    args = ap.parse_args(argv)
    C.quiet_logs()

    from t2exp.data import SUBSETS, discover_files, load_subsets

    if args.quick:
        args.corpus_size = args.corpus_size or 30
        args.limit = args.limit or 30
        args.no_reranker = True
    data = Path(args.data)
    names = args.subset or list(discover_files(data, SUBSETS))  # a file not named <Subset>_<split> needs --subset
    if not names:
        sys.exit(f"retrieval_quality: no <Subset>_<split>.parquet|jsonl under {data}")
    cache_dir = Path(args.cache_dir)
    depth = max(args.k, max(RECALLS))
    subsets = load_subsets(subsets=names, source="local", path=data, limit=args.limit, seed=0, corpus_size=args.corpus_size)
    t_load = time.perf_counter()
    emb = C.cached_embedder(C.raw_embedder(), cache_dir)
    print(f"# retrieval_quality  data={data}  k={args.k}  cache={cache_dir}  machine: {C.machine()}")
    print(f"# embedder loaded in {time.perf_counter() - t_load:.1f}s")

    results: dict[str, dict[str, dict[str, float]]] = {}
    counts: dict[str, int] = {}
    for subset in subsets:
        t0 = time.perf_counter()
        gold = [q.context_id for q in subset.questions]
        counts[subset.name] = len(gold)
        rows: dict[str, dict[str, float]] = {}
        for label, (ranked, secs) in ours(subset, emb, cache_dir, args.k, depth, not args.no_reranker).items():
            rows[label] = {**score(ranked, gold, args.k), "s": secs}
        ids = [d.context_id for d in subset.corpus]
        texts = [d.text for d in subset.corpus]
        t1 = time.perf_counter()
        ref = Reference(ids, texts, emb.embed_documents(texts))
        qtexts = [q.question for q in subset.questions]
        ranked = ref.rank_all(qtexts, emb.embed_queries(qtexts), depth, args.k)
        ref_secs = time.perf_counter() - t1
        labels = {
            "bm25": "REF BM25 rank_bm25 Okapi",
            "dense": "REF dense (numpy cosine)",
            "hybrid": "REF hybrid (rank fusion, d=5)",
            "hybrid_k3": "REF hybrid, lists of k=3",
            "hybrid_fullbm25": "REF hybrid, full-corpus BM25 term",
        }
        for key, label in labels.items():
            rows[label] = {**score(ranked[key], gold, args.k), "s": ref_secs}
        results[subset.name] = rows
        print(f"\n## {subset.name}: {len(gold)} questions, {len(ids)} documents ({time.perf_counter() - t0:.1f}s)\n")
        ref_h = rows["REF hybrid (rank fusion, d=5)"]["mrr"]
        hdr = ["method", f"MRR@{args.k}", "R@1", "R@3", "R@5", f"Δ MRR@{args.k} vs REF hybrid", "retrieve s"]
        body = [[lab, r["mrr"], r["r@1"], r["r@3"], r["r@5"], f"{r['mrr'] - ref_h:+.1f}", f"{r['s']:.2f}"] for lab, r in rows.items()]
        print(C.table(hdr, body))
        print("\n(retrieve s: ours per method, index already open; REF rows: one figure for all five reference rankings,"
              " BM25 index build included)")

    # question-weighted average over subsets
    total = sum(counts.values())
    labels_all = list(next(iter(results.values())))
    avg = {
        lab: {m: sum(results[s][lab][m] * counts[s] for s in results) / total for m in ("mrr", "r@1", "r@3", "r@5")} for lab in labels_all
    }
    ref_main = "REF hybrid (rank fusion, d=5)"
    ref_variants = [lab for lab in labels_all if lab.startswith("REF hybrid")]
    our_labels = [lab for lab in labels_all if not lab.startswith("REF")]
    print(f"\n## deltas (ours − reference), MRR@{args.k} points\n")
    hdr = ["method"] + [f"{s} Δ" for s in results] + ["avg Δ", "avg Δ vs best REF variant"]
    rows_out = []
    for lab in our_labels:
        cells = [f"{results[s][lab]['mrr'] - results[s][ref_main]['mrr']:+.1f}" for s in results]
        best_ref_avg = max(avg[v]["mrr"] for v in ref_variants)
        rows_out.append([lab, *cells, f"{avg[lab]['mrr'] - avg[ref_main]['mrr']:+.1f}", f"{avg[lab]['mrr'] - best_ref_avg:+.1f}"])
    print(C.table(hdr, rows_out))
    print(f"\n(avg = question-weighted over {', '.join(f'{s} {n}' for s, n in counts.items())}; "
          f"REF hybrid avg MRR@{args.k} = {avg[ref_main]['mrr']:.1f})")

    hybrid = "hybrid (relative, bm25s)"
    best = max(our_labels, key=lambda lab: avg[lab]["mrr"])
    hyb_deltas = {s: results[s][hybrid]["mrr"] - max(results[s][v]["mrr"] for v in ref_variants) for s in results}
    best_delta = avg[best]["mrr"] - avg[ref_main]["mrr"]
    best_delta_cons = avg[best]["mrr"] - max(avg[v]["mrr"] for v in ref_variants)
    print("\n## targets")
    print(f"- our hybrid ≥ reference hybrid (best of its readings) on every subset: "
          f"{'MET' if all(d >= 0 for d in hyb_deltas.values()) else 'NOT MET'} "
          f"({', '.join(f'{s} {d:+.1f}' for s, d in hyb_deltas.items())})")
    print(f"- best method ({best}) ≥ +10 MRR@{args.k} over the reference hybrid (avg): "
          f"{'MET' if best_delta >= 10 else 'NOT MET'} ({best_delta:+.1f}; vs the best reading {best_delta_cons:+.1f})")
    C.ratio_line(
        "retrieval_quality",
        **{f"hybrid_minus_ref_{s}": f"{results[s][hybrid]['mrr'] - results[s][ref_main]['mrr']:+.1f}" for s in results},
        best=best.replace(" ", "_"),
        best_minus_ref_avg=f"{best_delta:+.1f}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

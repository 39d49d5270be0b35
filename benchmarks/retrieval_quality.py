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
- hybrid, the authors' procedure as their library's ``HybridBM25RAG`` runs it (written here from
  that procedure): the dense list is the base retriever's top-k; BM25 scores **every** document of
  the corpus (``np.argsort(scores)[::-1]`` order); every document scores
  ``0.5 * (1 - pos/k) + 0.5 * sparse``, ``pos`` its 0-based dense position (0 outside the dense
  list; the dense *score* is never used), ``sparse`` its BM25 score over the query's best when
  positive, else ``0.9 * min(positive normalised scores) * (1 - bm25_pos / n)``; sorted, top k.
  Read further down the same order for Recall@5. Ties (equal fused scores) keep the dense, then
  the BM25 order. One sensitivity row: the cut-list reading (both lists cut to d=5, no
  zero-score fallback; t2exp's ``fusion=paper_rank``).

``--paper-query`` asks every retriever (ours and the reference) the authors' query
(``protocol=paper``: ``Instruct: ...\nQuery: {company_name} : {question}``) instead of the bare question.

MRR@k (k=3), Recall@1/3/5 in percent, all questions of each subset (``--limit`` samples).

    python benchmarks/retrieval_quality.py                      # bundled FinQA + TAT-DQA dev
    python benchmarks/retrieval_quality.py --data DIR_OR_PARQUET [--subset FinQA]
    python benchmarks/retrieval_quality.py --quick               # 40-document corpora, seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

RECALLS = (1, 3, 5)
PAPER_HYBRID = "hybrid (protocol=paper: fusion=paper, rank_bm25)"
REF_HYBRID = "REF authors' hybrid"
REF_CUT = "REF cut-list reading (d=5)"


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
        out: dict[str, list[list[str]]] = {"bm25": [], "dense": [], "hybrid": [], "hybrid_cut": []}
        for qi, text in enumerate(questions):
            bm = np.asarray(self.bm25.get_scores(text.lower().split()), dtype=float)
            out["bm25"].append([self.ids[i] for i in self._top(bm, d)])
            out["dense"].append([self.ids[i] for i in self._top(dense_scores[qi], d)])
            out["hybrid"].append(self.authors_hybrid(self._top(dense_scores[qi], k), bm, d))
            out["hybrid_cut"].append(self._cut_lists(self._top(dense_scores[qi], d), self._top(bm, d), bm, d))
        return out

    def authors_hybrid(self, dense_top: list[int], bm: np.ndarray, d: int, alpha: float = 0.5) -> list[str]:
        """The authors' hybrid over the dense top-k ``dense_top`` (corpus indices, best first) and
        the BM25 scores ``bm`` of every document; the first ``d`` of the fused order."""
        n = len(bm)
        bm_order = [int(i) for i in np.argsort(bm)[::-1]]
        bm_pos = {i: p for p, i in enumerate(bm_order)}
        top = float(bm.max()) if bm.any() else 1.0
        positive = {i: float(bm[i]) / top for i in range(n) if top > 0 and bm[i] > 0}
        floor = 0.9 * min(positive.values(), default=0.1)
        dense_pos = {i: p for p, i in enumerate(dense_top)}
        scored = []
        for i in range(n):
            dense_part = 1.0 - dense_pos[i] / len(dense_top) if i in dense_pos else 0.0
            sparse_part = positive[i] if i in positive else floor * (1.0 - bm_pos[i] / n)
            tie = dense_pos[i] if i in dense_pos else len(dense_top) + bm_pos[i]
            scored.append((alpha * dense_part + (1 - alpha) * sparse_part, tie, i))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [self.ids[i] for _, _, i in scored[:d]]

    def _cut_lists(self, dense_top: list[int], bm_top: list[int], bm: np.ndarray, d: int) -> list[str]:
        """The cut-list reading: both lists of depth ``d``, no BM25 term outside the BM25 list."""
        best = max((bm[i] for i in bm_top), default=0.0)
        pos = {i: p for p, i in enumerate(dense_top)}
        in_bm = set(bm_top)
        union = list(dict.fromkeys(dense_top + bm_top))
        scored = []
        for order, i in enumerate(union):
            dense_part = 1.0 - pos[i] / d if i in pos else 0.0
            lex_part = bm[i] / best if i in in_bm and best > 0 else 0.0
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


def ours(
    subset, emb, cache_dir: Path, k: int, depth: int, reranker: bool = True, protocol: Sequence[str] = ()
) -> dict[str, tuple[list[list[str]], float]]:
    from t2exp.pipeline.build import build_method

    out: dict[str, tuple[list[list[str]], float]] = {}
    qs = subset.questions
    query = C.query_builder(protocol)
    texts = query.texts(qs)
    store_uri = cache_dir / "lancedb"

    def ids(hits):
        return [[cid for cid, _ in h] for h in hits]

    def run(label: str, name: str, extra=()):
        cfg, variant, reranker_cfg = C.method_config(name, [*protocol, *extra])
        reranker = C.instantiate(reranker_cfg) if reranker_cfg is not None else None
        method = build_method(cfg, reranker=reranker)
        index = method.prepare(subset, C.services(emb, store_uri, cache_dir, variant, k=k, query=query))
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
    run(PAPER_HYBRID, "hybrid", ["protocol=paper"])  # the method's settings under protocol=paper; the query is ``query``
    if reranker:
        run("reranker (chunk_maxsim)", "reranker")
    run("metadata_hybrid", "metadata_hybrid")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(C.DEFAULT_DATA), help="directory of <Subset>_<split>.parquet|jsonl files, or one file")
    ap.add_argument("--subset", action="append", help="subset name(s) to load (default: every subset found in --data)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="questions per subset (seeded sample); default all")
    ap.add_argument("--corpus-size", type=int, default=None, help="seeded nested document subsample per subset")
    ap.add_argument("--cache-dir", default=str(C.SHARED_CACHE), help="embedding cache + LanceDB tables (default: the project's)")
    ap.add_argument("--no-reranker", action="store_true", help="skip rag_method=reranker (cold, it embeds every candidate's passages)")
    ap.add_argument("--quick", action="store_true", help="30-document corpora, 30 questions per subset, no reranker")
    ap.add_argument(
        "--paper-query", action="store_true", help="every retriever asks the authors' query (protocol=paper), not the bare question"
    )
    args = ap.parse_args(argv)
    C.quiet_logs()

    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import SUBSETS, discover_files, load_subsets

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
    subsets = load_subsets(**dataset_args(subsets=names, source="local", path=data, limit=args.limit, seed=0, corpus_size=args.corpus_size))
    t_load = time.perf_counter()
    protocol = ["protocol=paper"] if args.paper_query else []
    query = C.query_builder(protocol)
    emb = C.cached_embedder(C.raw_embedder(protocol), cache_dir)
    print(
        f"# retrieval_quality  data={data}  k={args.k}  query={'paper' if args.paper_query else 'bare question'}  cache={cache_dir}"
        f"  machine: {C.machine()}"
    )
    print(f"# embedder loaded in {time.perf_counter() - t_load:.1f}s")

    results: dict[str, dict[str, dict[str, float]]] = {}
    counts: dict[str, int] = {}
    differs: dict[str, int] = {}
    for subset in subsets:
        t0 = time.perf_counter()
        gold = [q.context_id for q in subset.questions]
        counts[subset.name] = len(gold)
        rows: dict[str, dict[str, float]] = {}
        mine = ours(subset, emb, cache_dir, args.k, depth, not args.no_reranker, protocol)
        for label, (ranked, secs) in mine.items():
            rows[label] = {**score(ranked, gold, args.k), "s": secs}
        ids = [d.context_id for d in subset.corpus]
        texts = [d.text for d in subset.corpus]
        t1 = time.perf_counter()
        ref = Reference(ids, texts, emb.embed_documents(texts))
        qtexts = query.texts(subset.questions)
        ranked = ref.rank_all(qtexts, emb.embed_queries(qtexts), depth, args.k)
        ref_secs = time.perf_counter() - t1
        labels = {
            "bm25": "REF BM25 rank_bm25 Okapi",
            "dense": "REF dense (numpy cosine)",
            "hybrid": REF_HYBRID,
            "hybrid_cut": REF_CUT,
        }
        for key, label in labels.items():
            rows[label] = {**score(ranked[key], gold, args.k), "s": ref_secs}
        results[subset.name] = rows
        pairs = zip(mine[PAPER_HYBRID][0], ranked["hybrid"], strict=True)
        differs[subset.name] = differ = sum(a[: args.k] != b[: args.k] for a, b in pairs)
        print(f"\n## {subset.name}: {len(gold)} questions, {len(ids)} documents ({time.perf_counter() - t0:.1f}s)\n")
        print(f"top-{args.k} lists of t2exp's paper hybrid differing from the reference's: {differ} of {len(gold)}\n")
        ref_h = rows[REF_HYBRID]["mrr"]
        hdr = ["method", f"MRR@{args.k}", "R@1", "R@3", "R@5", f"Δ MRR@{args.k} vs REF hybrid", "retrieve s"]
        body = [[lab, r["mrr"], r["r@1"], r["r@3"], r["r@5"], f"{r['mrr'] - ref_h:+.1f}", f"{r['s']:.2f}"] for lab, r in rows.items()]
        print(C.table(hdr, body))
        print(
            "\n(retrieve s: ours per method, index already open; REF rows: one figure for all five reference rankings,"
            " BM25 index build included)"
        )

    # question-weighted average over subsets
    total = sum(counts.values())
    labels_all = list(next(iter(results.values())))
    avg = {
        lab: {m: sum(results[s][lab][m] * counts[s] for s in results) / total for m in ("mrr", "r@1", "r@3", "r@5")} for lab in labels_all
    }
    ref_main = REF_HYBRID
    ref_variants = [REF_HYBRID, REF_CUT]
    our_labels = [lab for lab in labels_all if not lab.startswith("REF")]
    print(f"\n## deltas (ours − reference), MRR@{args.k} points\n")
    hdr = ["method"] + [f"{s} Δ" for s in results] + ["avg Δ", "avg Δ vs best REF variant"]
    rows_out = []
    for lab in our_labels:
        cells = [f"{results[s][lab]['mrr'] - results[s][ref_main]['mrr']:+.1f}" for s in results]
        best_ref_avg = max(avg[v]["mrr"] for v in ref_variants)
        rows_out.append([lab, *cells, f"{avg[lab]['mrr'] - avg[ref_main]['mrr']:+.1f}", f"{avg[lab]['mrr'] - best_ref_avg:+.1f}"])
    print(C.table(hdr, rows_out))
    print(
        f"\n(avg = question-weighted over {', '.join(f'{s} {n}' for s, n in counts.items())}; "
        f"REF hybrid avg MRR@{args.k} = {avg[ref_main]['mrr']:.1f})"
    )

    hybrid = "hybrid (relative, bm25s)"
    best = max(our_labels, key=lambda lab: avg[lab]["mrr"])
    hyb_deltas = {s: results[s][hybrid]["mrr"] - max(results[s][v]["mrr"] for v in ref_variants) for s in results}
    best_delta = avg[best]["mrr"] - avg[ref_main]["mrr"]
    best_delta_cons = avg[best]["mrr"] - max(avg[v]["mrr"] for v in ref_variants)
    print("\n## targets")
    print(
        f"- our hybrid ≥ reference hybrid (best of its readings) on every subset: "
        f"{'MET' if all(d >= 0 for d in hyb_deltas.values()) else 'NOT MET'} "
        f"({', '.join(f'{s} {d:+.1f}' for s, d in hyb_deltas.items())})"
    )
    print(
        f"- best method ({best}) ≥ +10 MRR@{args.k} over the reference hybrid (avg): "
        f"{'MET' if best_delta >= 10 else 'NOT MET'} ({best_delta:+.1f}; vs the best reading {best_delta_cons:+.1f})"
    )
    C.ratio_line(
        "retrieval_quality",
        **{f"hybrid_minus_ref_{s}": f"{results[s][hybrid]['mrr'] - results[s][ref_main]['mrr']:+.1f}" for s in results},
        **{f"paper_hybrid_lists_differing_{s}": f"{differs[s]}/{counts[s]}" for s in results},
        best=best.replace(" ", "_"),
        best_minus_ref_avg=f"{best_delta:+.1f}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

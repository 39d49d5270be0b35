"""How t2exp's store operations grow with the corpus: synthetic corpora of 1k, 10k and 100k documents.

Each size runs in its own process (clean memory figures) on a synthetic corpus generated here:
384-d random unit vectors (MiniLM's size) and texts of random words drawn from a Zipfian
vocabulary (50k words, exponent 1.07, ``--doc-words`` words a document). Measured, through t2exp's
own classes:

- build: ``LanceDBStore.add`` in batches of 256 (``indexing.build_index``'s batch size, one
  fragment each), ``LanceDBStore.finalize`` (compaction into one fragment, LanceDB's native FTS
  index and its batched mirror), an ANN vector index from
  ``--ann-threshold`` documents up (default HNSW with scalar quantisation in one partition,
  ``IVF_HNSW_SQ``; ``--ann ivf_pq``: IVF_PQ, sqrt(n) partitions, 48 sub-vectors), and
  ``lexical.BM25sIndex`` (bm25s, the paper's tokenisation);
- single-query latency p50/p95 (ms, one query per call as an interactive user sees it):
  ``LanceDBStore.dense`` (uses the ANN index when there is one, brute force below the
  threshold), brute-force dense at every size (the index bypassed), ``LanceDBStore.bm25`` one
  query per call through the FTS index (``lexical_batch=False``) and through its batched mirror
  (the default), and ``BM25sIndex.search``; dense queries are noisy copies of a document (cosine
  ~0.7 to it), so "hit@10" says how often the ANN index still finds that document;
- batched: every query in one call, milliseconds per query: ``LanceDBStore.bm25`` (the store's
  BM25, what ``rag_method.lexical=store`` uses) and ``LanceDBStore.hybrid`` (dense + store BM25 +
  fusion, depth 50: ``hybrid lexical=store``), each against the same queries one FTS call each;
- memory: RSS after the build and the process's peak RSS; the table's size on disk.

Then the growth exponent log(t2/t1)/log(n2/n1) between consecutive sizes (1 = linear).

    python benchmarks/scaling.py            # 1k, 10k, 100k documents
    python benchmarks/scaling.py --quick    # 1k, 3k, 10k
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

DIM = 384
VOCAB = 50_000
ZIPF_S = 1.07
INSERT_BATCH = 256
ANN_NAME = {"hnsw_sq": "IVF_HNSW_SQ (1 partition)", "ivf_pq": "IVF_PQ"}


def vocabulary(rng: np.random.Generator, size: int) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: set[str] = set()
    while len(words) < size:
        lengths = rng.integers(2, 11, size=size)
        for n in lengths:
            words.add("".join(rng.choice(letters, size=n)))
            if len(words) == size:
                break
    return np.array(sorted(words))  # rank order is the (random) alphabetical order


def corpus(n: int, doc_words: int, seed: int) -> tuple[list[str], list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    vocab = vocabulary(np.random.default_rng(12345), VOCAB)
    p = 1.0 / np.arange(1, VOCAB + 1) ** ZIPF_S
    p /= p.sum()
    lengths = np.maximum(5, rng.poisson(doc_words, size=n))
    flat = rng.choice(VOCAB, size=int(lengths.sum()), p=p)
    texts, start = [], 0
    for ln in lengths:
        texts.append(" ".join(vocab[flat[start : start + ln]]))
        start += ln
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [f"doc{i}" for i in range(n)], texts, vecs


def batch_ms(fn, n: int) -> float:
    """Milliseconds per query of one call of ``fn`` answering ``n`` queries."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0 / n


def lat(fn, items) -> list[float]:
    out = []
    for it in items:
        t0 = time.perf_counter()
        fn(it)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def one_size(n: int, args: argparse.Namespace) -> dict:
    """Build and query one corpus size (runs in a child process)."""
    C.quiet_logs()
    from t2exp.index.lexical import BM25sIndex
    from t2exp.stores.lancedb_store import LanceDBStore

    rss0 = C.rss_mb()
    t0 = time.perf_counter()
    ids, texts, vecs = corpus(n, args.doc_words, seed=n)
    gen_s = time.perf_counter() - t0
    rng = np.random.default_rng(7)
    qdoc = rng.choice(n, size=args.queries, replace=False)
    noise = rng.standard_normal((args.queries, DIM)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    qvecs = vecs[qdoc] + noise
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    qtexts = [" ".join(rng.choice(texts[i].split(), size=5)) for i in qdoc]

    tmp = Path(tempfile.mkdtemp(prefix=f"t2exp-scaling-{n}-", dir=args.tmp))
    r: dict = {"n": n, "gen_s": gen_s, "rss_start_mb": rss0}
    try:
        store = LanceDBStore(str(tmp))
        store.open(f"synthetic_{n}")
        meta = [{}] * INSERT_BATCH
        t0 = time.perf_counter()
        for s in range(0, n, INSERT_BATCH):
            batch_ids = ids[s : s + INSERT_BATCH]
            store.add(batch_ids, texts[s : s + INSERT_BATCH], vecs[s : s + INSERT_BATCH], meta[: len(batch_ids)])
        r["insert_s"] = time.perf_counter() - t0
        r["fragments_before"] = store.fragments()
        t0 = time.perf_counter()
        store.finalize()
        r["fts_index_s"] = time.perf_counter() - t0
        r["fragments_after"] = store.fragments()
        r["ann"] = n >= args.ann_threshold
        r["ann_index_s"] = 0.0
        if r["ann"]:
            from lancedb.index import HnswSq, IvfPq

            if args.ann == "ivf_pq":
                config = IvfPq(distance_type="cosine", num_partitions=max(1, round(math.sqrt(n))), num_sub_vectors=48)
            else:
                config = HnswSq(distance_type="cosine", num_partitions=1, ef_construction=args.ef_construction)
            t0 = time.perf_counter()
            store.table.create_index("vector", config=config, replace=True)
            r["ann_index_s"] = time.perf_counter() - t0
        r["store_build_s"] = r["insert_s"] + r["fts_index_s"] + r["ann_index_s"]
        t0 = time.perf_counter()
        bm = BM25sIndex(ids, texts)
        r["bm25s_build_s"] = time.perf_counter() - t0
        r["rss_after_build_mb"] = C.rss_mb()
        r["disk_mb"] = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file()) / 2**20
        del texts

        def flat(v: np.ndarray) -> list:
            return store.table.search(v).distance_type("cosine").bypass_vector_index().limit(10).select(["id"]).to_list()

        warm = min(5, args.queries)
        for i in range(warm):  # open files, load index pages, JIT nothing
            store.dense(qvecs[i][None, :], 10), flat(qvecs[i]), store.bm25([qtexts[i]], 10), bm.search([qtexts[i]], 10)
        dense_hits = []
        r["dense_ms"] = lat(lambda v: dense_hits.append([c for c, _ in store.dense(v[None, :], 10)[0]]), qvecs)
        ef_hits = []
        if r["ann"]:

            def ann_ef(v: np.ndarray) -> None:
                rows = store.table.search(v).distance_type("cosine").ef(args.ef).limit(10).select(["id"]).to_list()
                ef_hits.append([h["id"] for h in rows])

            for i in range(warm):
                ann_ef(qvecs[i])
            ef_hits.clear()
            r["ef_ms"] = lat(ann_ef, qvecs)
            r["hit10_ef"] = float(np.mean([ids[d] in h for d, h in zip(qdoc, ef_hits, strict=False)]))
        flat_hits = []
        r["flat_ms"] = lat(lambda v: flat_hits.append([h["id"] for h in flat(v)]), qvecs)
        r["mirror_ms"] = lat(lambda q: store.bm25([q], 10), qtexts)
        r["bm25s_ms"] = lat(lambda q: bm.search([q], 10), qtexts)
        r["bm25_batch_ms"] = batch_ms(lambda: store.bm25(qtexts, 50), len(qtexts))
        r["hybrid_batch_ms"] = batch_ms(lambda: store.hybrid(qtexts, qvecs, 10, 0.5), len(qtexts))
        store.lexical_batch = False  # the same calls, one FTS query each
        for i in range(warm):
            store.bm25([qtexts[i]], 10)
        r["fts_ms"] = lat(lambda q: store.bm25([q], 10), qtexts)
        r["bm25_fts_batch_ms"] = batch_ms(lambda: store.bm25(qtexts, 50), len(qtexts))
        r["hybrid_fts_batch_ms"] = batch_ms(lambda: store.hybrid(qtexts, qvecs, 10, 0.5), len(qtexts))
        r["hit10_dense"] = float(np.mean([ids[d] in h for d, h in zip(qdoc, dense_hits, strict=False)]))
        r["hit10_flat"] = float(np.mean([ids[d] in h for d, h in zip(qdoc, flat_hits, strict=False)]))
        r["recall10_vs_exact"] = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(dense_hits, flat_hits, strict=False)]))
        r["rss_end_mb"] = C.rss_mb()
        r["peak_rss_mb"] = C.peak_rss_mb()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="t2exp store scaling on synthetic corpora")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=None, help="e.g. 1000,10000,100000")
    ap.add_argument("--doc-words", type=int, default=100, help="mean words per document (Poisson)")
    ap.add_argument("--queries", type=int, default=200, help="timed single queries per operation")
    ap.add_argument("--ann-threshold", type=int, default=5000, help="documents from which an ANN index is built")
    ap.add_argument("--ann", choices=("hnsw_sq", "ivf_pq"), default="hnsw_sq", help="ANN index type")
    ap.add_argument("--ef-construction", type=int, default=300, help="HNSW build beam (LanceDB's default 300)")
    ap.add_argument("--ef", type=int, default=200, help="HNSW search beam of the extra 'ANN, ef=' measurement")
    ap.add_argument("--tmp", default=None, help="where the temporary tables go (default: the system temp dir)")
    ap.add_argument("--quick", action="store_true", help="1k, 3k, 10k documents, 30 queries, cheaper HNSW build")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: one size, JSON on stdout
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes = args.sizes or [1000, 3000, 10000]
        args.queries = min(args.queries, 30)
        args.ann_threshold = min(args.ann_threshold, 2000)
        args.doc_words = min(args.doc_words, 40)
        args.ef_construction = min(args.ef_construction, 100)
    args.sizes = args.sizes or [1000, 10000, 100000]
    if args.one:
        print("JSON " + json.dumps(one_size(args.one, args)))
        return 0

    print(
        f"# scaling  sizes={args.sizes}  doc_words~{args.doc_words}  queries={args.queries}  "
        f"ANN ({ANN_NAME[args.ann]}) from {args.ann_threshold} docs  machine: {C.machine()}"
    )
    res = []
    for n in args.sizes:
        cmd = [
            sys.executable,
            __file__,
            "--one",
            str(n),
            "--doc-words",
            str(args.doc_words),
            "--queries",
            str(args.queries),
            "--ann-threshold",
            str(args.ann_threshold),
            "--ann",
            args.ann,
            "--ef-construction",
            str(args.ef_construction),
            "--ef",
            str(args.ef),
        ] + (["--tmp", args.tmp] if args.tmp else [])
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "RUST_LOG": "error"})
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("JSON ")), None)
        if proc.returncode != 0 or line is None:
            print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
            sys.exit(f"scaling: size {n} failed (exit {proc.returncode})")
        res.append(json.loads(line[5:]))
        print(f"# n={n}: {time.perf_counter() - t0:.1f}s", flush=True)

    p = C.percentile
    print("\n## build (seconds) and memory\n")
    print(
        C.table(
            [
                "docs",
                "LanceDB insert",
                "fragments",
                "finalize (compact, FTS, batched BM25)",
                "ANN index",
                "store total",
                "bm25s index",
                "RSS after build MB",
                "peak RSS MB",
                "disk MB",
            ],
            [
                [
                    f"{r['n']:,}",
                    r["insert_s"],
                    f"{r['fragments_before']} → {r['fragments_after']}",
                    r["fts_index_s"],
                    r["ann_index_s"] if r["ann"] else "-",
                    r["store_build_s"],
                    r["bm25s_build_s"],
                    r["rss_after_build_mb"],
                    r["peak_rss_mb"],
                    r["disk_mb"],
                ]
                for r in res
            ],
        )
    )
    print("\n## single-query latency, ms (p50 / p95)\n")
    print(
        C.table(
            [
                "docs",
                "dense (store)",
                "mode",
                "hit@10 store/exact",
                "recall@10 vs exact",
                f"ANN ef={args.ef}",
                f"hit@10 ef={args.ef}",
                "dense brute force",
                "BM25 LanceDB FTS",
                "BM25 store (batched path)",
                "BM25 bm25s",
            ],
            [
                [
                    f"{r['n']:,}",
                    f"{p(r['dense_ms'], 50):.2f} / {p(r['dense_ms'], 95):.2f}",
                    ANN_NAME[args.ann] if r["ann"] else "brute force",
                    f"{r['hit10_dense']:.2f} / {r['hit10_flat']:.2f}",
                    f"{r['recall10_vs_exact']:.2f}",
                    f"{p(r['ef_ms'], 50):.2f} / {p(r['ef_ms'], 95):.2f}" if r["ann"] else "-",
                    f"{r['hit10_ef']:.2f}" if r["ann"] else "-",
                    f"{p(r['flat_ms'], 50):.2f} / {p(r['flat_ms'], 95):.2f}",
                    f"{p(r['fts_ms'], 50):.2f} / {p(r['fts_ms'], 95):.2f}",
                    f"{p(r['mirror_ms'], 50):.2f} / {p(r['mirror_ms'], 95):.2f}",
                    f"{p(r['bm25s_ms'], 50):.2f} / {p(r['bm25s_ms'], 95):.2f}",
                ]
                for r in res
            ],
        )
    )
    print(
        f"\n## batched: {args.queries} queries in one call, ms per query (store BM25 depth 50; store hybrid: dense + BM25 + "
        "fusion, depth 50 each)\n"
    )
    print(
        C.table(
            [
                "docs",
                "store BM25, batched",
                "store BM25, one FTS query each",
                "speed-up",
                "store hybrid, batched",
                "store hybrid, FTS per query",
                "speed-up",
            ],
            [
                [
                    f"{r['n']:,}",
                    r["bm25_batch_ms"],
                    r["bm25_fts_batch_ms"],
                    f"{r['bm25_fts_batch_ms'] / r['bm25_batch_ms']:.1f}x",
                    r["hybrid_batch_ms"],
                    r["hybrid_fts_batch_ms"],
                    f"{r['hybrid_fts_batch_ms'] / r['hybrid_batch_ms']:.1f}x",
                ]
                for r in res
            ],
        )
    )

    series = {
        "LanceDB insert + FTS index": lambda r: r["insert_s"] + r["fts_index_s"],
        "ANN index build": lambda r: r["ann_index_s"] if r["ann"] else float("nan"),
        "bm25s build": lambda r: r["bm25s_build_s"],
        "dense ANN p50": lambda r: p(r["dense_ms"], 50) if r["ann"] else float("nan"),
        f"dense ANN ef={args.ef} p50": lambda r: p(r["ef_ms"], 50) if r["ann"] else float("nan"),
        "dense brute force p50": lambda r: p(r["flat_ms"], 50),
        "BM25 LanceDB FTS p50": lambda r: p(r["fts_ms"], 50),
        "BM25 bm25s p50": lambda r: p(r["bm25s_ms"], 50),
        "BM25 store batched, per query": lambda r: r["bm25_batch_ms"],
        "hybrid store batched, per query": lambda r: r["hybrid_batch_ms"],
        "hybrid store, FTS per query": lambda r: r["hybrid_fts_batch_ms"],
        "BM25 LanceDB FTS p95": lambda r: p(r["fts_ms"], 95),
        "BM25 bm25s p95": lambda r: p(r["bm25s_ms"], 95),
        "RSS after build": lambda r: r["rss_after_build_mb"] - r["rss_start_mb"],
    }
    pairs = list(zip(res, res[1:], strict=False))
    print("\n## growth exponent log(t2/t1)/log(n2/n1) (1 = linear, < 1 sub-linear; RSS: growth of the build's own RSS)\n")
    rows = []
    for name, f in series.items():
        rows.append([name] + [C.growth(f(a), f(b), a["n"], b["n"]) for a, b in pairs])
    print(C.table(["quantity"] + [f"{a['n']:,}→{b['n']:,}" for a, b in pairs], rows))

    a, b = res[-2], res[-1]
    g = {
        name: C.growth(series[name](a), series[name](b), a["n"], b["n"])
        for name in (
            "dense ANN p50",
            f"dense ANN ef={args.ef} p50",
            "BM25 LanceDB FTS p50",
            "BM25 bm25s p50",
            "BM25 store batched, per query",
            "hybrid store batched, per query",
            "dense brute force p50",
        )
    }
    ok = {name: (v < 1.0) for name, v in g.items() if not math.isnan(v)}
    span = f"{a['n'] // 1000}k→{b['n'] // 1000}k"
    print(
        f"\nTarget: query latency growth {span} sub-linear (< 1) for BM25 and ANN dense: "
        + ", ".join(
            f"{k} {v:.2f} ({'MET' if ok.get(k) else 'NOT MET' if k in ok else 'no ANN at both sizes'})"
            for k, v in g.items()
            if k != "dense brute force p50"
        )
    )
    last = res[-1]
    C.ratio_line(
        "scaling",
        span=span,
        **{k.replace(" ", "_").replace("=", "").replace(",", ""): round(v, 2) for k, v in g.items()},
        store_bm25_batch_speedup=round(last["bm25_fts_batch_ms"] / last["bm25_batch_ms"], 1),
        fragments_after_build=last["fragments_after"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

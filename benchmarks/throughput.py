"""Throughput of t2exp's index build, batched retrieval and end-to-end generation.

1. Index build (documents/s) of the bundled corpus into LanceDB in a fresh temporary directory,
   with every embedding computed (cold: empty embedding cache) and with every embedding read from
   the cache filled by the cold build (warm); and the re-open of a complete index (cache hit).
2. Query throughput (questions/s) on that store, t2exp's batched calls (``Base.retrieve``,
   ``BM25sIndex.search``, ``LanceDBStore.bm25``, ``Hybrid.retrieve``: one call for all questions of a
   subset, query embeddings through the ``CachedEmbedder``) against a naive per-query baseline
   (one question at a time: embed it with the bare model, one store/index call, no batching, no
   cache). Batched is measured twice: query embeddings computed (first call, empty query cache)
   and read from the cache (every later run or sweep cell asking the same questions).
3. End-to-end questions/s with the offline generator (``run_steps``, hybrid k=3) on a tiny
   sample, with an empty LLM cache and again with the warm one.

    python benchmarks/throughput.py            # full corpus, all 2,025 questions, 2 generated answers
    python benchmarks/throughput.py --quick    # 30-document corpora, 60 questions, no generation
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C


def build_all(subsets, emb, store_uri: Path, cache_dir: Path) -> tuple[float, dict]:
    from t2exp.index.build import build_index
    from t2exp.stores.lancedb_store import LanceDBStore

    t0 = time.perf_counter()
    indexes = {}
    for s in subsets:
        indexes[s.name] = build_index(s, emb, LanceDBStore(str(store_uri)), "plain", cache_dir / "locks")
    return time.perf_counter() - t0, indexes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="t2exp throughput: index build, batched vs naive retrieval, end to end")
    ap.add_argument("--quick", action="store_true", help="30-document corpora, 60 questions, no generation")
    ap.add_argument("--corpus-size", type=int, default=None, help="documents per subset (seeded subsample)")
    ap.add_argument("--questions", type=int, default=None, help="questions per subset (default all)")
    ap.add_argument(
        "--generate",
        type=int,
        default=None,
        help="questions per subset answered by the offline generator (default 1; 0 = skip; --quick: 0)",
    )
    ap.add_argument(
        "--naive-questions",
        type=int,
        default=100,
        help="questions (over all subsets) for the naive one-at-a-time baseline; its rate is per question",
    )
    ap.add_argument("--repeats", type=int, default=3, help="batched timings: best of this many runs (the machine is shared)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--keep", help="keep the temporary directory here instead of deleting it")
    args = ap.parse_args(argv)
    C.quiet_logs()
    if args.quick:
        args.corpus_size = args.corpus_size or 30
        args.questions = args.questions or 30
        args.naive_questions = min(args.naive_questions, 30)
        args.generate = 0 if args.generate is None else args.generate

    if args.generate is None:
        args.generate = 1

    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import load_subsets
    from t2exp.embedders.cached import CachedEmbedder
    from t2exp.index.fusion import fuse
    from t2exp.infra.cache import KVCache
    from t2exp.methods.base import Base
    from t2exp.methods.hybrid import Hybrid

    subsets = load_subsets(
        **dataset_args(
            subsets=["FinQA", "TAT-DQA"], source="local", path=C.DEFAULT_DATA, limit=args.questions, seed=0, corpus_size=args.corpus_size
        )
    )
    n_docs = sum(len(s.corpus) for s in subsets)
    n_q = sum(len(s.questions) for s in subsets)
    print(f"# throughput  corpus={n_docs} docs  questions={n_q}  machine: {C.machine()}")
    t0 = time.perf_counter()
    raw = C.raw_embedder()
    print(f"# embedder model load: {time.perf_counter() - t0:.1f}s (not in any figure below)")

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="t2exp-throughput-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        # ---- 1. index build -----------------------------------------------------------------
        cache = tmp / "cache"
        cold_s, indexes = build_all(subsets, C.cached_embedder(raw, cache), cache / "lancedb", cache)
        warm_s, _ = build_all(subsets, C.cached_embedder(raw, cache), tmp / "store_warm", cache)
        reopen_s, reopened = build_all(subsets, C.cached_embedder(raw, cache), cache / "lancedb", cache)
        assert all(ix.cache_hit for ix in reopened.values())
        t0 = time.perf_counter()
        for ix in indexes.values():
            ix.bm25s  # noqa: B018 - the bm25s index is built lazily on first use
        bm25s_s = time.perf_counter() - t0
        print(f"\n## index build: {n_docs} documents into LanceDB (vectors + FTS index)\n")
        print(
            C.table(
                ["build", "seconds", "docs/s"],
                [
                    ["cold: every embedding computed", cold_s, n_docs / cold_s],
                    ["warm: embeddings from the cache", warm_s, n_docs / warm_s],
                    ["re-open of a complete index (cache hit)", reopen_s, n_docs / reopen_s],
                    ["bm25s index (paper tokens), in memory", bm25s_s, n_docs / bm25s_s],
                ],
            )
        )
        print(f"\nwarm/cold build speed-up: {cold_s / warm_s:.1f}x")

        # ---- 2. query throughput -------------------------------------------------------------
        depth = max(args.k, 5)
        cand = 50  # Hybrid's candidate_depth (conf/rag_method/hybrid.yaml)

        per = max(1, args.naive_questions // len(subsets))
        sample = {s.name: s.questions[:per] for s in subsets}
        n_naive = sum(len(v) for v in sample.values())

        def naive(kind: str) -> float:
            t0 = time.perf_counter()
            for s in subsets:
                ix = indexes[s.name]
                for q in sample[s.name]:
                    if kind in ("dense", "hybrid"):
                        v = raw.embed_queries([q.question])
                    if kind == "dense":
                        ix.store.dense(v, depth)
                    elif kind == "bm25s":
                        ix.bm25s.search([q.question], depth)
                    elif kind == "fts":
                        ix.store.bm25([q.question], depth)
                    else:
                        fuse(ix.store.dense(v, cand)[0], ix.bm25s.search([q.question], cand)[0], depth, 0.5)
            return time.perf_counter() - t0

        def batched(kind: str, qcache: Path, repeats: int = 1) -> float:
            return min(_batched(kind, qcache) for _ in range(repeats))

        def _batched(kind: str, qcache: Path) -> float:
            emb = CachedEmbedder(raw, KVCache(qcache / "embeddings.sqlite"))
            method = Base("base") if kind == "dense" else Hybrid()
            t0 = time.perf_counter()
            for s in subsets:
                ix = dataclasses.replace(indexes[s.name], embedder=emb)
                if kind == "bm25s":
                    ix.bm25s.search([q.question for q in s.questions], depth)
                elif kind == "fts":
                    ix.store.bm25([q.question for q in s.questions], depth)
                else:
                    method.retrieve(s.questions, ix, depth)
            return time.perf_counter() - t0

        labels = {
            "dense": "dense (LanceDB vector search)",
            "bm25s": "BM25 (bm25s)",
            "fts": "BM25 (LanceDB FTS)",
            "hybrid": "hybrid = dense + bm25s + fusion",
        }
        raw.embed_queries([q.question for q in sample[subsets[0].name][:8]])  # warm the model's kernels
        rows, ratios = [], {}
        for kind, label in labels.items():
            n_rate = n_naive / naive(kind)
            qcache = tmp / f"qcache_{kind}"
            b_cold = n_q / batched(kind, qcache)
            b_warm = n_q / batched(kind, qcache, args.repeats)
            ratios[kind] = (b_cold / n_rate, b_warm / n_rate)
            rows.append([label, n_rate, b_cold, b_warm, f"{b_cold / n_rate:.1f}x", f"{b_warm / n_rate:.1f}x"])
        # batching must not change what is retrieved: the batched rankings equal one-at-a-time ones
        check = CachedEmbedder(raw, KVCache(tmp / "qcache_check" / "embeddings.sqlite"))
        same = 0
        for s in subsets:
            ix = dataclasses.replace(indexes[s.name], embedder=check)
            for method in (Base("base"), Hybrid()):
                together = method.retrieve(sample[s.name], ix, depth)
                alone = [method.retrieve([q], ix, depth)[0] for q in sample[s.name]]
                same += sum([c for c, _ in a] == [c for c, _ in b] for a, b in zip(together, alone, strict=True))
        n_checked = 2 * n_naive
        print(f"\nbatched vs one-at-a-time rankings (dense, hybrid): {same}/{n_checked} identical")
        # the store call alone, vectors given: what LanceDB's multi-vector search saves
        vecs = {s.name: raw.embed_queries([q.question for q in s.questions]) for s in subsets}
        t0 = time.perf_counter()
        for s in subsets:
            for v in vecs[s.name][:per]:
                indexes[s.name].store.dense(v[None, :], depth)
        n_rate = n_naive / (time.perf_counter() - t0)

        def store_batched() -> float:
            t0 = time.perf_counter()
            for s in subsets:
                indexes[s.name].store.dense(vecs[s.name], depth)
            return time.perf_counter() - t0

        b_rate = n_q / min(store_batched() for _ in range(args.repeats))
        rows.append(["dense search only (vectors given)", n_rate, b_rate, b_rate, f"{b_rate / n_rate:.1f}x", f"{b_rate / n_rate:.1f}x"])
        print(
            f"\n## query throughput, questions/s (batched: {n_q} questions, best of {args.repeats} when cached; "
            f"naive: {n_naive} of them one at a time; depth {depth}; hybrid candidates {cand})\n"
        )
        print(
            C.table(
                [
                    "retrieval",
                    "naive q/s",
                    "batched q/s (query emb. computed)",
                    "batched q/s (query emb. cached)",
                    "ratio (computed)",
                    "ratio (cached)",
                ],
                rows,
                floatfmt=".1f",
            )
        )
        dense_bm25 = ratios["hybrid"]
        print(
            f"\nTarget batched dense+BM25 (hybrid) ≥ 20x naive: query embeddings cached {dense_bm25[1]:.1f}x "
            f"({'MET' if dense_bm25[1] >= 20 else 'NOT MET'}); query embeddings computed {dense_bm25[0]:.1f}x "
            f"({'MET' if dense_bm25[0] >= 20 else 'NOT MET'})"
        )

        # ---- 3. end to end with the offline generator ---------------------------------------------
        e2e = {}
        if args.generate > 0:
            e2e = end_to_end(args, raw, cache, tmp)
        C.ratio_line(
            "throughput",
            hybrid_batched_over_naive_cached=round(dense_bm25[1], 1),
            hybrid_batched_over_naive_computed=round(dense_bm25[0], 1),
            build_warm_over_cold=round(cold_s / warm_s, 1),
            rankings_identical=f"{same}/{n_checked}",
            reopened_hits=f"{sum(ix.cache_hit for ix in reopened.values())}/{len(reopened)}",
            **({"e2e_warm_over_cold": round(e2e["ratio"], 1)} if e2e else {"e2e": "skipped"}),
        )
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def end_to_end(args, raw, cache: Path, tmp: Path) -> dict:
    """``run_steps`` on the components ``python -m t2exp`` would build (``app.build_components``):
    default config (hybrid, offline generator), ``dataset.limit`` questions per subset, the cache
    directory of part 1 (embeddings and indexes warm, LLM cache empty at first)."""
    from t2exp.pipeline.build import build_components
    from t2exp.pipeline.steps import run_steps

    cfg = C.compose(
        [f"k={args.k}", f"dataset.limit={args.generate}", f"paths.cache={cache}", f"paths.models={C.SHARED_CACHE / 'models'}"]
        + ([f"dataset.corpus_size={args.corpus_size}"] if args.corpus_size else [])
    )
    base = build_components(cfg)
    base.parts.embedder = raw  # the same embedder config, model already loaded
    t0 = time.perf_counter()
    base.parts.generator._model  # noqa: B018 - load (and, the first time ever, convert) the model outside the timing
    load_s = time.perf_counter() - t0
    n = sum(len(s.questions) for s in base.parts.subsets)

    def once(run_dir: Path) -> dict:
        comp = dataclasses.replace(base, settings=dataclasses.replace(base.settings, run_dir=run_dir))
        t0 = time.perf_counter()
        res = run_steps(comp)
        return {
            "s": time.perf_counter() - t0,
            "calls": res.metrics.get("llm_calls", 0.0),
            "prompt_tokens": res.metrics.get("prompt_tokens", 0.0),
        }

    cold = once(tmp / "run_cold")
    warm = once(tmp / "run_warm")  # a new run directory: nothing resumed, every answer asked again
    print(
        f"\n## end to end: {n} questions, {cfg.rag_method.name} k={args.k}, offline generator "
        f"{cfg.generator.name} (model load {load_s:.1f}s, not counted)\n"
    )
    print(
        C.table(
            ["LLM cache", "seconds", "questions/s", "model calls", "prompt tokens"],
            [
                ["empty (every answer generated)", cold["s"], n / cold["s"], int(cold["calls"]), int(cold["prompt_tokens"])],
                ["warm (every answer from the cache)", warm["s"], n / warm["s"], int(warm["calls"]), int(warm["prompt_tokens"])],
            ],
            floatfmt=".3f",
        )
    )
    print(f"\nwarm/cold end-to-end speed-up: {cold['s'] / warm['s']:.0f}x")
    return {"ratio": cold["s"] / warm["s"]}


if __name__ == "__main__":
    sys.exit(main())

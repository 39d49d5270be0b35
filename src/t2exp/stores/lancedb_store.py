"""Embedded default store: LanceDB (in-process, persistent). Dense: cosine vector search (1 - distance);
BM25: LanceDB's full-text index; hybrid: ``t2exp.index.fusion`` over both lists, as in Weaviate.

LanceDB answers one FTS query per call; with ``lexical_batch`` (default) ``bm25`` answers a batch at
once from a mirror of the FTS index (bm25s with ``FTS_K1``/``FTS_B``, equal scores, pruned by
``t2exp.index.maxscore``), built by ``finalize`` beside the table. ``finalize`` also compacts the
table's fragments before the FTS index is built.
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from t2exp.index.fusion import fuse
from t2exp.index.lexical import BM25sIndex
from t2exp.infra.contained import remove_file, remove_tree

log = logging.getLogger(__name__)

# LanceDB's FTS scoring (k1, b; scores carry the (k1 + 1) factor) and its tokenizer as configured
# in finalize() (simple, lower case, ASCII folding, no stemming, no stop words): ``t2exp.index.lexical``'s ``alnum``
FTS_K1, FTS_B, FTS_TOKENIZER = 1.2, 0.75, "alnum"


def _table_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", key)[:120]


class LanceDBStore:
    name = "lancedb"

    def __init__(
        self, uri: str, candidate_depth: int = 50, fts_stem: bool = False, lexical_batch: bool = True, compact: bool = True
    ) -> None:
        import lancedb

        self.uri = str(uri)
        Path(self.uri).mkdir(parents=True, exist_ok=True)
        self.db = lancedb.connect(self.uri)
        self.candidate_depth = candidate_depth
        self.fts_stem = fts_stem
        self.lexical_batch = lexical_batch and not fts_stem  # the mirror has no stemmer: stemmed FTS is asked per query
        self.compact = compact
        self._mirror: BM25sIndex | None = None
        self.table: Any = None  # a lancedb Table once open() found it or add() created it
        self.table_name: str | None = None
        self.inserted = 0

    def _marker(self) -> Path:
        return Path(self.uri) / f"{self.table_name}.complete.json"

    def _mirror_dir(self) -> Path:
        return Path(self.uri) / f"{self.table_name}.bm25s"

    def open(self, key: str) -> bool:
        self.table_name = _table_name(key)
        exists = self.table_name in self.db.list_tables().tables
        if exists and self._marker().exists():
            problem = self._verify()
            if problem is None:
                return True
            # a complete-marked table whose data cannot be read (files deleted or damaged): rebuilt
            # from the cached embeddings rather than trusted
            log.warning("lancedb: table %s is marked complete but %s; rebuilding it", self.table_name, problem)
            remove_file(self._marker(), self.uri, missing_ok=True)
        elif exists:  # an interrupted build: start over
            log.warning("lancedb: dropping incomplete table %s", self.table_name)
        if exists:
            try:
                self.db.drop_table(self.table_name)
            except Exception:  # a damaged table may not even drop: remove its directory
                remove_tree(Path(self.uri) / f"{self.table_name}.lance", self.uri, ignore_errors=True)
        self.table = None
        remove_tree(self._mirror_dir(), self.uri, ignore_errors=True)
        return False

    def _verify(self) -> str | None:
        """None when the table opens, has the rows its marker recorded, and its data reads back."""
        assert self.table_name is not None, "open() names the table"
        try:
            self.table = self.db.open_table(self.table_name)
            rows = int(json.loads(self._marker().read_text()).get("rows", -1))
            n = self.count()
            if rows >= 0 and n != rows:
                return f"has {n} rows, not the {rows} it was built with"
            self.table.search().select(["id"]).limit(max(n, 1)).to_arrow()  # every fragment opened (ids only: cheap)
        except Exception as exc:  # lance raises several kinds for missing/damaged files
            return f"cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})"
        return None

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, metadata: Sequence[dict]) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        dim = vectors.shape[1]
        batch = pa.table(
            {
                "id": pa.array(list(ids), pa.string()),
                "text": pa.array(list(texts), pa.string()),
                "metadata": pa.array([json.dumps(m, sort_keys=True) for m in metadata], pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
            }
        )
        if self.table is None:
            assert self.table_name is not None, "open() names the table"
            self.table = self.db.create_table(self.table_name, data=batch, mode="overwrite")
        else:
            self.table.add(batch)
        self.inserted += len(ids)

    def finalize(self) -> None:
        from lancedb.index import FTS

        if self.compact:  # one fragment per add() batch: merged, and the superseded files removed
            with warnings.catch_warnings():  # "removes every version but the latest": the build lock keeps readers out
                warnings.simplefilter("ignore", UserWarning)
                self.table.optimize(cleanup_older_than=timedelta(0))
        self.table.create_index("text", config=FTS(stem=self.fts_stem, lower_case=True, remove_stop_words=False), replace=True)
        if self.lexical_batch:
            self._build_mirror().save(self._mirror_dir())
        self._marker().write_text(json.dumps({"rows": self.count()}))

    def fragments(self) -> int:
        return int(self.table.stats()["fragment_stats"]["num_fragments"])

    def _build_mirror(self) -> BM25sIndex:
        rows = self.table.search().select(["id", "text"]).limit(max(self.count(), 1)).to_arrow()
        self._mirror = BM25sIndex(
            rows.column("id").to_pylist(),
            rows.column("text").to_pylist(),
            k1=FTS_K1,
            b=FTS_B,
            tokenizer=FTS_TOKENIZER,
            scale=FTS_K1 + 1,
            pruned=True,
        )
        return self._mirror

    def _lexical_mirror(self) -> BM25sIndex:
        """The FTS mirror: loaded from its directory, rebuilt from the table when missing (a table
        built before the mirror existed)."""
        if self._mirror is None:
            try:
                self._mirror = BM25sIndex.load(self._mirror_dir(), pruned=True)
            except (OSError, ValueError, KeyError):
                log.info("lancedb: building the batched BM25 of table %s", self.table_name)
                self._build_mirror().save(self._mirror_dir())
        assert self._mirror is not None
        return self._mirror

    def count(self) -> int:
        return 0 if self.table is None else int(self.table.count_rows())

    def _depth(self, k: int) -> int:
        return min(max(k, 1), self.count())

    def dense(self, query_vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        q = np.asarray(query_vectors, dtype=np.float32)
        if len(q) == 0:
            return []
        k = self._depth(k)
        res = self.table.search(list(q)).distance_type("cosine").limit(k).select(["id", "_distance"]).to_arrow().to_pydict()
        qidx = res.get("query_index", [0] * len(res["id"]))
        out: list[list[tuple[str, float]]] = [[] for _ in range(len(q))]
        for i, cid, dist in zip(qidx, res["id"], res["_distance"], strict=True):
            out[i].append((cid, 1.0 - float(dist)))
        for hits in out:
            hits.sort(key=lambda h: -h[1])
        return out

    def bm25(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        k = self._depth(k)
        if self.lexical_batch:
            stripped = [q.strip() for q in queries]
            hits = self._lexical_mirror().search([q or "\x00" for q in stripped], k)
            return [h if q else [] for q, h in zip(stripped, hits, strict=True)]
        out: list[list[tuple[str, float]]] = []
        for q in queries:
            q = q.strip()
            if not q:
                out.append([])
                continue
            rows = self.table.search(q, query_type="fts").limit(k).select(["id", "_score"]).to_list()
            out.append([(r["id"], float(r["_score"])) for r in rows])
        return out

    def hybrid(
        self, queries: Sequence[str], query_vectors: np.ndarray, k: int, alpha: float, fusion: str = "relative_score"
    ) -> list[list[tuple[str, float]]]:
        depth = max(k, self.candidate_depth)
        dense = self.dense(query_vectors, depth)
        lexical = self.bm25(queries, depth)
        return [fuse(d, s, k, alpha, fusion) for d, s in zip(dense, lexical, strict=False)]

    def close(self) -> None:
        """Nothing to release for the embedded store (kept for the Store contract)."""
        self.table = None
        self._mirror = None

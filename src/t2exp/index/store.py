"""What an index needs of a store (:mod:`t2exp.stores` has the implementations): a persistent
document collection with dense, BM25 and hybrid search. All query methods are batched (one call,
many queries) and return, per query, a ranked list of ``(context_id, score)`` pairs, best first.
Stores satisfy it by shape (a Protocol); nothing here imports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

Hits = list[tuple[str, float]]


@runtime_checkable
class Store(Protocol):
    name: str
    inserted: int  # rows added by this object (0 when the collection was already built)

    def open(self, key: str) -> bool:
        """Create-or-open the collection for ``key``; True when it already holds a complete build."""

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, metadata: Sequence[dict]) -> None: ...

    def finalize(self) -> None:
        """Build secondary indices (BM25) and mark the collection complete."""

    def count(self) -> int: ...

    def dense(self, query_vectors: np.ndarray, k: int) -> list[Hits]: ...

    def bm25(self, queries: Sequence[str], k: int) -> list[Hits]: ...

    def hybrid(
        self, queries: Sequence[str], query_vectors: np.ndarray, k: int, alpha: float, fusion: str = "relative_score"
    ) -> list[Hits]: ...

    def close(self) -> None:
        """Release connections (a no-op for embedded stores)."""

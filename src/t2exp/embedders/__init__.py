"""Embedders: text → vectors. One protocol, several families, one persistent cache."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int
    max_tokens: int
    batch_size: int  # texts per call: the cache commits after each batch

    @property
    def fingerprint(self) -> str:
        """Identifies the vectors this embedder produces (model, revision, templates, options)."""

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...

"""Embedders: text → vectors. One protocol, several families, one persistent cache."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int
    max_tokens: int

    @property
    def fingerprint(self) -> str:
        """Identifies the vectors this embedder produces (model, revision, templates, options)."""

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto``: bfloat16 on CUDA and on CPUs with native bf16 arithmetic (AVX512-BF16 or AMX), where
    it is several times faster than float32 (1.5B model, 1,900-token prefill: 6.45 s vs 22.77 s,
    ``benchmarks/dtype.py``); float32 on other CPUs, where bf16 is emulated and slower."""
    if dtype != "auto":
        return dtype
    if device.startswith("cuda"):
        return "bfloat16"
    try:
        import torch

        native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except (ImportError, AttributeError):  # pragma: no cover - older torch
        native = False
    return "bfloat16" if native else "float32"


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch

        if torch.cuda.is_available():
            return "cuda"
    except ImportError:  # pragma: no cover
        pass
    return "cpu"

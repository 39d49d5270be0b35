"""Where a local model runs and in which precision: the one rule of every model t2exp loads
itself (embedder, reranker, generator), so ``device=auto dtype=auto`` means the same for all.

``auto`` device: ``cuda`` when a GPU is visible, else ``cpu``. ``auto`` dtype: bfloat16 where the
hardware computes it natively (a CUDA GPU that supports it; a CPU with AVX512-BF16 or AMX), where it
is several times faster than float32 (1.5B model, 1,900-token prefill: 6.45 s vs 22.77 s,
``benchmarks/dtype.py``); float16 on a CUDA GPU without bf16; float32 on other CPUs, where bf16
is emulated and slower. The resolved name is part of each model's fingerprint, so indices and
answers made in one precision are never reused for another.
"""

from __future__ import annotations

DTYPES = ("auto", "float32", "bfloat16", "float16")


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


def native_bf16(device: str) -> bool:
    """Whether ``device`` (resolved) computes bfloat16 in hardware."""
    try:
        import torch

        if device.startswith("cuda"):
            return bool(torch.cuda.is_bf16_supported())
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (ImportError, AttributeError):  # pragma: no cover - older torch
        return False


def resolve_dtype(dtype: str, device: str) -> str:
    """The torch dtype name ``dtype`` means on ``device`` (resolved): ``auto`` by the rule above."""
    if dtype != "auto":
        return dtype
    if native_bf16(device):
        return "bfloat16"
    return "float16" if device.startswith("cuda") else "float32"

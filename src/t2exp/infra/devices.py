"""Where a local model runs and in which precision: the one rule of every model t2exp loads
itself (embedder, reranker, generator), so ``device=auto dtype=auto`` means the same for all.

``auto`` device: ``cuda`` when a GPU is visible, else ``cpu``. ``auto`` dtype: bfloat16 where the
hardware computes it natively (a CUDA GPU that supports it; a CPU with AVX512-BF16 or AMX), where it
is several times faster than float32 (1.5B model, 1,900-token prefill: 6.45 s vs 22.77 s,
``benchmarks/dtype.py``); float16 on a CUDA GPU without bf16; float32 on other CPUs, where bf16
is emulated and slower. The resolved name is part of each model's fingerprint, so indices and
answers made in one precision are never reused for another.

On Linux both are read from the machine (GPU device nodes, the CPU's flags) without importing
torch, so a run whose vectors and answers are all cached never loads it; torch answers elsewhere
and wherever a GPU's device node is present.
"""

from __future__ import annotations

import os
import sys

DTYPES = ("auto", "float32", "bfloat16", "float16")
# a GPU torch could use shows one of these: NVIDIA's control device, ROCm's, WSL's
GPU_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def _linux_cpu_flags() -> set[str] | None:
    """The CPU's feature flags on Linux without a GPU device node (None: ask torch)."""
    if sys.platform != "linux" or any(os.path.exists(p) for p in GPU_NODES):
        return None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def resolve_device(device: str) -> str:
    if device != "auto" or _linux_cpu_flags() is not None:
        return "cpu" if device == "auto" else device
    try:
        import torch

        if torch.cuda.is_available():
            return "cuda"
    except ImportError:  # pragma: no cover
        pass
    return "cpu"


def native_bf16(device: str) -> bool:
    """Whether ``device`` (resolved) computes bfloat16 in hardware."""
    flags = _linux_cpu_flags() if device == "cpu" else None
    if flags is not None:  # the flags torch's checks read
        return bool(flags & {"avx512_bf16", "amx_tile"})
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

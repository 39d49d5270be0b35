"""A t2exp cache given what a test needs before its run."""

from __future__ import annotations

from pathlib import Path


def warm(cache: Path, embeddings: Path) -> Path:
    """``cache`` (a t2exp ``paths.cache``) holding ``embeddings`` as its embedding cache: every
    corpus vector found, nothing else (indices, runs, LLM answers) there yet."""
    import shutil

    cache.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(embeddings, cache / "embeddings.sqlite")
    return cache

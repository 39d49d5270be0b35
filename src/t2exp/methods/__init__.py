"""RAG methods: how a question's contexts are chosen. One module per method, a registry by name.

A method returns, per question, a ranked list of ``(context_id, score)`` (``None`` when the method
does no retrieval) and the context texts handed to the generator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from t2exp.data import Question
from t2exp.errors import ConfigError
from t2exp.indexing import Index

Hits = list[tuple[str, float]]

REGISTRY: dict[str, Callable[..., "RagMethod"]] = {}


def register(name: str):
    def deco(cls):
        REGISTRY[name] = cls
        cls.method_name = name
        return cls

    return deco


@runtime_checkable
class RagMethod(Protocol):
    name: str
    needs_index: bool

    def retrieve(self, questions: Sequence[Question], index: Index | None, k: int) -> list[Hits] | None: ...

    def contexts(self, question: Question, hits: Hits | None, index: Index | None, k: int) -> list[str]: ...


class RetrievingMethod:
    """Shared behaviour: generation gets the original documents of the top-k hits."""

    needs_index = True

    def contexts(self, question: Question, hits: Hits | None, index: Index | None, k: int) -> list[str]:
        assert index is not None
        return [index.docs[cid].text for cid, _ in (hits or [])[:k]]


def build_method(cfg: dict) -> RagMethod:
    cfg = dict(cfg)
    name = cfg.pop("name", None)
    # import for registration side effects
    from t2exp.methods import base, hybrid, oracle, pretrained_only  # noqa: F401

    if name not in REGISTRY:
        raise ConfigError(f"rag_method.name={name!r}: allowed values are {', '.join(sorted(REGISTRY))}")
    try:
        return REGISTRY[name](**cfg)
    except TypeError as exc:
        raise ConfigError(f"rag_method={name}: {exc}") from None

"""sentence-transformers CrossEncoder reranker (paper: cross-encoder/ms-marco-MiniLM-L-6-v2)."""

from __future__ import annotations

from functools import cached_property

from t2exp.infra import model_hub
from t2exp.infra.devices import resolve_device, resolve_dtype
from t2exp.rerankers import TruncationCounter


class CrossEncoderReranker:
    def __init__(
        self,
        name: str,
        model: str,
        revision: str | None = None,
        max_length: int = 512,
        max_chars: int | None = None,
        batch_size: int = 32,
        device: str = "auto",
        dtype: str = "auto",
    ) -> None:
        self.name = name
        self.model_id = model
        self.revision = revision
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.trunc = TruncationCounter(max_chars)

    @cached_property
    def model(self):
        import torch
        from sentence_transformers import CrossEncoder

        kwargs = {"dtype": getattr(torch, self.dtype)}
        return model_hub.load(
            lambda: CrossEncoder(
                self.model_id, max_length=self.max_length, device=self.device, revision=self.revision, model_kwargs=kwargs
            ),
            "reranker",
            self.model_id,
            self.revision,
        )

    def score(self, query: str, documents: list[str]) -> list[float]:
        docs = self.trunc.apply(documents)
        if not docs:
            return []
        scores = self.model.predict([(query, d) for d in docs], batch_size=self.batch_size, show_progress_bar=False)
        return [float(s) for s in scores]

    def stats(self) -> dict[str, float]:
        return self.trunc.stats()

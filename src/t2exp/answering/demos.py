"""Retrieved demonstrations: worked answers of similar questions shown before the real one.

A pool is ``<paths.prompts>/demos/<name>.jsonl`` (``generator.demos=<name>``), one solved question a line::

    {"id": "...", "context_id": "...", "subset": "FinQA", "question": "...", "answer": "<the answer text>"}

The ``generator.demos_k`` most alike (IDF-weighted word overlap, numbers and company names ignored;
ties by pool order) go into the template's ``demos``, best last. Entries with the question's ``id``
or ``context_id`` are skipped, so a pool never hands a question its answer or its report's numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from t2exp.answering.context import terms
from t2exp.data.loader import read_jsonl_objects
from t2exp.errors import ConfigError, DataError

KEYS = ("id", "context_id", "question", "answer")
_STOP = frozenset("a an and are as at be by did do does for from in is it its of on or the their this to was were what which with".split())


@dataclass(frozen=True)
class Demo:
    id: str
    context_id: str
    subset: str
    question: str
    answer: str


def words(question: str) -> set[str]:
    """The question's words that say what is asked: lower-case, no numbers, no stop words."""
    return {t for t in terms(question) if not t[0].isdigit() and t not in _STOP}


class DemoPool:
    def __init__(self, demos: list[Demo]) -> None:
        self.demos = demos
        self._words = [words(d.question) for d in demos]
        df = Counter(w for ws in self._words for w in ws)
        n = len(demos)
        self._idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    @classmethod
    def load(cls, directory: str | Path, name: str) -> DemoPool:
        path = Path(directory) / "demos" / f"{name}.jsonl"
        if not path.is_file():
            found = sorted(p.stem for p in path.parent.glob("*.jsonl")) if path.parent.is_dir() else []
            raise ConfigError(f"generator.demos={name!r}: no file {path}; pools there: {', '.join(found) or 'none'}")
        try:
            rows = read_jsonl_objects(path)
        except DataError as exc:
            raise ConfigError(f"generator.demos={name!r}: {exc}") from None
        demos = []
        for n, row in enumerate(rows, 1):
            missing = [k for k in KEYS if not isinstance(row.get(k), str) or not row[k]]
            if missing:
                raise ConfigError(f"generator.demos={name!r}: {path} entry {n} lacks {', '.join(missing)}")
            demos.append(Demo(row["id"], row["context_id"], str(row.get("subset", "")), row["question"], row["answer"]))
        if not demos:
            raise ConfigError(f"generator.demos={name!r}: {path} holds no demonstrations")
        return cls(demos)

    def select(self, question: str, k: int, exclude_id: str = "", exclude_context: str = "", company: str = "") -> list[Demo]:
        """The ``k`` demonstrations most like ``question``, least like first (the best one ends
        next to the real question); never one with ``exclude_id`` or ``exclude_context``. The
        words of ``company`` (the question's company name) do not count: a demonstration is
        chosen for what it asks, not whose report it read."""
        wanted = words(question) - words(company.replace("-", " "))
        scored = [
            (-math.fsum(self._idf[w] for w in wanted & ws), i)  # fsum: exact in any set order (string hashes differ per process)
            for i, (d, ws) in enumerate(zip(self.demos, self._words, strict=True))
            if d.id != exclude_id and d.context_id != exclude_context
        ]
        best = sorted(scored)[:k]
        return [self.demos[i] for _, i in reversed(best)]

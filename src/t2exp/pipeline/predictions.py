"""A run's predictions: one row per question, written by :class:`PredictionWriter` the moment it
exists (a resumed run reads them back and asks nothing twice), and the leaderboard file."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from t2exp.data.records import Question, Subset
from t2exp.evaluation.scoring.cell_rows import Prediction
from t2exp.generators import Generation
from t2exp.infra.cache import JsonlLog, atomic_write_text, jsonl_line
from t2exp.infra.progress import Stage, stage
from t2exp.pipeline.stop import StopRequest

log = logging.getLogger("t2exp.pipeline.steps")


Span = tuple[int, int]  # (start, end) in ns since the epoch
OnRow = Callable[[Prediction, Mapping[str, Span]], None]
# a cell's files in its run directory (a shard's in its own)
PREDICTIONS_FILE, LEADERBOARD_FILE = "predictions.jsonl", "leaderboard.jsonl"


@dataclass
class Tally:
    """What a writer counts as it writes: the generator's answers (reasoning tokens, truncations,
    model seconds) and each question's stage times (a cell's prompt and completion tokens are
    counted once from its rows: :func:`t2exp.evaluation.scoring.cell_rows.usage`)."""

    tokens: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("reasoning_tokens", "truncated_generations", "model_seconds"), 0)
    )
    generated: int = 0
    # question id -> stage (retrieve, generate, score) -> (start, end) in ns since the epoch: the
    # real times of each question's stages, which its MLflow trace shows (a batch's window for
    # the questions it held; a generation ends when its answer arrived)
    spans: dict[str, dict[str, Span]] = field(default_factory=dict)

    def answer(self, g: Generation) -> None:
        self.generated += 1
        if not g.cached:
            self.tokens["model_seconds"] += g.seconds
        self.tokens["reasoning_tokens"] += int(g.extra.get("reasoning_tokens", 0) or 0)
        self.tokens["truncated_generations"] += int(g.finish_reason == "length")


@dataclass
class Written:
    """What a writer hands back when the run is done: every row in the run's question order, and
    what it counted (:class:`Tally`)."""

    rows: list[Prediction]
    tally: Tally


class PredictionWriter:
    """Writes each question's row once (:meth:`Prediction.of`) to ``predictions.jsonl``: in question
    order normally, as answers arrive when the run is stopping or a request failed. The rows
    already in the file (a resumed run) count as written. It counts what it writes (its
    :class:`Tally`) and advances the generate stage's progress bar (:meth:`progress`)."""

    def __init__(self, path: Path, stop: StopRequest, *, answer_mode: str, grounding: str, k: int, on_row: OnRow | None = None) -> None:
        self.log = JsonlLog(path)
        self.path = self.log.path
        self.done = {str(r["id"]): Prediction.from_json(r) for r in self.log.read()}
        if self.done:
            log.info("resuming: %d predictions already in %s", len(self.done), self.log.path)
        self.stop = stop
        self.answer_mode, self.grounding, self.k = answer_mode, grounding, k
        self._tally = Tally()
        self.on_row = on_row  # each row written, with its stage times (not while the run stops)
        self._bar: Stage | None = None  # the generate stage's progress, while one is shown

    def todo(self, subsets: Sequence[Subset]) -> dict[str, list[Question]]:
        """Each subset's questions still to answer (none written yet)."""
        return {s.name: [q for q in s.questions if q.id not in self.done] for s in subsets}

    @contextmanager
    def progress(self, title: str, total: int) -> Iterator[None]:
        """Show the generate stage's progress while the block runs: one step per answer written."""
        with stage(title, total, "answer") as bar:
            self._bar = bar
            try:
                yield
            finally:
                self._bar = None

    def write(self, q: Question, hits, contexts: list[str], gen: Generation | None, spans: Mapping[str, Span] | None = None) -> None:
        """``q``'s row, unless written already; ``spans``: its retrieve and generate windows."""
        if q.id in self.done:
            return
        with self.stop.atomic():  # a second Ctrl-C between the line and its record wrote the answer twice
            t0 = time.time_ns()
            row = Prediction.of(q, hits, contexts, gen, self.answer_mode, self.grounding, self.k)
            self._tally.spans[q.id] = {**(spans or {}), "score": (t0, time.time_ns())}
            self.log.write(row.to_json())
            self.done[q.id] = row
        if self.on_row is not None and not self.stop.is_set():
            self.on_row(row, self._tally.spans[q.id])
        if gen is not None:
            self._tally.answer(gen)
            if self._bar is not None:
                self._bar.advance()
                if gen.cached:
                    self._bar.tally("from the LLM cache")

    def finish(self, subsets: Sequence[Subset], leaderboard: Path) -> Written:
        """Every question's row in the run's question order (the file rewritten in it when answers
        were written out of order: a stop, then a resume) and the ``leaderboard`` file."""
        rows = [self.done[q.id] for s in subsets for q in s.questions]
        write_rows(rows, self.path if list(self.done) != [r.id for r in rows] else None, leaderboard)
        return Written(rows=rows, tally=self._tally)


def write_rows(rows: Sequence[Prediction], predictions: Path | None, leaderboard: Path) -> None:
    """``predictions`` as a finished run leaves it (None: left as written): one line per question in
    the run's question order (subset by subset, each subset's sampled order), each as
    :class:`PredictionWriter` wrote it; and the ``leaderboard``, the official submission format (id,
    subset, context_id, prediction). A run whose file ended up in another order (answers written as
    they arrived when it was stopped, then resumed) and the merge of a sharded cell both end so."""
    if predictions is not None:
        atomic_write_text(predictions, "".join(jsonl_line(r.to_json()) for r in rows))
    board = [
        {"id": r.id, "subset": r.subset, "context_id": r.retrieved[0] if r.retrieved else None, "prediction": r.prediction} for r in rows
    ]
    atomic_write_text(leaderboard, "".join(json.dumps(b) + "\n" for b in board))

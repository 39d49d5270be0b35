"""Where answers go wrong: each scored prediction of a run gets one error category.

``t2exp report --errors RUN`` (a run id or a ``predictions.jsonl`` path) prints the
breakdown per subset. The categories are tried in this order; the first that fits is the one:

- ``correct``: Number Match holds (``nm`` = 1).
- ``not_retrieved``: the gold document was not among the documents the generator read (the
  first ``n_contexts`` of ``retrieved``): an end-to-end miss that retrieval, not the answer, owns.
  Runs without retrieval (``pretrained_only``) have none.
- ``no_number``: nothing parsed to a number (no program, invalid JSON, prose only).
- ``runaway``: a degenerate prediction (:func:`numbers.is_degenerate`, e.g. ``0.0000…``) or an
  answer cut off at ``max_tokens``.
- ``near_miss``: within 5 % of the gold after NM's power-of-ten normalisation: the right
  computation with rounded inputs or a rounded result.
- ``growth_vs_level``: the prediction matches 1 + gold, 100 + gold or their differences from
  1 / 100: a level (137.8 for an index that started at 100) where a change was asked, or the
  reverse.
- ``inverted``: the prediction matches 1 / gold: the ratio the wrong way round.
- ``ungrounded``: the program uses a number that is not in the evidence the generator read
  (``grounded`` = false; recorded when ``generator.grounding`` is ``check`` or ``prefer``).
- ``wrong_lookup``: the program is a single number copied from the evidence, not the answer.
- ``wrong_operation``: a program over numbers of the evidence that computes something else.
- ``wrong_value``: any other wrong number (``direct``/``cot`` answers carry no program).

The categories are read off the numbers, so they are heuristics: Number Match ignores powers of
ten, and a wrong answer can match 1 + gold or 1 / gold by coincidence (a gold of 1 makes 2 a
``growth_vs_level``). Read them as where to look, next to the predictions themselves.
Questions whose gold is not numeric are not scored (``nm`` is None) and not counted. Sign and
powers of ten never make an answer wrong (Number Match ignores them), so they are no category.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from t2exp.answering.safe_exec import program_literals
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import recall_at
from t2exp.text.numbers import number_match

CATEGORIES = (
    "correct",
    "not_retrieved",
    "no_number",
    "runaway",
    "near_miss",
    "growth_vs_level",
    "inverted",
    "ungrounded",
    "wrong_lookup",
    "wrong_operation",
    "wrong_value",
)
NEAR = 5e-2


def category(row: Mapping[str, Any]) -> str:
    """The error category of one scored prediction (see the module docstring)."""
    if row.get("nm") == 1:
        return "correct"
    retrieved, read = row.get("retrieved") or [], int(row.get("n_contexts") or 0)
    if retrieved and read and not recall_at(retrieved, str(row.get("context_id")), read):
        return "not_retrieved"
    pred, gold = row.get("prediction"), row.get("gold")
    if pred is None or not math.isfinite(float(pred)):
        return "no_number"
    if row.get("degenerate") == 1 or row.get("finish_reason") == "length":
        return "runaway"
    if gold is None:
        return "wrong_value"
    p, g = abs(float(pred)), abs(float(gold))
    if number_match(p, g, eps=NEAR):
        return "near_miss"
    if any(number_match(p, x) for x in (1 + g, 100 + g, abs(1 - g), abs(100 - g)) if x > 0):
        return "growth_vs_level"
    if g > 0 and number_match(p, 1 / g):
        return "inverted"
    if row.get("grounded") is False:
        return "ungrounded"
    program = row.get("program")
    if program:
        return "wrong_lookup" if len(program_literals(str(program))) == 1 else "wrong_operation"
    return "wrong_value"


def breakdown(rows: Iterable[Mapping[str, Any]]) -> dict[str, Counter[str]]:
    """Counts of each category per subset and over all (``all``), scored questions only."""
    out: dict[str, Counter[str]] = {"all": Counter()}
    for row in rows:
        if row.get("nm") is None:
            continue
        cat = category(row)
        out.setdefault(str(row.get("subset")), Counter())[cat] += 1
        out["all"][cat] += 1
    return out


def render(counts: Mapping[str, Counter[str]], title: str = "") -> str:
    """A Markdown table: one row per category, per subset the count and its share of the questions."""
    subsets: Sequence[str] = [s for s in sorted(counts) if s != "all"] + ["all"]
    head = ["category", *(f"{s} {unit}" for s in subsets for unit in ("n", "%"))]
    rows = []
    for cat in CATEGORIES:
        cells = [cat]
        for s in subsets:
            total = sum(counts[s].values())
            n = counts[s].get(cat, 0)
            cells += [str(n), tabular.value(100 * n / total if total else None)]
        rows.append(cells)
    rows.append(["scored", *(v for s in subsets for v in (str(sum(counts[s].values())), tabular.value(100.0)))])
    return "\n".join([f"errors of {title}" if title else "errors", "", tabular.markdown(head, rows)])

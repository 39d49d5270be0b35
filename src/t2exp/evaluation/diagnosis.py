"""Where answers go wrong: each scored prediction of a run gets one error category
(``t2exp report --errors RUN``, per subset). The first category that fits, in this order:

- ``correct``: ``nm`` = 1; ``not_retrieved``: the gold document is not among the first
  ``n_contexts`` of ``retrieved`` (none for runs without retrieval);
- ``no_number``: nothing parsed to a number; ``runaway``: degenerate (``0.0000…``) or cut at ``max_tokens``;
- ``near_miss``: within 5 % of the gold after NM's power-of-ten normalisation;
- ``growth_vs_level``: matches 1 + gold, 100 + gold or their differences from 1 / 100;
  ``inverted``: matches 1 / gold;
- ``ungrounded``: the program uses a number not in the evidence (``grounded`` = false);
- ``wrong_lookup``: a single number copied from the evidence; ``wrong_operation``: a program over
  the evidence's numbers that computes something else; ``wrong_value``: any other wrong number.

Heuristics read off the numbers (a gold of 1 makes 2 a ``growth_vs_level``): where to look, not a
verdict. Questions with a non-numeric gold (``nm`` None) are not counted; sign and powers of ten are
no category (Number Match ignores them).
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

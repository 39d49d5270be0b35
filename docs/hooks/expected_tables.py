"""The results tables of the docs, generated from the expected-numbers files (``expected/*.yaml``)
that ``t2exp reproduce`` checks, read by the same loader (``t2exp.evaluation.expected.load_table``): the
prose and the checked numbers cannot drift apart."""

from __future__ import annotations

import shlex
from pathlib import Path

from config_tables import cell, code

from t2exp.evaluation.expected import Condition, ExpectedTable, load_table, load_tables


def _num(v: float) -> str:
    text = f"{v:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _cell(c: Condition, key: str) -> str:
    if key not in c.expected:
        return "–"
    text = _num(c.expected[key])
    if key in c.intervals:
        lo, hi = c.intervals[key]
        text += f" [{_num(lo)}, {_num(hi)}]"
    return text


def results_table(expected_dir: Path, name: str) -> str:
    """One file's conditions as a Markdown table (rows: conditions; columns: its metrics), then how
    it was measured and the command that checks it."""
    table = load_table(expected_dir / f"{name}.yaml")
    return render(table)


def render(table: ExpectedTable) -> str:
    keys = list(table.metrics)
    notes = any(c.note for c in table.conditions)
    head = ["condition", *(cell(table.metrics[k]) for k in keys)] + (["note"] if notes else [])
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(keys) + ("---|" if notes else "")]
    for c in table.conditions:
        label = c.label if c.label != c.name else code(c.name)
        cells = [label, *(_cell(c, k) for k in keys)] + ([cell(c.note)] if notes else [])
        rows.append("| " + " | ".join(cells) + " |")
    tols = sorted({t for c in table.conditions for t in c.tolerance.values()})
    tol = " / ".join(f"±{_num(t)}" for t in tols)
    cost = "retrieval only" if table.retrieval_only else "with a generator"
    out = ["\n".join(rows), ""]
    checked = f" Last checked {cell(table.checked)}." if table.checked else ""
    out.append(f"<small>Measured {cell(table.measured)}.{checked} Brackets: 95 % bootstrap CIs (shown, not checked). "
               f"Checked to {tol} by `t2exp reproduce {table.name}` ({cost}; `expected/{table.path.name}`).</small>")
    out.append("")
    out.append(f'??? note "The command of each row ({len(table.conditions)})"')
    out.append("")
    for c in table.conditions:
        out.append(f"    - `{c.name}`: `{c.command()}`")
    out.append("")
    return "\n".join(out)


def index_table(expected_dir: Path) -> str:
    """Every expected-numbers file: its conditions, what they cost and the command that checks them."""
    rows = ["| file | table | conditions | cost | check |", "|---|---|---:|---|---|"]
    for t in load_tables(expected_dir):
        cost = "retrieval only" if t.retrieval_only else "with a generator"
        if t.minutes is not None:
            cost += f", ~{t.minutes:g} min on 2 cores" if t.minutes < 120 else f", ~{t.minutes / 60:g} h on 2 cores"
        ci = [c.name for c in t.conditions if c.ci]
        if ci:
            cost += f"; CI runs {', '.join(code(n) for n in ci)}"
        check = code("t2exp reproduce " + shlex.quote(t.name))
        rows.append(f"| `{t.path.name}` | {cell(t.title)} | {len(t.conditions)} | {cost} | {check} |")
    return "\n".join(rows) + "\n"

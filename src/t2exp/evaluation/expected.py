"""The expected-numbers files (``expected/*.yaml``, or ``--expected DIR``): reproductions as data, one
file per table, checked here (one line per error naming the file and field), run by ``t2exp reproduce``
and rendered into the docs. Tolerances are in the metric's unit (percentage points). A file::

    title: The default run's retrieval
    command: python -m t2exp generator=none      # how the table was made, for the reader
    measured: 2026-12-04, 2 CPU cores            # when and where (shown in the docs)
    checked: "2026-12-04, every metric OK"       # the last full t2exp reproduce of the file
    retrieval_only: true                         # no generator: a cheap condition (--cheap)
    tolerance: 0.1                               # default for every metric of every condition
    metrics: {avg/mrr_at_3: Avg MRR@3, avg/recall_at_1: Avg R@1}   # the columns, in order
    conditions:
      - name: default-retrieval
        overrides: [generator=none]
        ci: true                                 # CI runs it
        expected: {avg/mrr_at_3: 95.8, avg/recall_at_1: 91.7}
        intervals: {avg/mrr_at_3: [87.5, 100.0]} # 95 % CIs, shown in the docs, not checked
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2exp.errors import one_line
from t2exp.infra.contained import SEGMENT_RULE, is_plain_segment
from t2exp.infra.redaction import redact_overrides


class ExpectedError(Exception):
    """A malformed expected-numbers file or a selection that names nothing."""


@dataclass
class Condition:
    """One row of a table: the overrides of one run and the metrics it is expected to log."""

    table: str
    name: str
    overrides: list[str]
    expected: dict[str, float]
    tolerance: dict[str, float]
    label: str = ""
    retrieval_only: bool = False
    ci: bool = False
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.table}/{self.name}"

    def command(self, python: str = "python") -> str:
        """The run's command line as it is shown (secrets as ``***``)."""
        return " ".join([python, "-m", "t2exp", *(shlex.quote(o) for o in redact_overrides(self.overrides))])


@dataclass
class ExpectedTable:
    """One expected-numbers file."""

    name: str
    path: Path
    title: str
    description: str
    command: str
    measured: str
    checked: str
    retrieval_only: bool
    minutes: float | None
    metrics: dict[str, str]
    conditions: list[Condition]


# --- the files ------------------------------------------------------------------------------------
def default_expected_dir() -> Path:
    """``expected/`` next to the configs the app reads (the checkout's, or a package's copy)."""
    from t2exp.infra import paths

    for root in (paths.RESOURCE_ROOT, paths.CHECKOUT_ROOT):
        if root is not None and (root / "expected").is_dir():
            return root / "expected"
    return paths.RESOURCE_ROOT / "expected"


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExpectedError(f"{where}: {value!r} is not a number")
    return float(value)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExpectedError(f"{where}: a mapping of metric -> value, not {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _tolerances(raw: Any, expected: dict[str, float], default: float, where: str) -> dict[str, float]:
    """One number for every metric, or a mapping metric -> number (the file's default for the others)."""
    if isinstance(raw, dict):
        per = {str(k): _number(v, f"{where}: tolerance {k}") for k, v in raw.items()}
        tolerance = {k: per.get(k, default) for k in expected}
    else:
        tolerance = dict.fromkeys(expected, _number(raw, f"{where}: tolerance"))
    if any(t < 0 for t in tolerance.values()):
        raise ExpectedError(f"{where}: a tolerance is negative")
    return tolerance


def _intervals(raw: Any, where: str) -> dict[str, tuple[float, float]]:
    intervals: dict[str, tuple[float, float]] = {}
    for k, v in _mapping(raw, f"{where}: intervals").items():
        if not isinstance(v, list) or len(v) != 2:
            raise ExpectedError(f"{where}: intervals {k} is [low, high]")
        intervals[k] = (_number(v[0], f"{where}: intervals {k}"), _number(v[1], f"{where}: intervals {k}"))
    return intervals


def _condition(raw: Any, table: str, where: str, default_tol: float, retrieval_only: bool) -> Condition:
    """One entry of a file's ``conditions``, checked."""
    if not isinstance(raw, dict) or not raw.get("name"):
        raise ExpectedError(f"{where}: a mapping with a `name`")
    name = str(raw["name"])
    if not is_plain_segment(name):  # the folder of its run under t2exp reproduce's root
        raise ExpectedError(f"{where}: name {name!r} is invalid: a condition's name is {SEGMENT_RULE}")
    where = f"{where.rsplit(': ', 1)[0]}: condition {name!r}"
    overrides = raw.get("overrides")
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ExpectedError(f"{where}: `overrides` is a list of strings (the run's command-line overrides)")
    expected = {k: _number(v, f"{where}: expected {k}") for k, v in _mapping(raw.get("expected"), f"{where}: expected").items()}
    if not expected:
        raise ExpectedError(f"{where}: no `expected` metrics")
    return Condition(
        table=table,
        name=name,
        overrides=list(overrides),
        expected=expected,
        tolerance=_tolerances(raw.get("tolerance", default_tol), expected, default_tol, where),
        label=str(raw.get("label", name)),
        retrieval_only=bool(raw.get("retrieval_only", retrieval_only)),
        ci=bool(raw.get("ci", False)),
        intervals=_intervals(raw.get("intervals"), where),
        note=str(raw.get("note", "")),
    )


def load_table(path: Path) -> ExpectedTable:
    """Read and check one expected-numbers file."""
    import yaml

    if not is_plain_segment(path.stem):  # the table's name, and the folder of its runs under t2exp reproduce's root
        raise ExpectedError(
            f"{path}: the file name {path.stem!r} is invalid as a table name (the folder of its runs): "
            f"rename the file; a table's name is {SEGMENT_RULE}"
        )
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ExpectedError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the file as UTF-8") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ExpectedError(f"{path}: {one_line(exc)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("conditions"), list) or not doc["conditions"]:
        raise ExpectedError(f"{path}: a mapping with a non-empty list `conditions`")
    default_tol = _number(doc.get("tolerance", 0.1), f"{path}: tolerance")
    retrieval_only = bool(doc.get("retrieval_only", False))
    conditions = [
        _condition(raw, path.stem, f"{path}: conditions[{i}]", default_tol, retrieval_only) for i, raw in enumerate(doc["conditions"])
    ]
    names = [c.name for c in conditions]
    for name in {n for n in names if names.count(n) > 1}:
        raise ExpectedError(f"{path}: condition {name!r}: a second condition of that name")
    metrics = {str(k): str(v) for k, v in _mapping(doc.get("metrics"), f"{path}: metrics").items()}
    for c in conditions:
        for key in c.expected:
            metrics.setdefault(key, key)
    minutes = doc.get("minutes")
    return ExpectedTable(
        name=path.stem,
        path=path,
        title=str(doc.get("title", path.stem)),
        description=str(doc.get("description", "")).strip(),
        command=str(doc.get("command", "")).strip(),
        measured=str(doc.get("measured", "")).strip(),
        checked=str(doc.get("checked", "")).strip(),
        retrieval_only=retrieval_only,
        minutes=None if minutes is None else _number(minutes, f"{path}: minutes"),
        metrics=metrics,
        conditions=conditions,
    )


def load_tables(expected_dir: Path) -> list[ExpectedTable]:
    """Every ``*.yaml`` of the folder, sorted by name."""
    if not expected_dir.is_dir():
        raise ExpectedError(f"{expected_dir}: no such folder of expected-numbers files (--expected DIR)")
    tables = [load_table(p) for p in sorted(expected_dir.glob("*.yaml"))]
    if not tables:
        raise ExpectedError(f"{expected_dir}: no *.yaml expected-numbers files")
    return tables


def select(
    tables: Sequence[ExpectedTable], names: Sequence[str], *, every: bool = False, cheap: bool = False, ci: bool = False
) -> list[Condition]:
    """The conditions named (``table``, ``table/condition`` or a condition name found in one table
    only), plus every one (``every``), the retrieval-only ones (``cheap``) or CI's (``ci``)."""
    everything = [c for t in tables for c in t.conditions]
    chosen: list[Condition] = []

    def add(items: Iterable[Condition]) -> None:
        for c in items:
            if c not in chosen:
                chosen.append(c)

    by_table = {t.name: t for t in tables}
    for name in names:
        if name in by_table:
            add(by_table[name].conditions)
            continue
        hits = [c for c in everything if c.key == name] or [c for c in everything if c.name == name]
        if not hits:
            raise ExpectedError(f"{name!r}: no such table or condition (--list shows them)")
        if len(hits) > 1:
            raise ExpectedError(f"{name!r}: a condition of {len(hits)} tables; name one: {', '.join(c.key for c in hits)}")
        add(hits)
    if every:
        add(everything)
    if cheap:
        add(c for c in everything if c.retrieval_only)
    if ci:
        add(c for c in everything if c.ci)
    return chosen

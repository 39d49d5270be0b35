"""Scoring, read: submitted predictions (a file, rows, a dict or a DataFrame) as typed rows."""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union

from t2exp.config.checks import METRIC
from t2exp.errors import DataError, one_line
from t2exp.infra.jsonl import read_jsonl_numbered
from t2exp.text.numbers import extract_number

if TYPE_CHECKING:
    import pandas as pd

READERS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
Predictions = Union[str, Path, "pd.DataFrame", Sequence[Mapping[str, Any]], Mapping[str, Any]]
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass(frozen=True)
class Submitted:
    row: int  # 1-based line/row in the source
    id: str
    subset: str | None
    prediction: Any
    value: float | None
    retrieved: list[str] | None
    context_id: str | None
    # the answer string ``nm_bare`` and the degenerate check read: the ``answer_text`` column
    # when the file has one (a run's predictions.jsonl: the model's answer string, while its
    # ``prediction`` is the parsed number), else the raw ``prediction`` (a nan stays nan here)
    text: Any = None
    # a run's retrieved_dense (dense similarity per retrieved id, None for BM25-only): the
    # authors' re-sorted metrics (metrics.paper_order) are scored when present
    dense: list[float | None] | None = None
    # a run's ranked_depth (methods.Ranking.depth): how many documents the method ranked at
    # most; a Recall@r past it is undefined (None), not a miss
    depth: int | None = None
    # a run's row whose generator replied (its ``generation``), even with no number in the reply:
    # NM is scored (0 for it), where a file without any prediction is a retrieval-only submission
    generated: bool = False


def _missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    try:
        import pandas as pd

        return v is pd.NA or v is pd.NaT
    except ImportError:  # pragma: no cover
        return False


def _absent(v: Any) -> bool:
    """No prediction given: null (a table's empty cell arrives as None, see ``_frame_rows``). An
    explicit NaN, inf or boolean *is* a prediction, an unparsable one (wrong in NM, counted)."""
    return v is None or (_missing(v) and not isinstance(v, float))


def _text(v: Any) -> str | None:
    if _missing(v):
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    s = str(v).strip()
    return s or None


def _dense(v: Any) -> list[float | None] | None:
    if not isinstance(v, list | tuple):
        return None
    try:
        return [None if x is None else float(x) for x in v]
    except (TypeError, ValueError):
        return None


def _depth(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _ranked(v: Any, where: str) -> list[str] | None:
    if _missing(v):
        return None
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return None
        try:
            v = json.loads(s)
        except json.JSONDecodeError:
            raise DataError(f"{where}: column 'retrieved' is {s[:60]!r}, not a JSON list of context ids") from None
        if v is None:
            return None
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise DataError(f"{where}: column 'retrieved' must be a list of context ids, got {type(v).__name__}")
    return [str(x) for x in v]


def _read_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of a file and where each is in it (``line 3`` of JSONL, else ``row 3``)."""
    import pandas as pd

    if not path.exists():
        raise DataError(f"{path}: no such file")
    if path.is_dir():
        raise DataError(f"{path}: is a directory; pass a .jsonl, .json, .csv or .parquet file")
    kind = READERS.get(path.suffix.lower())
    if kind is None:
        raise DataError(f"{path}: unknown format {path.suffix or '(no suffix)'!r}; use .jsonl, .json, .csv, .tsv or .parquet")
    try:
        if kind == "jsonl":
            numbered = read_jsonl_numbered(path)
            return [r for _, r in numbered], [f"line {n}" for n, _ in numbered]
        if kind == "json":
            try:
                obj = json.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is skipped, as in JSONL
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
            rows = _rows_from_object(obj, str(path))
        elif kind in ("csv", "tsv"):
            df = pd.read_csv(path, dtype=str, keep_default_na=False, sep="," if kind == "csv" else "\t")
            rows = _frame_rows(df.replace({"": None}))
        else:
            rows = _frame_rows(pd.read_parquet(path))
        return rows, _numbered(rows)
    except DataError:
        raise
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text; is it really {kind}?") from None
    except Exception as exc:  # any reader failure becomes one clear line
        raise DataError(f"{path}: cannot read as {kind} ({type(exc).__name__}: {one_line(exc, 200)})") from None


def _frame_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    df = df.copy()
    df.columns = [str(c) for c in df.columns]
    return df.astype(object).where(df.notna(), None).to_dict(orient="records")


def _rows_from_object(obj: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(obj, Mapping):
        return [{**v, "id": k} if isinstance(v, Mapping) else {"id": k, "prediction": v} for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        for i, r in enumerate(obj):
            if not isinstance(r, Mapping):
                raise DataError(f"{where}: item {i}: expected an object with 'id' and 'prediction', got {type(r).__name__}")
        return [dict(r) for r in obj]
    raise DataError(f"{where}: expected a list of rows or a mapping id → prediction, got {type(obj).__name__}")


def _numbered(rows: Sequence[object]) -> list[str]:
    return [f"row {i}" for i in range(1, len(rows) + 1)]


def read_predictions(predictions: Predictions) -> tuple[list[dict[str, Any]], str, list[str]]:
    """Rows as dicts, a label for the source and where each row is in it (``line 3``, ``row 3``):
    the one reader of submitted and logged predictions (``t2exp score``, ``t2exp compare``)."""
    if isinstance(predictions, (str, Path)):
        path = Path(predictions)
        rows, where = _read_rows(path)
        return rows, str(path), where
    if hasattr(predictions, "to_dict") and hasattr(predictions, "columns"):
        rows = _frame_rows(predictions)
        return rows, "DataFrame", _numbered(rows)
    kind = "dict" if isinstance(predictions, Mapping) else "list"
    rows = _rows_from_object(predictions, f"predictions ({kind})")
    return rows, kind, _numbered(rows)


def row_id(row: Mapping[str, Any], where: str) -> str:
    """A row's question id; a row without one is an error naming it."""
    qid = _text(row.get("id"))
    if qid is None:
        raise DataError(f"{where}: no 'id' (every row needs the id of its question)")
    return qid


def first_of_each(items: Iterable[tuple[K, T]]) -> tuple[dict[K, T], list[T]]:
    """The one rule for a key seen twice (a question a resumed run or a submission repeats): the
    first item of each key is kept; the later ones come back, in order, as the duplicates."""
    first: dict[K, T] = {}
    duplicates: list[T] = []
    for key, item in items:
        if key in first:
            duplicates.append(item)
        else:
            first[key] = item
    return first, duplicates


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def logged_rows(rows: list[dict[str, Any]], source: str, where: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """A run's prediction rows as ``t2exp compare`` and the report read them: each has an id, its
    per-question metric values (``nm``, ``mrr_at_3``, ...) are numbers or null, and ``retrieved``
    is read as the scorer reads it (a list, or a JSON list in a string). A row that breaks one is
    an error naming the source, the line and the field."""
    where = where or _numbered(rows)
    out = []
    for r, at in zip(rows, where, strict=True):
        at = f"{source}: {at}"
        row_id(r, at)
        bad = next((k for k, v in r.items() if METRIC.match(k) and v is not None and not _is_number(v)), None)
        if bad is not None:
            raise DataError(f"{at}: field {bad!r} is {one_line(repr(r[bad]), 60)}, not a number; a metric value is a number or null")
        out.append({**r, "retrieved": _ranked(r["retrieved"], at)} if "retrieved" in r else r)
    return out


def parse_rows(rows: list[dict[str, Any]], source: str, where: Sequence[str] | None = None) -> tuple[list[Submitted], set[str]]:
    columns: set[str] = set()
    for r in rows:
        columns.update(r)
    if not rows:
        raise DataError(f"{source}: no rows; expected at least the columns id and prediction")
    for col in ("id", "prediction"):
        if col not in columns:
            raise DataError(
                f"{source}: no {col!r} column (columns: {', '.join(sorted(columns))[:200]}); predictions need id and prediction"
            )
    out = []
    for i, (r, at) in enumerate(zip(rows, where or _numbered(rows), strict=True), 1):
        raw = r.get("prediction")
        at = f"{source}: {at}"
        out.append(
            Submitted(
                row=i,
                id=row_id(r, at),
                subset=_text(r.get("subset")),
                prediction=None if _absent(raw) else raw,
                value=None if _absent(raw) else extract_number(raw),
                retrieved=_ranked(r.get("retrieved"), at) if "retrieved" in r else None,
                context_id=_text(r.get("context_id")),
                text=r.get("answer_text") if "answer_text" in r else raw,
                dense=_dense(r.get("retrieved_dense")),
                depth=_depth(r.get("ranked_depth")),
                generated=r.get("generation") is not None,
            )
        )
    return out, columns

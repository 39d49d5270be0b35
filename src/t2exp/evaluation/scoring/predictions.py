"""Scoring, read: submitted predictions (a file, rows, a dict or a DataFrame) as typed rows."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from t2exp.data.loader import read_jsonl_objects
from t2exp.errors import DataError, one_line
from t2exp.text.numbers import extract_number

if TYPE_CHECKING:
    import pandas as pd

READERS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
Predictions = Union[str, Path, "pd.DataFrame", Sequence[Mapping[str, Any]], Mapping[str, Any]]


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


def _read_rows(path: Path) -> list[dict[str, Any]]:
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
            return read_jsonl_objects(path)
        if kind == "json":
            try:
                obj = json.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is skipped, as in JSONL
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
            return _rows_from_object(obj, str(path))
        if kind in ("csv", "tsv"):
            df = pd.read_csv(path, dtype=str, keep_default_na=False, sep="," if kind == "csv" else "\t")
            df = df.replace({"": None})
        else:
            df = pd.read_parquet(path)
        return _frame_rows(df)
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


def read_predictions(predictions: Predictions) -> tuple[list[dict[str, Any]], str]:
    """Rows as dicts and a label for the source."""
    if isinstance(predictions, (str, Path)):
        path = Path(predictions)
        return _read_rows(path), str(path)
    if hasattr(predictions, "to_dict") and hasattr(predictions, "columns"):
        return _frame_rows(predictions), "DataFrame"
    kind = "dict" if isinstance(predictions, Mapping) else "list"
    return _rows_from_object(predictions, f"predictions ({kind})"), kind


def parse_rows(rows: list[dict[str, Any]], source: str) -> tuple[list[Submitted], set[str]]:
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
    for i, r in enumerate(rows, 1):
        raw = r.get("prediction")
        out.append(
            Submitted(
                row=i,
                id=_text(r.get("id")) or "",
                subset=_text(r.get("subset")),
                prediction=None if _absent(raw) else raw,
                value=None if _absent(raw) else extract_number(raw),
                retrieved=_ranked(r.get("retrieved"), f"{source}: row {i}") if "retrieved" in r else None,
                context_id=_text(r.get("context_id")),
                text=r.get("answer_text") if "answer_text" in r else raw,
                dense=_dense(r.get("retrieved_dense")),
                depth=_depth(r.get("ranked_depth")),
                generated=r.get("generation") is not None,
            )
        )
    return out, columns

"""Load T²-RAGBench rows (hub or local files, Hugging Face schema) into plain records.

A subset's corpus is the set of unique ``context_id``s over every loaded split of that subset;
questions can be restricted to some splits (``question_splits``) and sampled (``limit``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from t2exp.config.schema import DatasetConfig
from t2exp.data.folds import select_fold
from t2exp.data.sampling import sample_questions, subsample_corpus
from t2exp.errors import DataError
from t2exp.evaluation.numbers import parse_gold

log = logging.getLogger(__name__)

HUB_DATASET = "G4KMU/t2-ragbench"
SUBSETS = ("FinQA", "ConvFinQA", "VQAonBD", "TAT-DQA")
REQUIRED_COLUMNS = ("id", "context_id", "question", "program_answer", "context")
METADATA_COLUMNS = ("company_name", "report_year", "company_sector", "file_name", "company_symbol", "page_number")
_FILE_RE = re.compile(r"^(?P<subset>FinQA|ConvFinQA|VQAonBD|TAT-DQA)_(?P<split>[^.]+)\.(?P<ext>parquet|jsonl)$")


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


def _clean(value: Any) -> str:
    """A cell as text; missing values (None, NaN, pd.NA, NaT) are empty."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if pd.api.types.is_scalar(value) and not isinstance(value, str) and pd.isna(value):
        return ""
    return str(value)


def discover_files(path: Path, subsets: Sequence[str]) -> dict[str, list[Path]]:
    """Map subset → files. A directory is scanned for ``<Subset>_<split>.parquet|jsonl``."""
    found: dict[str, list[Path]] = {}
    if path.is_file():
        m = _FILE_RE.match(path.name)
        subset = m.group("subset") if m else (subsets[0] if len(subsets) == 1 else None)
        if subset is None:
            raise DataError(
                f"dataset.path={path}: cannot tell the subset from the file name; name it "
                f"<Subset>_<split>.parquet (Subset one of {', '.join(SUBSETS)}) or set one dataset.subsets entry"
            )
        found[subset] = [path]
        return found
    if not path.is_dir():
        raise DataError(f"dataset.path={path}: no such file or directory")
    for f in sorted(path.iterdir()):
        m = _FILE_RE.match(f.name)
        if m and m.group("subset") in subsets:
            found.setdefault(m.group("subset"), []).append(f)
    return found


# Frames read in this process, by (path, mtime, size): the command line's pre-flight check and
# the run (and every cell of a sequential sweep) read each file once. Rows are never mutated.
_FRAMES: dict[tuple[str, int, int], pd.DataFrame] = {}
_FRAMES_MAX = 32


def read_jsonl_objects(f: Path) -> list[dict[str, Any]]:
    """JSON Lines, one object per line; a bad line is reported with its line number."""
    records: list[dict[str, Any]] = []
    with open(f, encoding="utf-8") as fh:
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{f}: line {n}: not valid JSON ({exc.msg}, column {exc.colno})") from None
                if not isinstance(rec, dict):
                    raise DataError(f"{f}: line {n}: expected a JSON object per line, got {type(rec).__name__}")
                records.append(rec)
        except UnicodeDecodeError as exc:
            raise DataError(f"{f}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return records


def _read_jsonl(f: Path) -> pd.DataFrame:
    return pd.DataFrame.from_records(read_jsonl_objects(f))


def _read_file(f: Path) -> pd.DataFrame:
    try:
        st = f.stat()
        key = (str(f.resolve()), st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise DataError(f"{f}: cannot read ({exc.strerror or exc})") from None
    if key in _FRAMES:
        return _FRAMES[key]
    try:
        df = pd.read_parquet(f) if f.suffix == ".parquet" else _read_jsonl(f)
    except DataError:
        raise
    except Exception as exc:  # any reader failure becomes one clear line
        first = (str(exc).splitlines() or [""])[0][:200]
        raise DataError(f"{f}: cannot read ({type(exc).__name__}: {first})") from None
    if len(_FRAMES) >= _FRAMES_MAX:
        _FRAMES.pop(next(iter(_FRAMES)))
    _FRAMES[key] = df
    return df


def _missing_columns_message(source: str, missing: list[str], columns: Sequence[Any]) -> str:
    present = [str(c) for c in columns]
    hints = []
    for m in missing:
        close = difflib.get_close_matches(m, [c for c in present if c not in REQUIRED_COLUMNS], n=1, cutoff=0.6)
        if close:
            hints.append(f"{close[0]!r} for {m!r}")
    hint = f"; renamed? found {', '.join(hints)}" if hints else ""
    return (
        f"{source}: missing column(s) {', '.join(missing)} (row 0){hint}; T²-RAGBench files need "
        f"{', '.join(REQUIRED_COLUMNS)}"
    )


def _split_from_name(f: Path) -> str:
    m = _FILE_RE.match(f.name)
    return m.group("split") if m else "unknown"


def rows_to_subset(
    name: str,
    frames: Iterable[tuple[str, pd.DataFrame]],
    *,
    question_splits: Sequence[str] | None = None,
    corpus_splits: Sequence[str] | None = None,
    skip_empty_questions: bool = True,
) -> Subset:
    """Validate rows of one subset and turn them into records. ``frames`` are (source, frame).

    The corpus is the unique contexts of the rows of ``corpus_splits`` (``None``: every loaded
    split; the T²-RAGBench authors' code indexes the contexts of the rows it is given); a question
    whose gold context is not in it is an error, since no retriever could find it."""
    questions: list[Question] = []
    corpus: dict[str, Document] = {}
    context_source: dict[str, tuple[str, int]] = {}
    texts: dict[str, str] = {}
    seen_ids: dict[str, tuple[str, int]] = {}
    sources: list[str] = []
    stats = {"empty_questions_skipped": 0, "non_numeric_gold": 0, "rows": 0}
    for source, df in frames:
        sources.append(source)
        if len(df) == 0:
            continue  # no rows to check; an empty subset is reported below
        missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
        if missing:
            raise DataError(_missing_columns_message(source, missing, list(df.columns)))
        default_split = _split_from_name(Path(source))
        records = df.to_dict(orient="records")
        for i, row in enumerate(records):
            stats["rows"] += 1
            qid = _clean(row.get("id")).strip()
            if not qid:
                raise DataError(f"{source}: row {i}: column 'id' is empty; every question needs a unique id")
            if qid in seen_ids:
                s0, r0 = seen_ids[qid]
                raise DataError(f"{source}: row {i}: column 'id' value {qid!r} duplicates {s0} row {r0}")
            seen_ids[qid] = (source, i)
            cid = _clean(row.get("context_id")).strip()
            if not cid:
                raise DataError(f"{source}: row {i}: column 'context_id' is empty")
            text = _clean(row.get("context"))
            if not text.strip():
                raise DataError(f"{source}: row {i}: column 'context' is empty for context_id {cid!r}")
            meta = {c: _clean(row.get(c)) for c in METADATA_COLUMNS if _clean(row.get(c))}
            if cid in context_source:
                s0, r0 = context_source[cid]
                if texts[cid] != text:
                    raise DataError(
                        f"{source}: row {i}: column 'context' for context_id {cid!r} differs from {s0} row {r0}; "
                        "one context_id must have one text"
                    )
            split = _clean(row.get("split")) or default_split
            if cid not in context_source:
                context_source[cid] = (source, i)
                texts[cid] = text
            if cid not in corpus and (not corpus_splits or split in corpus_splits):
                corpus[cid] = Document(context_id=cid, subset=name, text=text, metadata=meta)
            if question_splits and split not in question_splits:
                continue
            question = _clean(row.get("question")).strip()
            if not question:
                if skip_empty_questions:
                    stats["empty_questions_skipped"] += 1
                    log.warning("%s: row %d: column 'question' is empty; skipped", source, i)
                    continue
                raise DataError(f"{source}: row {i}: column 'question' is empty")
            gold_raw = _clean(row.get("program_answer"))
            gold = parse_gold(gold_raw)
            if gold is None:
                stats["non_numeric_gold"] += 1
            questions.append(
                Question(
                    id=qid,
                    subset=name,
                    split=split,
                    context_id=cid,
                    question=question,
                    gold=gold,
                    gold_raw=gold_raw,
                    original_answer=_clean(row.get("original_answer")),
                    metadata=meta,
                )
            )
    if not corpus:
        splits = f" of dataset.corpus_splits={list(corpus_splits)}" if corpus_splits else ""
        raise DataError(f"subset {name}: the corpus{splits} is empty (sources: {', '.join(sources) or 'none'})")
    orphans = [q for q in questions if q.context_id not in corpus]
    if orphans:
        q = orphans[0]
        raise DataError(
            f"dataset.corpus_splits={list(corpus_splits or [])} leaves out the gold context of {len(orphans)} {name} question(s) "
            f"(e.g. id {q.id!r}, split {q.split!r}); allowed: splits that hold them, or dataset.question_splits limited to the corpus's"
        )
    if stats["non_numeric_gold"]:
        log.warning("subset %s: %d questions have a non-numeric gold answer; excluded from NM", name, stats["non_numeric_gold"])
    return Subset(name=name, questions=questions, corpus=list(corpus.values()), sources=sources, stats=stats)


def _load_hub(subset: str, revision: str | None) -> list[tuple[str, pd.DataFrame]]:
    try:
        import datasets
    except ImportError:
        raise DataError("dataset.source=hub needs the `datasets` package: pip install 't2exp[hub]'") from None
    try:
        dd = datasets.load_dataset(HUB_DATASET, subset, revision=revision)
    except Exception as exc:
        raise DataError(
            f"dataset.source=hub: cannot load {HUB_DATASET}/{subset} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:160]}); set dataset.path=DIR with local <Subset>_<split>.parquet files"
        ) from None
    return [(f"hub:{HUB_DATASET}/{subset}/{split}", dd[split].to_pandas()) for split in dd]


def load_subsets(
    *,
    subsets: Sequence[str],
    source: str = "auto",
    path: str | Path | None = None,
    question_splits: Sequence[str] | None = None,
    corpus_splits: Sequence[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    hub_revision: str | None = None,
    skip_empty_questions: bool = True,
    corpus_size: int | None = None,
    corpus_seed: int | None = None,
    folds: int | None = None,
    fold: int | None = None,
    fold_role: str = "eval",
    fold_seed: int = 0,
) -> list[Subset]:
    """Load each subset from local files (``path``) or the hub.

    ``source='auto'`` uses local files where ``path`` holds that subset and the hub otherwise.
    Questions are narrowed in this order: the corpus subsample's, the fold's (``t2exp.data.folds``),
    the seeded ``limit`` sample; the corpus stays whole after the subsample.
    """
    unknown = [s for s in subsets if s not in SUBSETS]
    if unknown:
        raise DataError(f"dataset.subsets: unknown subset {unknown[0]!r}; allowed: {', '.join(SUBSETS)}")
    if source not in ("auto", "local", "hub"):
        raise DataError(f"dataset.source={source!r}: allowed values are auto, local, hub")
    local: dict[str, list[Path]] = {}
    if source in ("auto", "local"):
        if path is None:
            if source == "local":
                raise DataError("dataset.path is not set; point it at a directory of <Subset>_<split>.parquet files")
        else:
            local = discover_files(Path(path), subsets)
    out: list[Subset] = []
    for name in subsets:
        if name in local:
            frames = [(str(f), _read_file(f)) for f in local[name]]
        elif source == "local":
            raise DataError(f"dataset.path={path}: no {name}_<split>.parquet or .jsonl file found for subset {name}")
        else:
            frames = _load_hub(name, hub_revision)
        subset = rows_to_subset(name, frames, question_splits=question_splits, corpus_splits=corpus_splits,
                                skip_empty_questions=skip_empty_questions)
        subset = subsample_corpus(subset, corpus_size, seed if corpus_seed is None else corpus_seed)
        subset.stats["questions_total"] = len(subset.questions)
        subset.questions = select_fold(subset.questions, name, folds, fold, fold_role, fold_seed)
        subset.questions = sample_questions(subset.questions, limit, seed)
        if not subset.questions:
            skipped = subset.stats.get("empty_questions_skipped", 0)
            if skipped and not question_splits:
                raise DataError(
                    f"{', '.join(subset.sources)}: column 'question' is empty in all {skipped} rows of subset {name}; "
                    "fill the questions, or check that the file is the right one"
                )
            raise DataError(
                f"subset {name}: no questions left (question_splits={list(question_splits or [])}); "
                "check dataset.question_splits"
            )
        out.append(subset)
    return out


def loader_args(cfg: Any) -> dict[str, Any]:
    """The :func:`load_subsets` arguments of an app config: the app, its pre-flight check and
    ``t2exp.score`` load the same questions from it (a run recorded before a key existed gets the
    schema's default)."""
    ds = cfg.dataset
    return dict(
        subsets=list(ds.subsets),
        source=ds.source,
        path=ds.get("path"),
        question_splits=list(ds.question_splits) if ds.get("question_splits") else None,
        corpus_splits=list(ds.corpus_splits) if ds.get("corpus_splits") else None,
        limit=ds.get("limit"),
        seed=int(cfg.seed),
        hub_revision=ds.get("hub_revision"),
        skip_empty_questions=bool(ds.get("skip_empty_questions", DatasetConfig.skip_empty_questions)),
        corpus_size=ds.get("corpus_size"),
        corpus_seed=ds.get("corpus_seed"),
        folds=ds.get("folds"),
        fold=ds.get("fold"),
        fold_role=str(ds.get("fold_role", DatasetConfig.fold_role)),
        fold_seed=int(ds.get("fold_seed", DatasetConfig.fold_seed)),
    )


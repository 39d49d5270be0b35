"""Load T²-RAGBench rows (hub or local files, Hugging Face schema) into plain records.

A subset's corpus is the set of unique ``context_id``s over every loaded split of that subset;
questions can be restricted to some splits (``question_splits``) and sampled (``limit``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from t2exp.data.folds import select_fold
from t2exp.data.records import Subset
from t2exp.data.rows import FILE_RE, rows_to_subset
from t2exp.data.sampling import sample_questions, subsample_corpus
from t2exp.errors import DataError
from t2exp.infra.jsonl import read_jsonl_objects as read_jsonl_objects  # the one JSONL reader

log = logging.getLogger(__name__)

HUB_DATASET = "G4KMU/t2-ragbench"
SUBSETS = ("FinQA", "ConvFinQA", "VQAonBD", "TAT-DQA")
HUB_SUBSETS = ("FinQA", "ConvFinQA", "TAT-DQA")  # VQAonBD left the hub after v1 of the paper: local files only


def discover_files(path: Path, subsets: Sequence[str]) -> dict[str, list[Path]]:
    """Map subset → files. A directory is scanned for ``<Subset>_<split>.parquet|jsonl``."""
    found: dict[str, list[Path]] = {}
    if path.is_file():
        m = FILE_RE.match(path.name)
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
        m = FILE_RE.match(f.name)
        if m and m.group("subset") in subsets:
            found.setdefault(m.group("subset"), []).append(f)
    return found


def local_files(path: Path, subsets: Sequence[str], source: str) -> dict[str, list[Path]]:
    """The local files of each subset under ``path`` (:func:`discover_files`). Where the files must
    all be there (``source=local``, or ``source=auto`` with a path the user named: any but the bundled
    data, whose missing subsets come from the hub) a subset without one is a ``DataError``."""
    found = discover_files(path, subsets)
    if source == "local" or (source == "auto" and not _is_bundle(path)):
        for name in subsets:
            if name not in found:
                raise DataError(
                    f"dataset.path={path}: no {name} file found there (looked for {name}_<split>.parquet or {name}_<split>.jsonl, "
                    f"e.g. {name}_test.parquet); point dataset.path at the folder holding them"
                    + (f", or set dataset.source=hub to load {name} from the hub" if name in HUB_SUBSETS else "")
                )
    return found


def _is_bundle(path: Path) -> bool:
    """``path`` is the bundled data (the dataset options' default ``${paths.data}``)."""
    from t2exp.infra.paths import DATA_DIR

    try:
        return path.resolve() == DATA_DIR.resolve()
    except OSError:
        return False


# Subsets checked in this process, by their files' (path, mtime, size) and the split settings: the
# command line's pre-flight check and the run (and every cell of a sequential sweep) read and check
# each file once. Records are frozen; each load gets its own lists.
_SUBSETS: dict[tuple[Any, ...], Subset] = {}
_SUBSETS_MAX = 32


def _read_jsonl(f: Path) -> pd.DataFrame:
    return pd.DataFrame.from_records(read_jsonl_objects(f))


def _file_key(f: Path) -> tuple[str, int, int]:
    try:
        st = f.stat()
        return (str(f.resolve()), st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise DataError(f"{f}: cannot read ({exc.strerror or exc})") from None


def _local_subset(
    name: str, files: list[Path], question_splits: Sequence[str] | None, corpus_splits: Sequence[str] | None, skip_empty_questions: bool
) -> Subset:
    """The checked records of subset ``name`` from its local ``files``, once per process and version of the files."""
    key = (
        name,
        tuple(_file_key(f) for f in files),
        None if question_splits is None else tuple(question_splits),
        None if corpus_splits is None else tuple(corpus_splits),
        skip_empty_questions,
    )
    if (kept := _SUBSETS.get(key)) is None:
        frames = [(str(f), _read_file(f)) for f in files]
        kept = rows_to_subset(
            name, frames, question_splits=question_splits, corpus_splits=corpus_splits, skip_empty_questions=skip_empty_questions
        )
        if kept.stats.get("empty_questions_skipped"):  # each load warns of the rows it skips
            return kept
        if len(_SUBSETS) >= _SUBSETS_MAX:
            _SUBSETS.pop(next(iter(_SUBSETS)))
        _SUBSETS[key] = kept
    return Subset(kept.name, list(kept.questions), list(kept.corpus), list(kept.sources), dict(kept.stats))


def _read_file(f: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(f) if f.suffix == ".parquet" else _read_jsonl(f)
    except DataError:
        raise
    except Exception as exc:  # any reader failure becomes one clear line
        first = (str(exc).splitlines() or [""])[0][:200]
        raise DataError(f"{f}: cannot read ({type(exc).__name__}: {first})") from None


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
    source: str,
    path: str | Path | None,
    question_splits: Sequence[str] | None,
    corpus_splits: Sequence[str] | None,
    limit: int | None,
    seed: int,
    hub_revision: str | None,
    skip_empty_questions: bool,
    corpus_size: int | None,
    corpus_seed: int | None,
    folds: int | None,
    fold: int | None,
    fold_role: str,
    fold_seed: int,
) -> list[Subset]:
    """Load each subset from local files (``path``) or the hub. The arguments are the ``dataset.*``
    settings and the run's seed, with no defaults here: :func:`loader_args` of a composed config, or
    :func:`t2exp.config.schema.dataset_args` (the schema's defaults).

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
            local = local_files(Path(path), subsets, source)
    out: list[Subset] = []
    for name in subsets:
        if name in local:
            subset = _local_subset(name, local[name], question_splits, corpus_splits, skip_empty_questions)
        else:
            subset = rows_to_subset(
                name,
                _load_hub(name, hub_revision),
                question_splits=question_splits,
                corpus_splits=corpus_splits,
                skip_empty_questions=skip_empty_questions,
            )
        subset = subsample_corpus(subset, corpus_size, seed if corpus_seed is None else corpus_seed)
        subset.stats["questions_total"] = len(subset.questions)
        subset.questions = select_fold(subset.questions, name, folds, fold, fold_role, fold_seed)
        subset.questions = sample_questions(subset.questions, limit, seed)
        if not subset.questions:
            raise _no_questions(subset, question_splits)
        out.append(subset)
    return out


def _no_questions(subset: Subset, question_splits: Sequence[str] | None) -> DataError:
    """Why a subset has no questions left, and what to check."""
    skipped = subset.stats.get("empty_questions_skipped", 0)
    if skipped and not question_splits:
        return DataError(
            f"{', '.join(subset.sources)}: column 'question' is empty in all {skipped} rows of subset {subset.name}; "
            "fill the questions, or check that the file is the right one"
        )
    return DataError(
        f"subset {subset.name}: no questions left (question_splits={list(question_splits or [])}); check dataset.question_splits"
    )


def loader_args(cfg: Any) -> dict[str, Any]:
    """The :func:`load_subsets` arguments of a composed app config (every key is there: the schema
    fills what an option leaves out): the app, its pre-flight check and ``t2exp score`` load the
    same questions from it."""
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
        skip_empty_questions=bool(ds.skip_empty_questions),
        corpus_size=ds.get("corpus_size"),
        corpus_seed=ds.get("corpus_seed"),
        folds=ds.get("folds"),
        fold=ds.get("fold"),
        fold_role=str(ds.fold_role),
        fold_seed=int(ds.fold_seed),
    )

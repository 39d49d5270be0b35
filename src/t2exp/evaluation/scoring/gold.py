"""Scoring, read: the gold questions to score against, loaded exactly as the app loads a run's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from t2exp.data.loader import load_subsets, loader_args
from t2exp.data.records import Question, Subset
from t2exp.data.sampling import sample_questions
from t2exp.errors import ConfigError, DataError, one_line

if TYPE_CHECKING:
    from omegaconf import DictConfig

FROM_CONFIG: Literal["config"] = "config"


@dataclass
class Gold:
    """The gold questions to score against (ordered as the app orders its rows)."""

    questions: list[Question]
    dataset: str = "gold"
    all_ids: frozenset[tuple[str, str]] = frozenset()  # (subset, id) before a ``limit`` sample
    params: dict[str, Any] = field(default_factory=dict)


def dataset_options() -> list[str]:
    from t2exp.infra.paths import CONF_DIR

    return sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))


def compose_config(
    dataset: str = "bundled",
    *,
    dataset_path: str | Path | None = None,
    question_splits: Sequence[str] | None = None,
    limit: int | None | Literal["config"] = FROM_CONFIG,
    overrides: Sequence[str] = (),
) -> DictConfig:
    """The app's config with ``dataset=NAME`` (Hydra compose on the project's ``conf/``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from t2exp import config
    from t2exp.infra.paths import CONF_DIR

    options = dataset_options()
    if dataset not in options:
        raise ConfigError(f"dataset={dataset!r}: no conf/dataset/{dataset}.yaml; choose one of {', '.join(options)}")
    config.register()
    ov = [f"dataset={dataset}", *overrides]
    try:
        if GlobalHydra.instance().is_initialized():  # inside a running Hydra app: use its search path
            cfg = compose(config_name="config", overrides=ov)
        else:
            with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR), job_name="t2exp_score"):
                cfg = compose(config_name="config", overrides=ov)
        if dataset_path is not None:
            OmegaConf.update(cfg, "dataset.path", str(dataset_path))
        if question_splits:
            OmegaConf.update(cfg, "dataset.question_splits", list(question_splits))
        if limit != FROM_CONFIG:
            OmegaConf.update(cfg, "dataset.limit", limit)
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"dataset={dataset}: cannot compose the config ({one_line(exc, 300)})") from None
    return cfg


def load_gold(cfg: DictConfig) -> Gold:
    """Gold questions of ``cfg.dataset``: the questions ``app.build_components`` loads (same
    :func:`t2exp.data.loader.loader_args`), with the ids outside a ``limit`` sample kept apart."""
    kw = loader_args(cfg)
    limit, seed = kw["limit"], kw["seed"]
    # sampled below, exactly as load_subsets samples, so ids outside the sample are known
    subsets = load_subsets(**{**kw, "limit": None})
    all_ids = frozenset((q.subset, q.id) for s in subsets for q in s.questions)
    questions = [q for s in subsets for q in sample_questions(s.questions, limit, seed)]
    ds = cfg.dataset
    params = {
        "dataset": str(ds.get("name", "")),
        "dataset.subsets": ",".join(kw["subsets"]),
        "dataset.source": str(kw["source"]),
        "dataset.path": str(kw["path"]),
        "dataset.question_splits": ",".join(kw["question_splits"] or []) or "all",
        "dataset.limit": str(limit),
        "dataset.corpus_size": str(kw["corpus_size"]),
        "dataset.corpus_seed": str(kw["corpus_seed"]),
        "dataset.folds": str(kw["folds"]),
        "dataset.fold": str(kw["fold"]),
        "dataset.fold_role": str(kw["fold_role"]),
        "seed": seed,
    }
    params.update({f"dataset.source_files.{s.name}": ";".join(s.sources) for s in subsets})
    return Gold(questions=questions, dataset=str(ds.get("name", "")), all_ids=all_ids, params=params)


def gold_from(gold: Iterable[Question | Subset]) -> Gold:
    questions: list[Question] = []
    for item in gold:
        if isinstance(item, Subset):
            questions.extend(item.questions)
        elif isinstance(item, Question):
            questions.append(item)
        else:
            raise DataError(f"gold=: expected t2exp.data.records.Question or Subset records, got {type(item).__name__}")
    if not questions:
        raise DataError("gold=: no questions")
    return Gold(questions=questions, dataset="gold", all_ids=frozenset((q.subset, q.id) for q in questions))

"""The typed config schema: one dataclass per config group option, registered in Hydra's
ConfigStore (``t2exp.config.register``). Types are enforced by OmegaConf when a value is set or
overridden; ranges and allowed values by each dataclass's ``__post_init__``, which runs when
``t2exp.config.check`` turns the composed config into these objects (``OmegaConf.to_object``).

This module holds the run-level settings (root, dataset, document, paths, tracking, sampling);
``t2exp.config.components`` holds the component groups. Constants of allowed values are imported
from the module that owns them, inside the checks, so that importing the schema stays cheap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from t2exp.config.checks import METRIC, at_least, one_of, require
from t2exp.infra.paths import DEFAULT_ARTIFACTS, DEFAULT_STORE


@dataclass
class SamplingConfig:
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    stop: list[str] | None = None  # null = the answer mode's default stop sequences
    samples: int = 1  # self-consistency: answers per question (the main one + samples-1 drawn); t2exp.answering.answer_choice
    sample_temperature: float = 0.7  # temperature of the drawn samples

    def check(self, prefix: str) -> None:
        at_least(f"{prefix}.max_tokens", self.max_tokens, 1)
        at_least(f"{prefix}.samples", self.samples, 1)
        require(
            self.samples == 1 or self.sample_temperature > 0,
            f"{prefix}.sample_temperature",
            self.sample_temperature,
            "a temperature > 0 when samples > 1",
        )
        at_least(f"{prefix}.temperature", self.temperature, 0.0)
        require(0 < self.top_p <= 1, f"{prefix}.top_p", self.top_p, "a number in (0, 1]")


@dataclass
class DatasetConfig:
    name: str = MISSING
    subsets: list[str] = MISSING
    source: str = "auto"  # auto (local files; from the hub only what the bundled data lacks) | local | hub
    path: str | None = None
    question_splits: list[str] | None = None  # e.g. [test]; the questions asked
    corpus_splits: list[str] | None = None  # the corpus: contexts of these splits' rows (null = every loaded split, logged)
    limit: int | None = None  # N questions of each subset, sampled with the seed (the corpus stays complete)
    hub_revision: str | None = None
    skip_empty_questions: bool = True
    corpus_size: int | None = None  # a seeded nested subsample of N documents (and their questions)
    corpus_seed: int | None = None  # null = the run's seed
    # k-fold splits of each subset's questions (t2exp.data.folds); the corpus is never split
    folds: int | None = None  # null = every question; N >= 2 = N seeded folds
    fold: int | None = None  # the held-out fold, 0 .. folds-1 (required with folds)
    fold_role: str = "eval"  # eval: the questions of `fold`; tune: those of every other fold (the corpus stays whole)
    fold_seed: int = 0

    def __post_init__(self) -> None:
        from pathlib import Path

        from t2exp.data.folds import ROLES
        from t2exp.data.loader import SUBSETS

        require(bool(self.subsets), "dataset.subsets", list(self.subsets), f"a non-empty list of {', '.join(SUBSETS)}")
        for s in self.subsets:
            one_of("dataset.subsets", s, SUBSETS)
        one_of("dataset.source", self.source, ("auto", "local", "hub"))
        at_least("dataset.limit", self.limit, 1, optional=True)
        at_least("dataset.corpus_size", self.corpus_size, 1, optional=True)
        at_least("dataset.folds", self.folds, 2, optional=True)
        one_of("dataset.fold_role", self.fold_role, ROLES)
        if self.folds is None:
            require(self.fold is None, "dataset.fold", self.fold, "null unless dataset.folds is set (e.g. dataset.folds=5 dataset.fold=0)")
        else:
            require(
                self.fold is not None and 0 <= self.fold < self.folds,
                "dataset.fold",
                self.fold,
                f"the held-out fold, an integer in [0, {self.folds - 1}] (dataset.folds={self.folds})",
            )
        for key in ("question_splits", "corpus_splits"):
            splits = getattr(self, key)
            require(
                splits is None or all(isinstance(s, str) and s for s in splits),
                f"dataset.{key}",
                splits,
                "null or a list of split names, e.g. [test]",
            )
        if self.source == "local":
            require(
                self.path is not None and str(self.path).strip() != "",
                "dataset.path",
                self.path,
                "a directory of <Subset>_<split>.parquet|jsonl files, or one such file (dataset.source=local)",
            )
        if self.source in ("auto", "local") and self.path is not None:
            require(
                Path(self.path).exists(),
                "dataset.path",
                self.path,
                "an existing directory of <Subset>_<split>.parquet|jsonl files, or one such file",
            )


@dataclass
class DocumentConfig:
    variant: str = "plain"  # plain | metadata_prefix

    def __post_init__(self) -> None:
        from t2exp.index.documents import VARIANTS

        one_of("document.variant", self.variant, VARIANTS)


@dataclass
class QueryConfig:
    """The retrieval query (``t2exp.methods.queries``): ``template`` over the question and its metadata,
    ``instruction`` (optional) wrapping it with ``{query}``."""

    template: str = "{question}"  # e.g. "{company_name} : {question}" (the T²-RAGBench authors' FinQA queries)
    instruction: str | None = None  # e.g. "Instruct: ...\nQuery: {query}"; null = none

    def __post_init__(self) -> None:
        require(
            "{" in self.template and "}" in self.template,
            "query.template",
            self.template,
            "a template with {question} and/or metadata fields, e.g. '{company_name} : {question}'",
        )
        if self.instruction is not None:
            require(
                "{query}" in self.instruction,
                "query.instruction",
                self.instruction,
                "null or a text containing {query}, e.g. 'Instruct: ...\\nQuery: {query}'",
            )


@dataclass
class PathsConfig:
    work: str = "${t2exp_cwd:}"  # outputs go under it: the directory the command is started from
    cache: str = "${paths.work}/.t2exp_cache"  # embeddings, indices, LLM calls, per-cell predictions
    models: str = "${paths.cache}/models"  # converted offline model checkpoints
    prompts: str = "${t2exp_resource:prompts}"  # the packaged prompts/
    data: str = "${t2exp_resource:data}"  # the bundled data/t2ragbench/


@dataclass
class ContextConfig:
    """What the generator reads of each document it is handed (``t2exp.answering.context``): ``full``
    documents, or ``focused`` evidence (every table plus the ``sentences`` prose sentences that
    best match the question); its tables as ``markdown`` or as labelled ``rows`` (``t2exp.answering.table_text``);
    with or without a ``header`` line naming the report each comes from; of the k retrieved
    documents, the best ``documents`` (null: all k)."""

    mode: str = "focused"
    sentences: int = 3
    tables: str = "markdown"
    header: str = "none"  # company_year: each document opens with "Report: <company>, <year>"
    # how many of the k retrieved documents it reads, best first (null: all k); retrieval metrics
    # still use k, so a k sweep changes NM only with documents=null
    documents: int | None = 1

    def __post_init__(self) -> None:
        from t2exp.answering.context import HEADERS, MODES
        from t2exp.answering.table_text import FORMATS

        one_of("context.header", self.header, HEADERS)
        one_of("context.mode", self.mode, MODES)
        at_least("context.sentences", self.sentences, 1)
        at_least("context.documents", self.documents, 1, optional=True)
        one_of("context.tables", self.tables, FORMATS)


@dataclass
class ProtocolConfig:
    """Whose settings a run follows: ``t2exp`` (its own) or ``paper`` (the T²-RAGBench authors',
    conf/protocol/paper.yaml). Set by the protocol group; the name is logged as the param
    ``protocol.name`` so reports can put the two side by side."""

    name: str = "t2exp"


MLFLOW_MAX_EXPERIMENT_NAME = 500  # MLflow's limit (mlflow.utils.validation.MAX_EXPERIMENT_NAME_LENGTH)
TRACKING_SCHEMES = ("sqlite", "file", "http", "https", "postgresql", "mysql", "mssql", "databricks")  # MLflow's stores


@dataclass
class TrackingConfig:
    uri: str = f"sqlite:///${{paths.work}}/{DEFAULT_STORE}"  # or http://HOST:5000 for a shared server
    artifact_location: str | None = f"${{paths.work}}/{DEFAULT_ARTIFACTS}"
    experiment: str = "${experiment_name}"
    traces: bool | None = None  # one MLflow trace per question; null = for at most trace_limit questions, chosen by id
    trace_limit: int = 500

    def __post_init__(self) -> None:
        allowed = "sqlite:///PATH/mlflow.db, a directory, http(s)://HOST:PORT or a database URL (postgresql, mysql, mssql)"
        require(bool(self.uri.strip()), "tracking.uri", self.uri, allowed)
        scheme = self.uri.split("://", 1)[0].split("+", 1)[0].lower() if "://" in self.uri else None
        require(scheme is None or scheme in TRACKING_SCHEMES, "tracking.uri", self.uri, allowed)


@dataclass
class Config:
    """The root: run-level keys are typed here; each component group's node carries the schema
    of its option (``defaults: [/schema/<group>/<option>@_here_, _self_]`` in its YAML)."""

    experiment_name: str = "t2exp"
    k: int = 3  # documents retrieved: MRR@k uses it; the generator reads the top context.documents of them
    seed: int = 0
    resume: bool = False  # true: skip a cell whose config hash already has a FINISHED MLflow run
    # the metric a run returns to a Hydra sweeper (hydra/sweeper=held_out_optuna maximises it), e.g.
    # avg/mrr_at_3 or FinQA/recall_at_3; null = avg/nm with a generator, avg/mrr_at_<k> without
    objective: str | None = None
    # sharded cells (t2exp.pipeline.shards): shards=N runs the cell as N jobs, each answering the
    # questions whose stable hash falls in its slice, merged into one result; `shard` is the job's
    # index, set by the app when it expands the cell (or by hand to re-run one shard). Neither
    # changes the cell's key: every shard and an unsharded run of it share its predictions
    shards: int = 1
    shard: int | None = None
    document: DocumentConfig = field(default_factory=DocumentConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    dataset: DatasetConfig = MISSING
    embedder: Any = None
    store: Any = None
    rag_method: Any = MISSING
    generator: Any = None
    reranker: Any = None
    # the protocol group's choice also selects conf/protocol_method/<protocol>_<rag_method>.yaml
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)

    def __post_init__(self) -> None:
        at_least("k", self.k, 1)
        at_least("shards", self.shards, 1)
        require(
            self.shard is None or (self.shards > 1 and 0 <= self.shard < self.shards),
            "shard",
            self.shard,
            f"null, or with shards > 1 an integer in [0, {self.shards - 1}]" if self.shards > 1 else "null when shards=1",
        )
        if self.objective is not None:
            scope, _, metric = self.objective.partition("/")
            require(
                bool(scope) and bool(METRIC.match(metric)),
                "objective",
                self.objective,
                "null or <subset or avg>/<metric>, e.g. avg/mrr_at_3, FinQA/recall_at_3, avg/nm",
            )
        name = self.tracking.experiment
        key = "experiment_name" if name == self.experiment_name else "tracking.experiment"
        shown = name if len(name) <= 60 else f"{name[:40]}… ({len(name)} characters)"
        require(
            0 < len(name.strip()) and len(name) <= MLFLOW_MAX_EXPERIMENT_NAME,
            key,
            shown,
            f"a non-empty MLflow experiment name of at most {MLFLOW_MAX_EXPERIMENT_NAME} characters (MLflow's limit)",
        )


def dataset_args(seed: int = Config.seed, **fields: Any) -> dict[str, Any]:
    """:func:`t2exp.data.loader.load_subsets`' arguments without a composed config: ``fields``
    (``subsets`` at least) over DatasetConfig's defaults, and the run's ``seed``."""
    defaults = {f.name: f.default for f in dataclasses.fields(DatasetConfig) if f.name != "name" and f.default is not MISSING}
    return {**defaults, **fields, "seed": seed}

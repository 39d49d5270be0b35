"""A cell's identity: the key of what determines its results (the resolved config without
bookkeeping and operational settings, the prompt templates' text and the loaded data), under
which its predictions are kept and by which ``resume=true`` finds it. :func:`load_cell` loads a
cell's data and computes its key, once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from t2exp.config import to_dict
from t2exp.data.loader import load_subsets, loader_args
from t2exp.data.records import Subset
from t2exp.infra.cache import content_key
from t2exp.infra.option_meta import without_meta
from t2exp.infra.redaction import is_secret_key

# component settings that change where a cell runs, how a server is reached or what it costs, not
# what it computes: a moved cache, another mount point or another server for the same weights resume the cell
OPERATIONAL_KEYS = frozenset(
    {
        "uri",
        "base_url",
        "host",
        "port",
        "http_port",
        "grpc_port",
        "grpc_host",
        "http_secure",
        "grpc_secure",
        "cluster_url",
        "connection",
        "binary",
        "embedded_dir",
        "api_key_env",
        "timeout",
        "max_concurrency",
        "max_retries",
        "backoff_base",
        "backoff_max",
        "models_dir",
        "cache_dir",
        "startup_timeout",
        "poll_interval",
        "command",
        "install",
        "extra_args",
        "env",
        "threads",
        "path",
        "price",  # what the tokens cost: the cell's cost_usd, not its answers
    }
)
COMPONENT_GROUPS = ("dataset", "embedder", "store", "generator", "reranker")
# run-level keys that are bookkeeping, not results: a sharded cell (shards, shard) is the same cell
NOT_IDENTITY = frozenset({"tracking", "paths", "resume", "experiment_name", "hydra", "shards", "shard"})


@dataclass(frozen=True)
class Cell:
    """A cell before its components are built: its resolved config, its data and its key (computed
    once, by :func:`load_cell`: it names the run directory and tags the MLflow run)."""

    resolved: dict[str, Any]
    subsets: list[Subset]
    key: str


def load_cell(cfg: DictConfig) -> Cell:
    """The cell ``cfg`` describes: its questions and corpora loaded, its key computed from both."""
    resolved = to_dict(cfg)
    subsets = load_subsets(**loader_args(cfg))
    return Cell(resolved=resolved, subsets=subsets, key=cell_key(resolved, data_fingerprint(subsets)))


def cell_key(resolved: dict[str, Any], data: str | None = None) -> str:
    """Deterministic key of a sweep cell: what determines its results — the resolved config without
    bookkeeping (tracking, paths, resume, shards: ``NOT_IDENTITY``) and without operational component settings
    (``OPERATIONAL_KEYS``: locations, endpoints, timeouts, concurrency), plus the content of the
    prompt templates (an edited prompt is a new cell, never a resume) and ``data``, a fingerprint of
    the loaded corpora and questions (it stands in for ``dataset.path``)."""
    semantic = {k: v for k, v in without_meta(resolved).items() if k not in NOT_IDENTITY}
    for group in COMPONENT_GROUPS:
        if isinstance(semantic.get(group), dict):
            semantic[group] = {k: v for k, v in semantic[group].items() if k not in OPERATIONAL_KEYS}
    prompts_dir = (resolved.get("paths") or {}).get("prompts")
    semantic["_prompts"] = prompts_fingerprint(prompts_dir) if prompts_dir else None
    semantic["_data"] = data
    return content_key(_mask_secrets(semantic))[:16]


def data_fingerprint(subsets: list[Subset]) -> str:
    """The loaded corpora and the questions asked, every field a run reads (``Subset.fingerprint``)."""
    return content_key([s.fingerprint for s in subsets])[:16]


def prompts_fingerprint(directory: str | Path) -> str:
    """Hash of every ``*.j2`` template's and ``demos/*.jsonl`` pool's name and text in ``directory``."""
    d = Path(directory)
    files = sorted([*d.glob("*.j2"), *d.glob("demos/*.jsonl")]) if d.is_dir() else []
    return content_key([(f.name, f.read_text(encoding="utf-8")) for f in files])[:16]


def _mask_secrets(d: Any) -> Any:
    """A set API key does not change the cell (a rotated key resumes the same predictions)."""
    if isinstance(d, dict):
        return {k: ("***" if is_secret_key(str(k)) and v not in (None, "") else _mask_secrets(v)) for k, v in d.items()}
    if isinstance(d, list):
        return [_mask_secrets(v) for v in d]
    return d

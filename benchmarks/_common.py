"""Helpers shared by the benchmark scripts (not a library: the scripts import it from their folder).

Everything here builds t2exp's own components the way ``t2exp.pipeline.cell`` does (Hydra config from the
project's ``conf/``), so a benchmark measures the code a run uses, with the defaults a run uses.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "data" / "t2ragbench"
SHARED_CACHE = ROOT / ".t2exp_cache"
# the report sample: what `python -m t2exp dataset.limit=200` asks (seed 0), disjoint from every tune set
REPORT_LIMIT, REPORT_SEED = 200, 0


@cache
def report_ids() -> frozenset[str]:
    """The ids of the report sample's questions in the bundled data (the loader's seeded draw)."""
    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import load_subsets

    subsets = load_subsets(
        **dataset_args(subsets=["FinQA", "TAT-DQA"], source="local", path=str(DEFAULT_DATA), limit=REPORT_LIMIT, seed=REPORT_SEED)
    )
    return frozenset(q.id for s in subsets for q in s.questions)


def t2exp(work: Path, args: Sequence[str], timeout: float | None = None) -> tuple[float, str]:
    """``python -m t2exp <args>`` as a real subprocess in ``work`` (offline, no progress bars, not a
    child of any MLflow run): its wall seconds and its output (stdout, then stderr). A failure ends
    the script with t2exp's own error."""
    import subprocess

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "T2EXP_PROGRESS": "0"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "t2exp", *args], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"python -m t2exp {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0, proc.stdout + proc.stderr


def latest_predictions(cache: Path) -> list[dict]:
    """The predictions of the cell the latest run under ``cache`` (its ``paths.cache``) used: every
    run rewrites its cell's ``leaderboard.jsonl``, also a run that only resumed (whose
    ``predictions.jsonl`` is then untouched, and another cell's may be newer)."""
    import json

    cell = max(cache.glob("runs/*/leaderboard.jsonl"), key=lambda p: p.stat().st_mtime).parent
    text = (cell / "predictions.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def compose(overrides: Sequence[str] = ()) -> Any:
    """The composed t2exp config (``conf/config.yaml`` + ``overrides``), as ``python -m t2exp`` sees it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from t2exp import config
    from t2exp.infra.paths import CONF_DIR

    config.register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def instantiate(node: Any) -> Any:
    """A component from its config node, as the app builds it (``t2exp.pipeline.build``)."""
    from t2exp.pipeline.build import build_component

    return build_component(node)


def method_config(name: str, extra: Sequence[str] = ()) -> tuple[dict, str, Any]:
    """(rag_method dict, document variant, reranker config node) for ``rag_method=name``."""
    from omegaconf import OmegaConf

    cfg = compose([f"rag_method={name}", "generator=none", *extra])
    return OmegaConf.to_container(cfg.rag_method, resolve=True), str(cfg.document.variant), cfg.get("reranker")


def query_builder(overrides: Sequence[str] = ()) -> Any:
    """The retrieval query (``query.*``) of the config ``overrides`` compose, as a run builds it."""
    from t2exp.methods.queries import QueryBuilder

    cfg = compose(["generator=none", *overrides])
    return QueryBuilder(str(cfg.query.template), cfg.query.get("instruction"))


def raw_embedder(overrides: Sequence[str] = ()) -> Any:
    """The default offline embedder (``embedder=minilm``; ``overrides``, e.g. ``protocol=paper``
    for its plain templates), model loaded."""
    emb = instantiate(compose(["generator=none", *overrides]).embedder)
    emb.embed_queries(["warm up"])  # load the model outside every timed region
    return emb


def cached_embedder(inner: Any, cache_dir: Path) -> Any:
    from t2exp.embedders.cached import CachedEmbedder
    from t2exp.infra.cache import KVCache

    return CachedEmbedder(inner, KVCache(Path(cache_dir) / "embeddings.sqlite"))


def services(
    embedder: Any, store_uri: Path, cache_dir: Path, variant: str = "plain", generator: Any = None, k: int | None = None, query: Any = None
) -> Any:
    """A ``Services`` object as ``t2exp.pipeline.steps.run_steps`` builds it (``k`` the run's k,
    ``query`` its ``QueryBuilder``; None: the default query)."""
    from t2exp.answering.prompts import PromptLibrary
    from t2exp.methods import Services
    from t2exp.stores.lancedb_store import LanceDBStore

    return Services(
        embedder=embedder,
        store_factory=lambda: LanceDBStore(str(store_uri)),
        generator=generator,
        prompts=PromptLibrary(ROOT / "prompts"),
        variant=variant,
        lock_dir=Path(cache_dir) / "locks",
        k=k,
        **({"query": query} if query is not None else {}),
    )


@contextmanager
def timed() -> Iterator[list[float]]:
    box = [0.0]
    t0 = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - t0


def percentile(values: Sequence[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def growth(t1: float, t2: float, n1: float, n2: float) -> float:
    """Growth exponent between two sizes: 1 = linear, < 1 sub-linear, 0 = constant."""
    if t1 <= 0 or t2 <= 0 or n1 <= 0 or n2 <= 0 or n1 == n2:
        return float("nan")
    return math.log(t2 / t1) / math.log(n2 / n1)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:  # pragma: no cover
        return float("nan")


def machine() -> str:
    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        line = next(line for line in text.splitlines() if line.startswith("flags"))
        have = set(line.split(":", 1)[1].split())
        flags = " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in have)
    except (OSError, StopIteration):
        pass
    gpu = "no GPU"
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except ImportError:  # pragma: no cover
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.machine()}, {os.cpu_count()} cores ({flags or 'no AVX2'}), {gpu}, Python {sys.version.split()[0]}, "
        f"load average at start {load}"
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], floatfmt: str = ".2f") -> str:
    """A plain Markdown table (renders in the README, readable on a terminal)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else format(v, floatfmt)
        return str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(headers)]
    out = ["| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        out.append("| " + " | ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=False))) + " |")
    return "\n".join(out)


def ratio_line(name: str, **values: Any) -> str:
    """The one line each script ends with; tests and the README look for ``RATIO <name>:``."""

    def fmt(v: Any) -> str:
        return (f"{v:.2f}".rstrip("0").rstrip(".") or "0") if isinstance(v, float) else str(v)

    line = f"RATIO {name}: " + " ".join(f"{k}={fmt(v)}" for k, v in values.items())
    print(line, flush=True)
    return line


def quiet_logs() -> None:
    import logging
    import warnings

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("t2exp", "lancedb", "bm25s", "sentence_transformers", "transformers", "mlflow", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")

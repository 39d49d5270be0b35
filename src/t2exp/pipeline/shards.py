"""Sharded cells: which questions a shard answers, where its files live, and how the shards'
predictions join into the cell's. Question ``q`` of subset ``s`` belongs to shard
``int(sha256(s + "\\0" + q.id), 16) % shards``: stable across processes, machines and resumes
(not the salted ``hash()``). Shard ``i`` of ``N`` keeps an unsharded run's files under
``runs/<cell key>/shards/<i>-of-<N>/`` and, once done, ``done.json``: its run, counts, prompts and
stage times, which the merge reads back (:func:`merged_rows`, :func:`merged_counts`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t2exp.config import to_dict
from t2exp.data.records import Subset
from t2exp.errors import ConfigError, DataError, one_line
from t2exp.evaluation.scoring.cell_rows import Prediction
from t2exp.infra.cache import atomic_write_text, lock_name
from t2exp.infra.redaction import redact_value
from t2exp.pipeline.predictions import PREDICTIONS_FILE

SHARDS_DIR = "shards"
CONFIG_FILE = "config.yaml"  # the cell's resolved config (secrets redacted), for `t2exp collect`
POINTER_FILE = "t2exp_shard.json"  # in a shard job's Hydra output directory: where its cell lives

# count metrics that every shard reports alike (facts of the corpus or the loaded data): the
# merge keeps one; index_cache_hit is 1 only when every shard found the index; the others add up
SAME_IN_EVERY_SHARD = ("corpus_size", "empty_questions_skipped", "doc_truncated_frac")


def shard_of(cfg: DictConfig) -> tuple[int, int]:
    """``(shard, shards)`` of a job's config: ``(0, 1)`` for an unsharded cell (its one shard)."""
    n = int(cfg.get("shards") or 1)
    i = cfg.get("shard") if n > 1 else 0
    if i is None or not 0 <= int(i) < n:
        raise ConfigError(
            f"shard={i} is invalid: a job of a sharded cell (shards={n}) needs shard=0..{n - 1}; "
            f"run `python -m t2exp shards={n} ...` and the app starts every shard, or give shard=<i> to re-run one"
        )
    return int(i), n


def shard_index(subset: str, question_id: str, shards: int) -> int:
    """The shard that answers question ``question_id`` of ``subset``."""
    digest = hashlib.sha256(f"{subset}\0{question_id}".encode()).hexdigest()
    return int(digest, 16) % shards


def slice_subsets(subsets: list[Subset], shard: int, shards: int) -> list[Subset]:
    """Each subset with only shard ``shard``'s questions (same order; the corpus whole)."""
    return [dataclasses.replace(s, questions=[q for q in s.questions if shard_index(s.name, q.id, shards) == shard]) for s in subsets]


def cell_config(cfg: DictConfig) -> DictConfig:
    """The cell's config as its shards share it, resolved, with ``shard`` unset (the cell run logs this one)."""
    cell = OmegaConf.create(to_dict(cfg))
    cell.shard = None
    return cell


def _redacted(node: object, key: str = "") -> dict:
    if isinstance(node, dict):
        return {k: _redacted(v, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [_redacted(v, key) for v in node]  # type: ignore[return-value]
    return redact_value(key, node)


@dataclass(frozen=True)
class Layout:
    """The files of a cell sharded ``shards`` ways under its run directory ``run_dir``; an unsharded
    cell is the one-shard layout, its shard's files the cell's own (``dir(0) == run_dir``)."""

    run_dir: Path
    shards: int

    @property
    def root(self) -> Path:
        return self.run_dir / SHARDS_DIR

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    def dir(self, i: int) -> Path:
        return self.root / f"{i}-of-{self.shards}" if self.shards > 1 else self.run_dir

    def lock(self, key: str, i: int) -> str:
        """The name of the lock one process holds while it runs shard ``i`` (the whole cell's when unsharded)."""
        return lock_name("cell", key, *(("shard", i, "of", self.shards) if self.shards > 1 else ()))

    def record(self, cfg: DictConfig, i: int) -> None:
        """The cell's config (secrets redacted) beside its shards, and where the cell lives in job
        ``i``'s Hydra output directory: what ``t2exp collect`` reads (nothing for an unsharded cell)."""
        if self.shards == 1:
            return
        plain = _redacted(OmegaConf.to_container(cell_config(cfg), resolve=True))
        text = OmegaConf.to_yaml(OmegaConf.create({k: v for k, v in plain.items() if k != "hydra"}))
        if not self.config.is_file() or self.config.read_text(encoding="utf-8") != text:
            atomic_write_text(self.config, text)
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            pointer = {"run_dir": str(self.run_dir), "shards": self.shards, "shard": i}
            atomic_write_text(f"{HydraConfig.get().runtime.output_dir}/{POINTER_FILE}", json.dumps(pointer))

    def predictions(self, i: int) -> Path:
        return self.dir(i) / PREDICTIONS_FILE

    def done(self, i: int) -> Path:
        return self.dir(i) / "done.json"

    def write_done(self, i: int, record: dict[str, Any]) -> None:
        atomic_write_text(self.done(i), json.dumps(record, sort_keys=True))

    def read_done(self, i: int) -> dict[str, Any]:
        """Shard ``i``'s record: its shard run (``run_id``, None when it had no question), ``metrics``, ..."""
        try:
            record = json.loads(self.done(i).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(
                f"{self.predictions(i)}: shard {i} of {self.shards} has not finished (no {self.done(i).name}); "
                f"run it again: the same command with resume=true, or shard={i} shards={self.shards}"
            ) from None
        except ValueError:  # not JSON
            record = None
        if not isinstance(record, dict) or not isinstance(record.get("metrics"), dict) or not isinstance(record.get("run_id"), str | None):
            raise DataError(
                f"{self.done(i)}: not a finished shard's record (JSON with its run_id and metrics; a damaged file); delete it "
                f"and run shard {i} again (shard={i} shards={self.shards} resume=true): its answers are kept"
            )
        return dict(record)

    def lacking(self, i: int, subsets: list[Subset]) -> int:
        """How many of shard ``i``'s questions of ``subsets`` its predictions file lacks."""
        from t2exp.infra.cache import read_jsonl

        have = {(str(r.get("subset")), str(r.get("id"))) for r in read_jsonl(self.predictions(i))}
        return sum(1 for s in slice_subsets(subsets, i, self.shards) for q in s.questions if (s.name, q.id) not in have)


def read_pointer(path: Path) -> dict[str, Any]:
    """A shard job's ``t2exp_shard.json`` (in its Hydra directory): its cell's ``run_dir``, ``shards`` and ``shard``."""
    try:
        p = json.loads(path.read_text(encoding="utf-8"))
        return {"run_dir": Path(str(p["run_dir"])), "shards": int(p["shards"]), "shard": int(p["shard"])}
    except (ValueError, KeyError, TypeError):
        raise DataError(
            f"{path}: not a shard job's record (JSON with run_dir, shards and shard; a damaged file); give `t2exp collect` "
            "the cell's run directory (<paths.cache>/runs/<cell key>) instead, or delete the file and run that shard again"
        ) from None


def _question(key: tuple[str, str]) -> str:
    """``subset/id`` as error lines show it: cut, whatever the length of the id in a file."""
    return one_line(f"{key[0]}/{key[1]}", 80)


def merged_rows(layout: Layout, subsets: list[Subset]) -> list[Prediction]:
    """Every shard's prediction rows, in the cell's question order. Raises ``DataError`` naming the
    shard file when a shard has not finished, holds a question twice or one of another shard, or
    misses one of its questions."""
    from t2exp.infra.cache import read_jsonl

    expected = {(s.name, q.id): shard_index(s.name, q.id, layout.shards) for s in subsets for q in s.questions}
    found: dict[tuple[str, str], Prediction] = {}
    for i in range(layout.shards):
        layout.read_done(i)
        path = layout.predictions(i)
        for row in read_jsonl(path):
            key = (str(row.get("subset")), str(row.get("id")))
            if expected.get(key) != i:
                where = "a question of no subset of this cell" if key not in expected else f"a question of shard {expected[key]}"
                raise DataError(
                    f"{path}: holds {_question(key)}, {where}; delete that shard's directory and run it again "
                    f"(shard={i} shards={layout.shards})"
                )
            if key in found:
                raise DataError(
                    f"{path}: question {_question(key)} is there twice; delete one of its lines and run "
                    f"`t2exp collect` again (or delete the file and run shard={i} shards={layout.shards})"
                )
            found[key] = Prediction.from_json(row)
    for key, i in expected.items():
        if key not in found:
            have = sum(1 for k, j in expected.items() if j == i and k in found)
            total = sum(1 for j in expected.values() if j == i)
            raise DataError(
                f"{layout.predictions(i)}: question {_question(key)} is missing ({have} of the shard's {total} "
                f"questions there); run it again: shard={i} shards={layout.shards} resume=true"
            )
    return [found[(s.name, q.id)] for s in subsets for q in s.questions]


def merged_counts(counts: list[dict[str, float]]) -> dict[str, float]:
    """The cell's count metrics from its shards' (their metrics beside the scores): seconds, tokens,
    calls and per-subset question counts add up; facts of the corpus are the same in every shard;
    the index counted as a cache hit when every shard found it; throughput over the shards' generate time."""
    out: dict[str, float] = {}
    for name in dict.fromkeys(n for c in counts for n in c):
        values = [float(c[name]) for c in counts if c.get(name) is not None]
        if name.rpartition("/")[2] in SAME_IN_EVERY_SHARD:
            out[name] = values[0]
        elif name.endswith("index_cache_hit"):
            out[name] = min(values)
        elif name != "questions_per_second":
            out[name] = sum(values)
    if any("questions_per_second" in c for c in counts):
        answered = sum(float(c.get("questions_per_second", 0.0)) * float(c.get("generate_seconds", 0.0)) for c in counts)
        seconds = out.get("generate_seconds", 0.0)
        out["questions_per_second"] = answered / seconds if seconds > 0 else 0.0
    return out

"""An option's own metadata: the ``meta:`` block of a component option YAML (MTEB's ``ModelMeta``
is the model): what a report, a docs table or the MLflow UI shows of an option, never what it
computes. ``meta`` is typed here, composed like any key, and left out where results are made:
the constructor never sees it (``t2exp.config.components.build``), nor does the cell key or the run's
params (:func:`without_meta`), so editing a display name re-runs nothing.

``order`` places an option in report tables (the ``rag_method`` options: the paper's Table 3 order,
then t2exp's own); options without one follow, by name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

META_KEY = "meta"


def without_meta(resolved: dict[str, Any]) -> dict[str, Any]:
    """The resolved config without the options' ``meta:`` blocks (what a reader shows of an option,
    not what it computes: no part of a cell's identity or of its params)."""
    return {k: ({kk: vv for kk, vv in v.items() if kk != META_KEY} if isinstance(v, dict) else v) for k, v in resolved.items()}


@dataclass
class OptionMeta:
    display_name: str | None = None  # as a table or a paper names it
    family: str | None = None  # e.g. dense, sparse, hybrid, cross-encoder, decoder LLM
    in_paper: bool = False  # evaluated in the T²-RAGBench paper
    order: int | None = None  # position in report tables
    licence: str | None = None  # of the model weights (SPDX id) where a model is loaded
    params: str | None = None  # parameter count, e.g. 560M


META_FIELDS = tuple(f.name for f in fields(OptionMeta))


def read_meta(doc: dict, group: str) -> dict:
    """The ``meta:`` block of one option YAML: at its top, or under the group's key in a
    ``# @package _global_`` option (which sets other groups' keys too)."""
    node = doc.get(group)
    block = doc.get(META_KEY) or (node.get(META_KEY) if isinstance(node, dict) else None) or {}
    return dict(block) if isinstance(block, dict) else {}


def option_metas(conf_dir: Path, group: str) -> dict[str, OptionMeta]:
    """``name -> OptionMeta`` of the option YAMLs of ``conf_dir/group`` (read as files, not
    composed: a report needs no Hydra). An option without a ``meta:`` block gets the defaults."""
    out: dict[str, OptionMeta] = {}
    for path in sorted((conf_dir / group).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        out[path.stem] = OptionMeta(**{k: v for k, v in read_meta(doc, group).items() if k in META_FIELDS})
    return out


def display_order(metas: dict[str, OptionMeta]) -> list[str]:
    """Option names in report order: by ``order``, then those without one by name."""
    return sorted(metas, key=lambda n: (metas[n].order is None, metas[n].order or 0, n))

"""The evaluation side, from predictions to numbers: :func:`score`, :func:`compare` and :func:`report`
are the Python API of ``t2exp score | compare | report``, imported when first used (a submodule stays light)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from t2exp.evaluation.comparisons import compare
    from t2exp.evaluation.reporting.build import report
    from t2exp.evaluation.scoring.compute import score

__all__ = ["compare", "report", "score"]
_VERBS = {
    "score": ("t2exp.evaluation.scoring.compute", "score"),
    "compare": ("t2exp.evaluation.comparisons", "compare"),
    "report": ("t2exp.evaluation.reporting.build", "report"),
}


def __getattr__(name: str) -> Any:
    if name in _VERBS:
        module, attr = _VERBS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

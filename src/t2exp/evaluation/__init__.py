"""The evaluation side: from predictions to numbers. Its three verbs are the Python API of the
three commands (``t2exp score | compare | report``, :mod:`t2exp.cli`):

- :func:`score` (:func:`t2exp.evaluation.scoring.compute.score`): predictions (a file, rows or
  a mapping) against the gold answers, every metric with its CI;
- :func:`compare` (:func:`t2exp.evaluation.comparisons.compare`): two runs question by question,
  paired bootstrap CI and sign-flip permutation p, and the questions they differ on
  (:func:`~t2exp.evaluation.comparisons.compare_runs`); or every cell of a sweep against a baseline
  cell, Holm-corrected (:func:`~t2exp.evaluation.comparisons.compare_sweep`); both, and the
  report's Δ columns, are views of the one comparison engine
  (:func:`~t2exp.evaluation.paired.compare_pairs`);
- :func:`report` (:func:`t2exp.evaluation.reporting.build.report`): paper-style tables and plots
  of a sweep's MLflow runs.

The modules: :mod:`~t2exp.text.numbers` (answer numbers, Number Match),
:mod:`~t2exp.evaluation.metrics` (the evaluator and the aggregation with bootstrap CIs, the one
place every verb computes metrics), :mod:`~t2exp.evaluation.stats`, :mod:`~t2exp.evaluation.scoring`,
:mod:`~t2exp.evaluation.paired`, :mod:`~t2exp.evaluation.questions`, :mod:`~t2exp.evaluation.listing`,
:mod:`~t2exp.evaluation.comparisons`, :mod:`~t2exp.evaluation.reporting`,
:mod:`~t2exp.evaluation.diagnosis`. The verbs are imported when first used, so importing a
submodule stays light.
"""

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

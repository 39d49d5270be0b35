"""``python -m t2exp.score``: the command line is :mod:`t2exp.evaluation.scoring.cli`.

This module is also callable (``t2exp.score(...)`` is the Python API,
:func:`t2exp.evaluation.scoring.compute.score`) because importing it binds the name ``score`` on
the package to this module.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from t2exp.evaluation.scoring.cli import main


class _CallableModule(types.ModuleType):
    """``import t2exp.score`` replaces the package's lazy ``score`` function with this module."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from t2exp.evaluation.scoring.compute import score

        return score(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())

"""How often Python's cycle collector runs in a t2exp process."""

from __future__ import annotations

import gc

# Python collects its youngest generation after every 700 new container objects, and every tenth
# of those collections the middle one, and so on. Importing Hydra, MLflow, pandas and torch
# allocates millions of them, and each full collection on the way walks everything imported so
# far: a retrieval-only command spent about a seventh of its CPU time collecting
# (benchmarks/run_overhead.py measures a whole process with both thresholds).
YOUNG_THRESHOLD = 10_000


def collect_less_often() -> None:
    """The youngest generation's threshold raised to :data:`YOUNG_THRESHOLD` (never lowered: a
    caller's higher value stays); the older generations keep theirs."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)

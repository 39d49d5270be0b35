"""Paired significance statistics on two equally long vectors of per-question scores (``d = a - b``):
:func:`paired_bootstrap` (mean difference, percentile bootstrap CI over questions) and
:func:`permutation_test` (two-sided sign-flip test: exact when ``2**n <= n_perm``, else ``n_perm``
seeded patterns and ``p = (1 + #{>= observed}) / (1 + n_perm)``). Values in the inputs' units;
deterministic for a given ``seed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_CHUNK = 1000  # resamples per block: bounds memory at _CHUNK * n values

# The one resampling default of every command (a run's CIs, t2exp.score, compare, report): 1000
# resamples (bootstrap) or sign patterns (permutation) drawn with seed 0, 95 % intervals. ranx's
# default too; pass n_boot for more.
N_BOOT = 1000
CI_SEED = 0


@dataclass(frozen=True)
class BootstrapResult:
    mean_a: float
    mean_b: float
    diff: float  # mean(a) - mean(b)
    ci_low: float
    ci_high: float
    n: int


@dataclass(frozen=True)
class PermutationResult:
    diff: float
    p_value: float
    n: int
    exact: bool
    n_perm: int  # sign patterns evaluated (2**n when exact)


def _differences(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.shape != xb.shape or xa.ndim != 1:
        raise ValueError(f"paired vectors must be 1-D and equally long (got {xa.shape} and {xb.shape})")
    if not (np.isfinite(xa).all() and np.isfinite(xb).all()):
        raise ValueError("paired vectors must hold finite numbers")
    return xa, xb, xa - xb


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], n_boot: int = N_BOOT, seed: int = CI_SEED, level: float = 0.95
) -> BootstrapResult:
    """Mean difference ``mean(a) - mean(b)`` and its percentile bootstrap CI over paired questions."""
    # ours, not scipy.stats.bootstrap: same resamples, but its percentiles differ in the last bits
    xa, xb, d = _differences(a, b)
    n = d.size
    if n == 0:
        nan = float("nan")
        return BootstrapResult(nan, nan, nan, nan, nan, 0)
    lo, hi = percentile_ci(d, n_boot, seed, level)
    return BootstrapResult(float(xa.mean()), float(xb.mean()), float(d.mean()), lo, hi, n)


def percentile_ci(values: np.ndarray, n_boot: int = N_BOOT, seed: int = CI_SEED, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (resampled with replacement, ``n_boot``
    times in blocks of ``_CHUNK``): the one resampler of a run's CIs and of paired differences."""
    if n_boot < 1:
        raise ValueError("n_boot must be >= 1")
    n = values.size
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    for start in range(0, n_boot, _CHUNK):
        m = min(_CHUNK, n_boot - start)
        idx = rng.integers(0, n, size=(m, n))
        means[start : start + m] = values[idx].mean(axis=1)
    lo, hi = np.percentile(means, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def _at_least(stats: np.ndarray, observed: float) -> int:
    # relative tolerance: sums of the same numbers in another order may differ in the last bits
    tol = 1e-9 * max(1.0, observed)
    return int(np.count_nonzero(stats >= observed - tol))


def permutation_test(a: Sequence[float], b: Sequence[float], n_perm: int = N_BOOT, seed: int = CI_SEED) -> PermutationResult:
    """Two-sided paired sign-flip permutation test of H0: mean(a - b) = 0."""
    # ours, not scipy.stats.permutation_test: the exact p is the same (tests/evaluation/test_oracles.py), but
    # scipy draws its Monte Carlo sign patterns differently, so logged p-values would change
    _, _, d = _differences(a, b)
    n = d.size
    if n == 0:
        return PermutationResult(float("nan"), float("nan"), 0, True, 0)
    if n_perm < 1:
        raise ValueError("n_perm must be >= 1")
    observed = float(abs(d.sum()))
    if n < 63 and 2**n <= n_perm:
        patterns = 2**n
        count = 0
        for start in range(0, patterns, _CHUNK):
            codes = np.arange(start, min(patterns, start + _CHUNK), dtype=np.int64)
            bits = (codes[:, None] >> np.arange(n, dtype=np.int64)) & 1
            signs = 1.0 - 2.0 * bits
            count += _at_least(np.abs(signs @ d), observed)
        return PermutationResult(float(d.mean()), count / patterns, n, True, patterns)
    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, n_perm, _CHUNK):
        m = min(_CHUNK, n_perm - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(m, n))
        count += _at_least(np.abs(signs @ d), observed)
    return PermutationResult(float(d.mean()), (1 + count) / (1 + n_perm), n, False, n_perm)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni step-down adjusted p-values, in the order given (the correction of every
    table that tests several comparisons at once: a sweep's rows against its baseline, all pairs).

    With the ``m`` p-values sorted ascending, ``p_(i)`` (i = 1..m) becomes
    ``min(1, max_{j <= i} (m - j + 1) * p_(j))``: the running maximum keeps the adjusted values in
    the order of the raw ones, and tied raw p-values get the same adjusted value. Controls the
    family-wise error rate at any dependence between the tests (Holm 1979); never larger than
    Bonferroni's ``m * p``. E.g. ``(0.01, 0.04, 0.03)`` -> ``(0.03, 0.06, 0.06)``."""
    ps = [float(p) for p in p_values]
    if any(not (0.0 <= p <= 1.0) for p in ps):  # NaN fails the comparison too
        raise ValueError(f"p-values must lie in [0, 1] (got {ps})")
    m = len(ps)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


def holm_header(m: int) -> str:
    """The column header of Holm-adjusted p-values over ``m`` comparisons: ``p (Holm, m=7)``."""
    return f"p (Holm, m={m})"

"""The default retriever's values (``conf/rag_method/bm25f.yaml``): chosen on the bundled questions
outside the report sample, reported on the report sample, in one run.

    python benchmarks/default_retriever.py                 # ~5 min on 2 cores: 40 trials + 3 report runs
    python benchmarks/default_retriever.py --trials 0      # the report table only

1. A copy of the bundled data whose report-sample rows (``dataset.limit=200 seed=0``, what
   ``benchmarks/answers.py --sample report`` asks) are split ``report`` and every other row split
   ``tune``; the corpus stays whole.
2. ``--trials`` Optuna trials (TPE, seed 0, no folds) of ladder rung l4_priors over its eight values,
   asked only the ``tune`` questions (``dataset.question_splits=[tune]``), objective avg MRR@3. The
   best values are printed next to the ones ``bm25f.yaml`` holds (rounded to 3 decimals there).
3. ``rag_method=bm25f``, ``bm25`` (untuned company+year BM25) and ``hybrid`` (t2exp's relative-score hybrid of bm25s and MiniLM)
   on the report sample, retrieval only: MRR@3, R@1, R@3 with 95 % CIs, and how often the top
   document is the gold one (what the generator reads with ``context.documents=1``).

Ends with one ``RATIO default_retriever: ...`` line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    DEFAULT_DATA,
    REPORT_LIMIT,
    REPORT_SEED,
    compose,
    latest_predictions,
    machine,
    ratio_line,
    report_ids,
    t2exp,
    table,
)

SPACE = {
    "rag_method.bm25.k1": "interval(0.3,3.0)",
    "rag_method.bm25.b": "interval(0.1,1.0)",
    "rag_method.bm25.fields.company_name": "interval(0.0,8.0)",
    "rag_method.bm25.fields.report_year": "interval(0.0,8.0)",
    "rag_method.bm25.fields.company_symbol": "interval(0.0,4.0)",
    "rag_method.company_boost": "interval(0.0,1.0)",
    "rag_method.year_boost": "interval(0.0,0.5)",
    "rag_method.year_window": "choice(0,1,2,3)",
}
METHODS = ("bm25f", "bm25", "hybrid")


def split_data(dest: Path) -> tuple[int, int]:
    """The bundled data with the report sample in split ``report`` and the rest in ``tune``."""
    import pandas as pd

    report = report_ids()
    n_tune = 0
    for f in sorted(DEFAULT_DATA.glob("*.parquet")):
        df = pd.read_parquet(f)
        df.assign(split=["report" if i in report else "tune" for i in df["id"]]).to_parquet(dest / f.name)
        n_tune += sum(i not in report for i in df["id"])
    return len(report), n_tune


def tune(work: Path, data: Path, trials: int) -> dict:
    import yaml

    t2exp(
        work,
        [
            "-m",
            "hydra/sweeper=held_out_optuna",
            "hydra.sweeper.held_out=false",
            "+rung=l4_priors",
            f"dataset.path={data}",
            "dataset.question_splits=[tune]",
            "dataset.limit=null",
            "generator=none",
            "experiment_name=default_retriever",
            f"hydra.sweeper.n_trials={trials}",
            "hydra.sweeper.sampler.seed=0",
            *(f"{k}={v}" for k, v in SPACE.items()),
        ],
    )
    (result,) = sorted(work.glob("multirun/*/*/optimization_results.yaml"))
    return yaml.safe_load(result.read_text(encoding="utf-8"))


def shipped() -> dict[str, float]:
    """The values conf/rag_method/bm25f.yaml holds, by the keys of SPACE."""
    from omegaconf import OmegaConf

    cfg = compose(["rag_method=bm25f"])
    return {key: float(OmegaConf.select(cfg, key)) for key in SPACE}


def report_run(work: Path, method: str) -> list[dict]:
    t2exp(
        work,
        [
            f"rag_method={method}",
            "generator=none",
            f"dataset.limit={REPORT_LIMIT}",
            f"seed={REPORT_SEED}",
            "experiment_name=default_retriever",
        ],
    )
    return latest_predictions(work / ".t2exp_cache")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=40, help="Optuna trials on the tune questions (0: skip tuning)")
    args = ap.parse_args()
    from t2exp.evaluation.metrics import aggregate

    print(machine())
    with tempfile.TemporaryDirectory(prefix="t2exp-retriever-") as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir()
        n_report, n_tune = split_data(data)
        print(f"report sample: {n_report} questions (dataset.limit={REPORT_LIMIT} seed={REPORT_SEED}); tuned on the other {n_tune}")
        mine = shipped()
        if args.trials:
            best = tune(work, data, args.trials)
            print(f"\nbest of {args.trials} trials on the tune questions: avg MRR@3 {best['best_value']:.2f}")
            rows = [[k, float(best["best_params"][k]), mine[k]] for k in SPACE]
            print(table(["value", "tuned now", "bm25f.yaml"], rows, ".3f"))
        rows = []
        for method in METHODS:
            res = report_run(work, method)
            avg = aggregate(res, ["mrr_at_3", "recall_at_1", "recall_at_3"], ci=True)["avg"]
            rows.append(
                [
                    method,
                    *(f"{avg[m].mean:.1f} [{avg[m].ci_low:.1f}, {avg[m].ci_high:.1f}]" for m in ("mrr_at_3", "recall_at_1", "recall_at_3")),
                    avg["mrr_at_3"].n,
                ]
            )
        print("\nreport sample, retrieval only (avg of FinQA and TAT-DQA, question-weighted):")
        print(table(["rag_method", "MRR@3", "R@1 (= gold read with context.documents=1)", "R@3", "n"], rows))
    ratio_line(
        "default_retriever",
        **{f"{r[0]}_mrr_at_3": r[1].split()[0] for r in rows},
        **{f"{r[0]}_recall_at_1": r[2].split()[0] for r in rows},
        questions=rows[0][4],
    )


if __name__ == "__main__":
    main()

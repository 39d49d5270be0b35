"""Answer recipes with the gold context (``rag_method=oracle``): Number Match with its 95 % CI,
the error breakdown and the model's seconds per answer of each recipe, on the same seeded
questions, in one run.

    python benchmarks/answers.py --sample tune                 # choose: 20 questions a subset outside the report sample
    python benchmarks/answers.py --sample report --recipes 0.5b,1.5b-fewshot-vote5   # report: dataset.limit=200, seed 0

Two question sets that never share a question:

- ``report``: what ``python -m t2exp rag_method=oracle dataset.limit=200`` asks, the seeded sample
  (seed 0) of 200 questions of each bundled subset the loader draws (``t2exp.data.sampling.sample_questions``).
  The README's numbers come from here.
- ``tune``: ``--per-subset`` questions of each subset drawn (seed ``--seed``) from the bundled
  questions *outside* the report sample: a copy of the bundled data whose other rows are split
  ``corpus``, asked with ``dataset.question_splits=[tune]``, so the corpus stays whole for the
  retrieving recipes. Recipes are compared and chosen here.

A recipe runs with ``rag_method=oracle`` (the gold context) unless its overrides choose the
retrieval (``rag_method=`` or ``+rung=``): the ``-e2e`` recipes retrieve, so a run of
``--recipes 1.5b-code,1.5b-code-e2e`` prints end-to-end NM paired against the oracle's.

Each recipe is a real ``python -m t2exp`` subprocess (its overrides below) in its own working
directory; converted models come from the checkout's cache. Before a recipe runs, its LLM cache
takes in the answers of every other recipe's (content-keyed: the same model, sampling and prompt),
so a re-run only computes recipes or questions it has not seen, and an end-to-end run asks the
model only where its prompt differs from the oracle's (the retriever ranked another document
first). Seconds per answer are the model's when it made the answer. Paired differences against the first recipe use the evaluator's paired
bootstrap (:mod:`t2exp.evaluation.paired`). Ends with one ``RATIO answers: ...`` line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    DEFAULT_DATA,
    REPORT_LIMIT,
    REPORT_SEED,
    ROOT,
    SHARED_CACHE,
    latest_predictions,
    machine,
    ratio_line,
    report_ids,
    t2exp,
    table,
)

FEWSHOT = "generator.prompt=answer_program_fewshot"
DEMOS = ["generator.prompt=answer_code_demos", "generator.demos=code_tune"]
VOTE5 = ["generator.sampling.samples=5", "generator.grounding=prefer"]
RECIPES: dict[str, list[str]] = {
    "0.5b": ["generator=qwen_coder_0_5b"],
    "0.5b-fewshot": ["generator=qwen_coder_0_5b", FEWSHOT],
    "0.5b-fewshot-vote5": ["generator=qwen_coder_0_5b", FEWSHOT, *VOTE5],
    "1.5b": ["generator=qwen_coder_1_5b"],
    "1.5b-full": ["generator=qwen_coder_1_5b", "context.mode=full"],
    "1.5b-years": ["generator=qwen_coder_1_5b", "generator.prompt=answer_program_years"],
    "1.5b-rows": ["generator=qwen_coder_1_5b", "context.tables=rows"],
    "1.5b-full-rows": ["generator=qwen_coder_1_5b", "context.mode=full", "context.tables=rows"],
    "1.5b-code": ["generator=qwen_coder_1_5b_code"],
    "1.5b-code-v1": ["generator=qwen_coder_1_5b_code", "generator.prompt=answer_code_v1"],
    "1.5b-code-full": ["generator=qwen_coder_1_5b_code", "context.mode=full"],
    "1.5b-code-vote5": ["generator=qwen_coder_1_5b_code", *VOTE5],
    "1.5b-code-demos": ["generator=qwen_coder_1_5b_code", *DEMOS],
    # end to end: the default retriever, the generator reading its top document (context.documents=1)
    "1.5b-e2e": ["generator=qwen_coder_1_5b", "rag_method=bm25f"],
    "1.5b-code-e2e": ["generator=qwen_coder_1_5b_code", "rag_method=bm25f"],
    # ... and reading all three retrieved documents, without and with a report header on each
    "1.5b-code-e2e-bm25-k3": ["generator=qwen_coder_1_5b_code", "rag_method=bm25", "context.documents=null"],
    "1.5b-code-e2e-bm25-k3-header": [
        "generator=qwen_coder_1_5b_code",
        "rag_method=bm25",
        "context.documents=null",
        "context.header=company_year",
    ],
    "1.5b-code-e2e-hybrid-k3": ["generator=qwen_coder_1_5b_code", "rag_method=hybrid", "context.documents=null"],
    "1.5b-code-header": ["generator=qwen_coder_1_5b_code", "context.header=company_year"],
    "1.5b-fewshot": ["generator=qwen_coder_1_5b", FEWSHOT],
    "1.5b-grounded-vote5": ["generator=qwen_coder_1_5b", *VOTE5],
    "1.5b-fewshot-vote5": ["generator=qwen_coder_1_5b", FEWSHOT, *VOTE5],
    "1.5b-cot": ["generator=qwen_coder_1_5b", "generator.answer_mode=cot", "generator.sampling.max_tokens=320"],
}
SHOWN = ("not_retrieved", "no_number", "runaway", "ungrounded", "wrong_lookup", "wrong_operation")  # error categories


def tune_data(dest: Path, per_subset: int, seed: int, exclude: frozenset[str] = frozenset()) -> None:
    """Copy the bundled data with ``per_subset`` questions of each subset from outside the report
    sample (and outside ``exclude``) in split ``tune`` and every other row in split ``corpus``."""
    import pandas as pd

    keep = tune_ids(per_subset, seed, exclude)
    for f in sorted(DEFAULT_DATA.glob("*.parquet")):
        df = pd.read_parquet(f)
        df.assign(split=["tune" if i in keep else "corpus" for i in df["id"]]).to_parquet(dest / f.name)


def tune_ids(per_subset: int, seed: int, exclude: frozenset[str] = frozenset()) -> set[str]:
    """The ids of a tune sample: ``per_subset`` questions of each bundled subset drawn (``seed``)
    from outside the report sample and ``exclude``."""
    import random

    import pandas as pd

    report = report_ids() | exclude
    keep: set[str] = set()
    for f in sorted(DEFAULT_DATA.glob("*.parquet")):
        rest = [i for i in pd.read_parquet(f, columns=["id"])["id"] if i not in report]
        keep.update(random.Random(seed).sample(rest, min(per_subset, len(rest))))
    return keep


def demo_ids() -> frozenset[str]:
    """The question ids of every demonstration pool in ``prompts/demos/`` (``benchmarks/demos.py``)."""
    from t2exp.answering.demos import DemoPool

    prompts = ROOT / "prompts"
    return frozenset(d.id for f in sorted((prompts / "demos").glob("*.jsonl")) for d in DemoPool.load(prompts, f.stem).demos)


def share_answers(root: Path, dest: Path) -> None:
    """Copy into the LLM cache ``dest`` the answers the other recipes' caches under ``root`` hold."""
    from t2exp.infra.cache import KVCache

    mine = KVCache(dest)
    for other in sorted(root.glob("*/cache/llm.sqlite")):
        if other != dest:
            mine.absorb(KVCache(other))


def run(work: Path, overrides: list[str]) -> list[dict]:
    retrieves = any(o.startswith(("rag_method=", "+rung=")) for o in overrides)
    t2exp(
        work,
        [
            *([] if retrieves else ["rag_method=oracle"]),
            *overrides,
            f"paths.models={SHARED_CACHE / 'models'}",
            f"paths.cache={work / 'cache'}",
        ],
        timeout=6 * 3600,
    )
    return latest_predictions(work / "cache")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", choices=("tune", "report"), default="tune")
    ap.add_argument("--recipes", default=",".join(RECIPES), help=f"comma-separated, first = baseline; known: {', '.join(RECIPES)}")
    ap.add_argument("--per-subset", type=int, default=20, help="tune sample: questions per subset")
    ap.add_argument("--seed", type=int, default=1, help="tune sample: seed of the draw")
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="tune sample: also skip the questions of every pool in prompts/demos/ (they were answered there)",
    )
    ap.add_argument("--limit", type=int, default=REPORT_LIMIT, help="report sample: dataset.limit (seed 0)")
    ap.add_argument("--extra", nargs="*", default=[], help="overrides added to every recipe, e.g. generator.threads=1")
    ap.add_argument("--work", type=Path, default=SHARED_CACHE / "bench-answers", help="working directories and the LLM cache")
    args = ap.parse_args()
    from t2exp.evaluation.diagnosis import breakdown
    from t2exp.evaluation.metrics import aggregate
    from t2exp.evaluation.paired import compare_values

    names = [r.strip() for r in args.recipes.split(",") if r.strip()]
    unknown = [r for r in names if r not in RECIPES]
    if unknown:
        raise SystemExit(f"--recipes: unknown {', '.join(unknown)}; known: {', '.join(RECIPES)}")
    print(machine())
    with tempfile.TemporaryDirectory(prefix="t2exp-answers-") as tmp:
        if args.sample == "tune":
            data = Path(tmp) / "data"
            data.mkdir()
            tune_data(data, args.per_subset, args.seed, demo_ids() if args.fresh else frozenset())
            sample = [f"dataset.path={data}", "dataset.limit=null", "dataset.question_splits=[tune]"]
            what = (
                f"tune: {args.per_subset} questions a subset outside the report sample"
                f"{' and the demonstration pools' if args.fresh else ''}, seed {args.seed}"
            )
        else:
            sample = [f"dataset.limit={args.limit}", f"seed={REPORT_SEED}"]
            what = f"report: dataset.limit={args.limit} seed={REPORT_SEED} on the bundled dev data"
        print(f"checkout: {ROOT}; sample {what}")
        results: dict[str, list[dict]] = {}
        for name in names:
            work = args.work / name
            (work / "cache").mkdir(parents=True, exist_ok=True)
            share_answers(args.work, work / "cache" / "llm.sqlite")
            t0 = time.perf_counter()
            results[name] = run(work, [*RECIPES[name], *sample, *args.extra, "tracking.experiment=bench-answers"])
            print(f"{name}: {len(results[name])} answers in {time.perf_counter() - t0:.0f}s", flush=True)
    base = names[0]
    base_nm = {r["id"]: r["nm"] for r in results[base] if r.get("nm") is not None}
    rows = []
    for name in names:
        res = results[name]
        avg = aggregate(res, ["nm", "recall_at_3"], ci=True)
        per = {s: avg[s]["nm"].mean for s in avg if s != "avg"}
        nm = avg["avg"]["nm"]
        secs = [r["generate_seconds"] for r in res if r.get("generate_seconds") is not None]
        ids = [r["id"] for r in res if r.get("nm") is not None and r["id"] in base_nm]
        mine = {r["id"]: r["nm"] for r in res}
        diff = compare_values("avg", [mine[i] for i in ids], [base_nm[i] for i in ids], n_boot=2000, seed=0)
        counts = breakdown(res)["all"]
        r_at_3 = avg["avg"]["recall_at_3"].mean if "recall_at_3" in avg["avg"] else float("nan")
        rows.append(
            [
                name,
                per.get("FinQA", float("nan")),
                per.get("TAT-DQA", float("nan")),
                nm.mean,
                f"[{nm.ci_low:.1f}, {nm.ci_high:.1f}]",
                nm.n,
                f"{diff.diff:+.1f} [{diff.ci_low:+.1f}, {diff.ci_high:+.1f}]",
                sum(secs) / max(1, len(secs)),
                r_at_3,
                *(counts.get(c, 0) for c in SHOWN),
            ]
        )
    print()
    print(table(["recipe", "FinQA NM", "TAT-DQA NM", "avg NM", "95% CI", "n", f"Δ vs {base}", "s/answer", "R@3", *SHOWN], rows, ".1f"))
    best = max(rows, key=lambda r: r[3])
    ratio_line(
        "answers",
        sample=args.sample,
        best=best[0],
        best_nm=best[3],
        baseline_nm=rows[0][3],
        best_s_per_answer=best[7],
        baseline_s_per_answer=rows[0][7],
        questions=rows[0][5],
    )


if __name__ == "__main__":
    main()

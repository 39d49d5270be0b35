"""Build a demonstration pool (``prompts/demos/<name>.jsonl``, :mod:`t2exp.answering.demos`) from answers
that scored: every code answer of the given ``answers.py`` recipes, on questions outside the
report sample, whose Number Match is 1 and whose program only uses numbers of its evidence.

    python benchmarks/demos.py                                  # code_tune: 1.5b-code, then 1.5b-code-v1, tune draws 1-3
    python benchmarks/demos.py --recipes 1.5b-code --draws 4:30 --name mine

Reads the recipes' predictions under ``.t2exp_cache/bench-answers/<recipe>/cache/runs/`` (made by
``benchmarks/answers.py --sample tune``) of the questions of the tune draws ``--draws`` names
(``seed:per_subset``, as ``answers.py --seed S --per-subset N`` drew them, without ``--fresh``);
a question answered right by several recipes keeps the first recipe's answer. A question of the
report sample is never taken: the pool must not have seen the questions the README scores. Prints
the pool's size per subset and one ``RATIO`` line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, SHARED_CACHE, ratio_line, report_ids
from answers import tune_ids
from t2exp.data.loader import read_jsonl_objects


def solved(recipe: str, report: frozenset[str], asked: set[str]) -> dict[str, dict]:
    """The right, grounded code answers of one recipe's runs to the ``asked`` questions outside the
    report sample, by question id."""
    out: dict[str, dict] = {}
    for preds in sorted((SHARED_CACHE / "bench-answers" / recipe / "cache" / "runs").glob("*/predictions.jsonl")):
        for r in read_jsonl_objects(preds):
            if r["id"] in report or r["id"] not in asked or r["id"] in out or r.get("nm") != 1 or r.get("grounded") is not True:
                continue
            if r.get("program") and r.get("answer_text"):
                out[r["id"]] = {
                    "id": r["id"],
                    "context_id": r["context_id"],
                    "subset": r["subset"],
                    "question": r["question"],
                    "answer": r["answer_text"].strip(),
                }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipes", default="1.5b-code,1.5b-code-v1", help="answers.py recipes, first preferred")
    ap.add_argument("--draws", default="1:20,2:30,3:30", help="tune draws as seed:per_subset, comma-separated")
    ap.add_argument("--name", default="code_tune", help="the pool: prompts/demos/<name>.jsonl")
    args = ap.parse_args()
    report = report_ids()
    asked = set().union(*(tune_ids(int(n), int(seed)) for seed, n in (d.split(":") for d in args.draws.split(","))))
    pool: dict[str, dict] = {}
    for recipe in args.recipes.split(","):
        for qid, demo in solved(recipe, report, asked).items():
            pool.setdefault(qid, demo)
    if not pool:
        raise SystemExit(f"--recipes {args.recipes}: no right answers found; run benchmarks/answers.py --sample tune first")
    dest = ROOT / "prompts" / "demos" / f"{args.name}.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    rows = [pool[k] for k in sorted(pool)]
    dest.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    by_subset: dict[str, int] = {}
    for r in rows:
        by_subset[r["subset"]] = by_subset.get(r["subset"], 0) + 1
    print(f"{dest.relative_to(ROOT)}: {len(rows)} demonstrations ({', '.join(f'{k} {v}' for k, v in sorted(by_subset.items()))})")
    ratio_line("demos", demos=len(rows), **{k.replace("-", "_").lower(): v for k, v in sorted(by_subset.items())})


if __name__ == "__main__":
    main()

"""``t2exp explore``'s page at full scale: 23,088 questions (all of T²-RAGBench) x 8 cells.

Synthetic rows (three subsets; per question a 120-character question, five retrieved ids of
which the prompt holds three, a number answer, a 150-character generation, NM right about half the
time) go through the page builder ``t2exp explore`` uses
(:func:`t2exp.evaluation.reporting.explore.page_data`: the comparison engine, the error
categories), then the page is opened from ``file://`` in headless Chromium with every request sent
to a closed port. Measured:

- the page file's size;
- the seconds from navigation until the first rows are on screen (the page's own mark after it
  parsed its data and drew the visible rows);
- the milliseconds from a click on the "cells disagree" filter, the sort by disagreement, a jump
  down the list and a search typed (each on all the questions) until the next frame is drawn;
- the seconds the builder takes (Python: the comparisons with ``--n-boot`` resamples).

    python benchmarks/explore.py [--browser chromium] [--n-boot 1000]
    python benchmarks/explore.py --quick    # 500 questions x 3 cells

Goal: first rows <= 2 s, a filter <= 300 ms.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

sys.path.insert(0, str(C.ROOT / "tests"))
SUBSETS = ("FinQA", "ConvFinQA", "TAT-DQA")
WORDS = "what was the change in net revenue between 2019 and 2020 as a percentage of total operating expenses".split()


def synthetic_cells(n: int, n_cells: int, seed: int = 0) -> list:
    from t2exp.evaluation.reporting.explore import ExploredRun

    rng = random.Random(seed)
    questions = [
        (SUBSETS[i % 3], f"q{i:05d}", " ".join(rng.choice(WORDS) for _ in range(20))[:120], round(rng.uniform(-500, 5000), 2))
        for i in range(n)
    ]
    cells = []
    for c in range(n_cells):
        rows = []
        for subset, qid, text, gold in questions:
            gold_doc = f"doc-{qid}"
            retrieved = [f"doc-q{rng.randrange(n):05d}" for _ in range(5)]
            if rng.random() < 0.6:
                retrieved[rng.randrange(5)] = gold_doc
            right = rng.random() < 0.5
            pred = gold if right else round(gold * rng.choice([0.1, 1.07, 2.0, -1.0]), 2)
            gen = f"The table gives {gold} in 2020; the answer is {pred}. " + " ".join(rng.choice(WORDS) for _ in range(12))
            rows.append(
                {
                    "subset": subset,
                    "id": qid,
                    "question": text,
                    "context_id": gold_doc,
                    "retrieved": retrieved,
                    "n_contexts": 3,
                    "gold": gold,
                    "gold_raw": str(gold),
                    "prediction": pred,
                    "answer_text": str(pred),
                    "generation": gen[:150],
                    "nm": 1.0 if right else 0.0,
                }
            )
        cells.append(ExploredRun(f"cell {c} · method{c % 4} · k={3 + c // 4 * 2}", rows, f"{c:032x}"))
    return cells


FRAME = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def timed_action(b, action: str) -> float:
    """Milliseconds from ``action`` (JavaScript) until the frame after it is drawn."""
    return float(b.js(f"(async () => {{ const t = performance.now(); {action}; await {FRAME}; return performance.now() - t; }})()"))


def measure(page: Path, binary: str) -> dict[str, float]:
    from helpers.browser import Browser

    b = Browser(binary, width=1440, height=1000, offline=True)
    try:
        b.send("Page.enable")
        b.goto(page.as_uri())
        b._until(lambda: b.js("document.body && document.body.dataset.ready === '1'"), 120, "the page ready")
        first = float(b.js("window.explorer.firstRows")) / 1000
        rows = int(b.js("document.querySelectorAll('.row').length"))
        if rows == 0:
            raise SystemExit("the page drew no rows")
        out = {"first_rows_s": first}
        # each on all the questions: the filter is cleared again before the next
        out["filter_ms"] = timed_action(b, "document.getElementById('f-disagree').click()")
        b.js("document.getElementById('f-disagree').click()")
        sort = "const o = document.getElementById('sort'); o.value = 'disagreement'; o.dispatchEvent(new Event('change'))"
        out["sort_ms"] = timed_action(b, sort)
        out["scroll_ms"] = timed_action(b, "document.getElementById('grid').scrollTop = 400000")
        search = "const s = document.getElementById('f-search'); s.value = 'q0123'; s.dispatchEvent(new Event('input'))"
        out["search_ms"] = timed_action(b, search)
        return out
    finally:
        b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="500 questions x 3 cells")
    ap.add_argument("--browser", default=shutil.which("chromium") or shutil.which("chromium-browser") or "chromium")
    ap.add_argument("--n-boot", type=int, default=1000)
    args = ap.parse_args()
    n, n_cells = (500, 3) if args.quick else (23_088, 8)
    if shutil.which(args.browser) is None:
        raise SystemExit(f"--browser {args.browser}: not found (Debian: apt-get install chromium)")
    from t2exp.evaluation.reporting.explore import Explored, page_data, write_page

    print(f"machine: {C.machine()}")
    cells = synthetic_cells(n, n_cells)
    with tempfile.TemporaryDirectory(prefix="t2exp-explore-") as tmp:
        t0 = time.perf_counter()
        page = write_page(Path(tmp) / "explore.html", page_data(Explored("synthetic", cells), n_boot=args.n_boot))
        build = time.perf_counter() - t0
        size = page.stat().st_size / 2**20
        m = measure(page, args.browser)
    head = ["questions", "cells", "page MB", "build s", "first rows s", "filter ms", "sort ms", "scroll ms", "search ms"]
    print(C.table(head, [[n, n_cells, size, build, *m.values()]]))
    C.ratio_line("explore", questions=n, cells=n_cells, page_mb=size, build_s=build, **m)


if __name__ == "__main__":
    main()

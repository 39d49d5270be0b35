"""``t2exp compare`` with any system's outputs: a predictions file in the ``t2exp score`` format
(``id``, ``prediction``, optional ``retrieved`` and ``subset``; no metric values) is scored on the
fly against the bundled gold and compared like a run, a ``t2exp score --mlflow`` run is compared
like a cell, ``--subset`` restricts a comparison, and the sweep's description gives each subset's
difference with its CI."""

from __future__ import annotations

import json
import re

import pytest

from helpers.app import run_app
from helpers.command import cli
from helpers.paths import ROOT
from helpers.tracking import mlflow_runs


def _compare(*args: str, cwd=None):
    from t2exp.cli.compare import main

    return cli(main, list(args), prog="t2exp compare", **({"cwd": cwd} if cwd else {}))


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _gold_rows():
    """The bundled data's default sample (6 questions per subset), as ``t2exp score`` loads it."""
    from t2exp.evaluation.scoring.gold import compose_config, load_gold

    return load_gold(compose_config("bundled")).questions


def _answers(questions, wrong=()):
    """An outside system's answers in the ``t2exp score`` format: the gold answer, except for the
    questions in ``wrong``."""
    return [{"id": q.id, "subset": q.subset, "prediction": "no idea" if q.id in wrong else q.gold_raw} for q in questions]


def test_two_outside_files_are_scored_against_the_gold_and_the_wrong_answers_listed(tmp_path):
    questions = _gold_rows()
    wrong = {questions[0].id, questions[1].id, questions[-1].id}
    right = _write(tmp_path / "right.jsonl", _answers(questions))
    mine = _write(tmp_path / "mine.jsonl", _answers(questions, wrong))

    proc = _compare(right, mine, "--show", "all", "--format", "json", "--n-boot", "200", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["metric"] == "nm" and out["paired"] == len(questions)
    rows = {r["subset"]: r for r in out["rows"]}
    for subset in ("FinQA", "TAT-DQA"):
        n = sum(q.subset == subset for q in questions)
        n_wrong = sum(q.subset == subset and q.id in wrong for q in questions)
        assert (rows[subset]["n"], rows[subset]["mean_a"]) == (n, 100.0)
        assert rows[subset]["mean_b"] == pytest.approx(100.0 * (n - n_wrong) / n)
    assert {q["id"] for q in out["questions"]} == wrong
    assert {q["effect"] for q in out["questions"]} == {"A better"}
    assert not (tmp_path / "mlruns").exists()  # two files: no MLflow store is opened


def test_a_metric_neither_side_has_names_the_metrics_both_sides_have(tmp_path):
    questions = _gold_rows()
    right = _write(tmp_path / "right.jsonl", _answers(questions))
    ranked = [{**r, "retrieved": ["x"]} for r in _answers(questions)]
    mine = _write(tmp_path / "mine.jsonl", ranked)
    proc = _compare(right, mine, "--metric", "mrr_at_3", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("t2exp compare: error: no question has a 'mrr_at_3' value in both runs")
    assert "A has nm, nm_bare, nm_strict; B has mrr_at_3, nm, nm_bare, nm_strict, recall_at_1, recall_at_3, recall_at_5" in line


def test_an_unknown_subset_is_one_line_naming_the_subsets_there(tmp_path):
    questions = _gold_rows()
    right = _write(tmp_path / "right.jsonl", _answers(questions))
    proc = _compare(right, right, "--subset", "ConvFinQA", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert (
        line == "t2exp compare: error: --subset ConvFinQA: the runs compared have no question of that subset; their subsets: FinQA, TAT-DQA"
    )


def test_subset_restricts_a_sweeps_comparison(tmp_path):
    from helpers.tracking import logged_sweep

    def rows(wrong):
        return [{"id": f"{s}-{i}", "subset": s, "nm": 0.0 if (s, i) in wrong else 1.0} for s in ("FinQA", "TAT-DQA") for i in range(3)]

    cells = [
        {"name": "base", "params": {"rag_method.name": "base"}, "overrides": "rag_method=base", "rows": rows(set())},
        {
            "name": "bm25",
            "params": {"rag_method.name": "bm25"},
            "overrides": "rag_method=bm25",
            "rows": rows({("FinQA", 0), ("TAT-DQA", 1)}),
        },
    ]
    uri, parent = logged_sweep(tmp_path, cells)
    proc = _compare(
        parent, "--baseline", "rag_method=base", "--tracking-uri", uri, "--subset", "TAT-DQA", "--format", "json", "--n-boot", "50"
    )
    assert proc.returncode == 0, proc.stderr
    (cell,) = json.loads(proc.stdout)["cells"]
    assert [(r["subset"], r["n"]) for r in cell["rows"]] == [("TAT-DQA", 3), ("overall", 3)]
    assert [(q["subset"], q["id"]) for q in cell["questions"]] == [("TAT-DQA", "TAT-DQA-1")]


def _outside_from_cell(cell_rows, n_changed_per_subset=2):
    """An outside system's file built from a cell's own rows: the gold answers, the cell's ranking,
    except for the first questions of each subset, whose gold document is moved (to the top where
    the cell's top 3 missed it, out of the ranking where it found it): those, and only those,
    differ from the cell in MRR@3. The rows, and the ``(subset, id)`` of the changed ones."""
    rows, changed, seen = [], set(), {}
    for r in cell_rows:
        ranked, gold = list(r["retrieved"]), r["context_id"]
        seen[r["subset"]] = seen.get(r["subset"], 0) + 1
        if seen[r["subset"]] <= n_changed_per_subset:
            ranked = [c for c in ranked if c != gold] if gold in ranked[:3] else [gold, *ranked]
            changed.add((r["subset"], r["id"]))
        rows.append({"id": r["id"], "subset": r["subset"], "prediction": r["gold_raw"], "retrieved": ranked})
    return rows, changed


def _mrr3(ranked, gold):
    return next((100.0 / (i + 1) for i, c in enumerate(ranked[:3]) if c == gold), 0.0)


CELL = ["rag_method=base", "generator=none"]  # the cell of the docs' example: the bundled sample, 6 questions per subset


@pytest.fixture(scope="module")
def cell(tmp_path_factory, shared_cache):
    """One retrieval-only cell in a real MLflow store, its predictions file, and an outside
    system's file built from it with known differences."""
    work = tmp_path_factory.mktemp("cell")
    run_app(CELL, shared_cache, work)
    client, (run,) = mlflow_runs(work)
    path = client.download_artifacts(run.info.run_id, "predictions.jsonl", str(work))
    cell_rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    rows, changed = _outside_from_cell(cell_rows)
    mine = _write(work / "mine.jsonl", rows)
    return {"work": work, "run": run, "file": path, "cell_rows": cell_rows, "mine": mine, "rows": rows, "changed": changed}


def _check_against_the_cell(out, cell):
    """The per-subset rows and the differing questions of ``mine`` (A) against the cell (B)."""
    gold = {(r["subset"], r["id"]): r["context_id"] for r in cell["cell_rows"]}
    assert out["metric"] == "mrr_at_3" and out["paired"] == len(gold) == 12
    rows = {r["subset"]: r for r in out["rows"]}
    for subset in ("FinQA", "TAT-DQA"):
        mine = [_mrr3(r["retrieved"], gold[(r["subset"], r["id"])]) for r in cell["rows"] if r["subset"] == subset]
        assert rows[subset]["n"] == 6
        assert rows[subset]["mean_a"] == pytest.approx(sum(mine) / len(mine))
        assert rows[subset]["mean_b"] == pytest.approx(cell["run"].data.metrics[f"{subset}/mrr_at_3"], abs=1e-4)
    assert {(q["subset"], q["id"]) for q in out["questions"]} == cell["changed"]


@pytest.mark.slow
def test_an_outside_file_against_a_cells_predictions_file(cell):
    proc = _compare(cell["mine"], cell["file"], "--show", "all", "--format", "json", "--n-boot", "200", cwd=cell["work"])
    assert proc.returncode == 0, proc.stderr
    _check_against_the_cell(json.loads(proc.stdout), cell)

    table = _compare(cell["mine"], cell["file"], "--show", "all", "--n-boot", "200", cwd=cell["work"])
    assert table.returncode == 0, table.stderr
    assert [line.split()[:2] for line in table.stdout.splitlines() if line.startswith(("FinQA", "TAT-DQA"))] == [
        ["FinQA", "6"],
        ["TAT-DQA", "6"],
    ]
    listed = {line.split()[3] for line in table.stdout.splitlines() if line.startswith(("A better", "B better"))}
    assert listed == {qid for _, qid in cell["changed"]}


@pytest.mark.slow
def test_the_metric_error_names_the_metrics_of_both_sides(cell):
    proc = _compare(cell["mine"], cell["file"], "--metric", "nm", cwd=cell["work"])
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    a_has, b_has = re.search(r"A has ([^;]+); B has ([^)]+)\)", line).groups()
    assert a_has.split(", ")[:2] == ["mrr_at_3", "nm"] and "recall_at_5" in a_has
    assert "nm" not in b_has.split(", ") and "mrr_at_3" in b_has.split(", ")


@pytest.mark.slow
def test_subset_restricts_the_table_and_the_questions(cell):
    proc = _compare(cell["mine"], cell["file"], "--subset", "FinQA", "--format", "json", "--n-boot", "200", cwd=cell["work"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [r["subset"] for r in out["rows"]] == ["FinQA", "overall"] and out["paired"] == 6
    assert {(q["subset"], q["id"]) for q in out["questions"]} == {c for c in cell["changed"] if c[0] == "FinQA"}
    both = _compare(cell["mine"], cell["file"], "--subset", "FinQA,TAT-DQA", "--format", "json", "--n-boot", "200", cwd=cell["work"])
    assert json.loads(both.stdout)["paired"] == 12


@pytest.mark.slow
def test_a_score_mlflow_run_compares_with_a_cell_run(cell):
    from t2exp.cli.score import main as score_main

    uri = f"sqlite:///{cell['work'] / 'mlflow.db'}"
    scored = cli(score_main, [cell["mine"], "--mlflow", "--tracking-uri", uri, "--bootstrap", "0"], prog="t2exp score")
    assert scored.returncode == 0, scored.stderr
    run_id = re.search(r"logged MLflow run (\w+)", scored.stderr).group(1)
    proc = _compare(run_id, cell["run"].info.run_id, "--tracking-uri", uri, "--format", "json", "--n-boot", "200", cwd=cell["work"])
    assert proc.returncode == 0, proc.stderr
    _check_against_the_cell(json.loads(proc.stdout), cell)


def _docs_example():
    """The Python block and the command lines of docs/compare.md's "Compare with your own system"."""
    text = (ROOT / "docs" / "compare.md").read_text(encoding="utf-8").split("## Compare with your own system", 1)[1].split("\n## ", 1)[0]
    python = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    bash = re.search(r"```bash\n(.*?)```", text, re.DOTALL).group(1)
    return python, [line.split("#", 1)[0].strip() for line in bash.splitlines() if line.split("#", 1)[0].strip()]


@pytest.mark.slow
def test_the_docs_example_runs_as_written(cell, tmp_path, monkeypatch):
    """The page's own example on the bundled data: its Python writes mine.jsonl, its cell is the
    fixture's run, and each t2exp line runs (in the cell's store) with the run ids it prints."""
    import shlex

    from t2exp.__main__ import main

    python, lines = _docs_example()
    monkeypatch.chdir(tmp_path)
    exec(compile(python, "docs/compare.md", "exec"), {})
    assert lines[0].split() == ["python", "-m", "t2exp", *CELL]  # the fixture's cell
    ids = {"<cell run id>": cell["run"].info.run_id}
    uri = f"sqlite:///{cell['work'] / 'mlflow.db'}"
    for line in lines[1:]:
        for placeholder, run_id in ids.items():
            line = line.replace(placeholder, run_id)
        argv = shlex.split(line)
        assert argv[0] == "t2exp" and "<" not in line, line
        proc = cli(main, [*argv[1:], "--tracking-uri", uri], cwd=tmp_path)
        assert proc.returncode == 0, f"{line}: {proc.stderr[-2000:]}"
        logged = re.search(r"logged MLflow run (\w+)", proc.stderr)
        if logged:
            ids["<score run id>"] = logged.group(1)
    assert "<score run id>" in ids and "paired 12 questions" in proc.stdout


def test_the_sweep_description_gives_each_subsets_difference_with_its_ci(tmp_path):
    from t2exp.evaluation.reporting.build import make_report
    from t2exp.evaluation.reporting.runs import RunInfo, Target
    from t2exp.evaluation.reporting.tables import CellSource

    def row(qid, subset, nm):
        return {"id": qid, "subset": subset, "context_id": "g", "retrieved": ["g"], "nm": nm, "question": f"q {qid}"}

    base, other = "a" * 32, "b" * 32
    preds = {
        base: [row(str(i), s, 1.0) for s in ("FinQA", "TAT-DQA") for i in range(4)],
        other: [row(str(i), "FinQA", 0.0 if i < 2 else 1.0) for i in range(4)] + [row(str(i), "TAT-DQA", 1.0) for i in range(4)],
    }
    runs = [RunInfo(rid, name, {"rag_method.name": name}, {}, {"rag_method": name}) for rid, name in ((base, "base"), (other, "other"))]
    runs[0].metrics = {"FinQA/nm": 100.0, "TAT-DQA/nm": 100.0, "avg/nm": 100.0}
    runs[1].metrics = {"FinQA/nm": 50.0, "TAT-DQA/nm": 100.0, "avg/nm": 75.0}
    result = make_report(Target("test", "7", "c" * 32, runs), tmp_path, CellSource(preds.get), n_boot=50)
    first = result.description.splitlines()[0]
    assert first.startswith("**other** vs best **base**: NM FinQA 50.0 vs 100.0, TAT-DQA 100.0 vs 100.0; Δ Avg -25.0 [")
    assert re.search(r"; Δ FinQA -50\.0 \[[-+]?\d+\.\d, [-+]?\d+\.\d\], Δ TAT-DQA \+0\.0 \[\+?0\.0, \+?0\.0\] · ", first), first

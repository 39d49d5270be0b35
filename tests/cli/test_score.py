"""`t2exp score` and `t2exp.evaluation.score(...)`: hand-made predictions with known scores."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from helpers.command import cli
from helpers.paths import ROOT
from t2exp.cli.score import main as cli_main
from t2exp.config.schema import Config, dataset_args
from t2exp.data.loader import load_subsets
from t2exp.data.records import Question
from t2exp.evaluation.scoring.compute import score

BUNDLE = ROOT / "data" / "t2ragbench"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
ENV.pop("T2EXP_PARENT_RUN_ID", None)
# what dataset=bundled means for a run (conf/dataset/bundled.yaml, conf/config.yaml)
LIMIT = int(OmegaConf.load(ROOT / "conf" / "dataset" / "bundled.yaml").limit)
SEED = Config.seed  # the run-level default (the schema owns it)


@pytest.fixture(scope="module")
def finqa() -> list[Question]:
    (sub,) = load_subsets(**dataset_args(subsets=["FinQA"], path=BUNDLE, source="local"))
    return sub.questions


@pytest.fixture(scope="module")
def gold(finqa) -> list[Question]:
    qs = finqa[:6]
    assert all(q.gold not in (None, 0.0) for q in qs)
    return qs


@pytest.fixture(scope="module")
def bundled_sample() -> list[Question]:
    """The questions a default run (dataset=bundled: its limit, seed) scores."""
    assert LIMIT >= 6
    subs = load_subsets(**dataset_args(subsets=["FinQA", "TAT-DQA"], path=BUNDLE, source="local", limit=LIMIT, seed=SEED))
    return [q for s in subs for q in s.questions]


def hand_made(gold: list[Question]) -> list[dict]:
    q = gold
    return [
        {"id": q[0].id, "prediction": q[0].gold},  # exact → right
        {"id": q[1].id, "prediction": q[1].gold * 100},  # off by a power of ten → right
        {"id": q[2].id, "prediction": f"The change was -{q[2].gold:.4f} percent"},  # negated text → right (|a|)
        {"id": q[3].id, "prediction": "N/A"},  # unparsable → wrong
        {"id": q[4].id, "prediction": ""},  # unparsable → wrong
        # q[5]: missing → wrong in the headline
        {"id": "finqa_dev_999999", "prediction": 1.0},  # unknown id
        {"id": q[0].id, "prediction": 0.0},  # duplicate: the first row is kept
    ]


# ranks of the gold context per question (None: not retrieved; "null": retrieved is null)
RANKS = [1, 2, 5, 3, "null"]


def with_retrieved(gold: list[Question]) -> list[dict]:
    rows = hand_made(gold)
    for row, q, rank in zip(rows, gold, RANKS, strict=False):
        ranked = [f"other_{i}" for i in range(5)]
        if rank == "null":
            row["retrieved"] = None
            continue
        ranked[rank - 1] = q.context_id
        row["retrieved"] = ranked
    rows[5]["retrieved"] = [gold[0].context_id]
    rows[6]["retrieved"] = [gold[0].context_id]
    return rows


def test_hand_made_predictions_exact_numbers_and_counts(gold):
    r = score(hand_made(gold), gold=gold)
    c = r.counts
    assert (c.rows, c.gold, c.scored, c.missing, c.unknown_ids, c.duplicate_ids, c.unparsable) == (7, 6, 5, 1, 1, 1, 2)
    assert c.rows == c.scored + c.unknown_ids + c.duplicate_ids
    assert r.metrics["FinQA/nm"] == pytest.approx(50.0)  # 3 right of 6 gold questions: the headline
    assert r.metrics["avg/nm"] == pytest.approx(50.0)
    assert r.metrics["FinQA/nm_submitted"] == pytest.approx(60.0)  # 3 right of 5 scored
    assert r.metrics["FinQA/coverage"] == pytest.approx(500 / 6)
    for name in ("scored", "missing", "unknown_ids", "duplicate_ids", "unparsable"):
        assert r.metrics[name] == float(getattr(c, name))
    assert r.table["FinQA"]["nm"].n == 6 and r.table["FinQA"]["nm_submitted"].n == 5
    lo, hi = r.table["avg"]["nm"].ci_low, r.table["avg"]["nm"].ci_high
    assert lo < 50.0 < hi
    assert r.retrieval == "none" and not any("mrr" in k or "recall" in k for k in r.metrics)
    text = str(r)
    assert "NM (submitted)" in text and "missing 1" in text and "unknown ids 1" in text
    assert "duplicate ids 1" in text and "unparsable 2" in text and "'finqa_dev_999999'" in text


def test_ranked_retrieval_exact_mrr_and_recall(gold):
    rows = with_retrieved(gold)
    r = score(rows, gold=gold, k=3)
    # ranks 1, 2, 5, 3, null(→miss), missing(→miss); out of 6 gold questions
    assert r.retrieval == "ranked"
    assert r.metrics["FinQA/mrr_at_3"] == pytest.approx(100 * (1 + 1 / 2 + 0 + 1 / 3) / 6)
    assert r.metrics["FinQA/recall_at_1"] == pytest.approx(100 / 6)
    assert r.metrics["FinQA/recall_at_3"] == pytest.approx(300 / 6)
    assert r.metrics["FinQA/recall_at_5"] == pytest.approx(400 / 6)
    assert r.metrics["FinQA/nm"] == pytest.approx(50.0)
    assert any("empty `retrieved`" in n for n in r.notes)
    r5 = score(rows, gold=gold, k=5)
    assert r5.metrics["avg/mrr_at_5"] == pytest.approx(100 * (1 + 1 / 2 + 1 / 5 + 1 / 3) / 6)
    assert "mrr_at_3" not in str(r5.metrics) and "MRR@5" in str(r5)


def test_missing_questions_are_named_as_misses_in_every_metric_they_lower(gold):
    """A partial file: the note says a missing question lowers MRR and R@k too, not NM alone."""
    rows = with_retrieved(gold)[:3]  # three of the six gold questions
    (note,) = [n for n in score(rows, gold=gold, k=3).notes if "have no prediction" in n]
    assert note == "3 gold questions have no prediction: wrong in NM (headline), absent from NM (submitted); a miss in MRR@3 and R@1/3/5"
    retrieval_only = [{"id": r["id"], "prediction": None, "retrieved": r["retrieved"]} for r in rows]
    (note,) = [n for n in score(retrieval_only, gold=gold, k=3).notes if "have no prediction" in n]
    assert note == "3 gold questions have no prediction: a miss in MRR@3 and R@1/3/5"


def test_single_context_id_gives_rank1_only_and_says_so(gold):
    rows = hand_made(gold)
    rows[0]["context_id"] = gold[0].context_id  # right
    rows[1]["context_id"] = gold[1].context_id  # right
    rows[2]["context_id"] = gold[3].context_id  # wrong
    r = score(rows, gold=gold, k=3)
    assert r.retrieval == "rank1"
    assert r.metrics["FinQA/mrr_at_3"] == pytest.approx(200 / 6)
    assert r.metrics["FinQA/recall_at_1"] == r.metrics["FinQA/mrr_at_3"]
    assert "FinQA/recall_at_3" not in r.metrics and "FinQA/recall_at_5" not in r.metrics
    text = str(r)
    assert "rank-1 metrics only" in text and "MRR@3 = R@1" in text
    assert text.splitlines()[1].split()[-2:] == ["MRR@3", "R@1"]  # no R@3 / R@5 columns


def test_input_forms_agree(gold, tmp_path):
    rows = with_retrieved(gold)
    base = score(rows, gold=gold, n_boot=200).metrics

    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv = tmp_path / "p.csv"
    pd.DataFrame([{**r, "retrieved": json.dumps(r["retrieved"]) if r["retrieved"] else ""} for r in rows]).to_csv(csv, index=False)
    parquet = tmp_path / "p.parquet"
    str_rows = [{**r, "prediction": str(r["prediction"])} for r in rows]
    pd.DataFrame(str_rows).to_parquet(parquet)

    for source in (jsonl, str(csv), parquet, pd.DataFrame(rows)):
        got = score(source, gold=gold, n_boot=200).metrics
        assert got == pytest.approx(base), source

    # the dict form carries predictions only
    as_dict = {r["id"]: r["prediction"] for r in reversed(rows)}  # last wins in a dict literal
    d = score(as_dict, gold=gold).counts
    assert (d.scored, d.unknown_ids, d.duplicate_ids) == (5, 1, 0)


def test_retrieval_only_and_run_without_retrieval(gold):
    rows = [{"id": q.id, "prediction": None, "retrieved": [q.context_id]} for q in gold]
    r = score(rows, gold=gold)
    assert "FinQA/nm" not in r.metrics and r.metrics["FinQA/mrr_at_3"] == 100.0
    assert any("retrieval-only" in n for n in r.notes)
    # a run without retrieval: `retrieved` is null and `context_id` is the gold context → no retrieval metrics
    rows = [{"id": q.id, "context_id": q.context_id, "prediction": q.gold, "retrieved": None} for q in gold]
    r = score(rows, gold=gold)
    assert r.retrieval == "none" and r.metrics["FinQA/nm"] == 100.0
    assert not any("mrr" in k for k in r.metrics)


class _Method:
    """Retrieval with known ranks: the gold context at rank ``i % 7 + 1`` (6, 7 = not retrieved)."""

    name = "known-ranks"
    needs_index = False

    def prepare(self, subset, services):
        return None

    def stats(self) -> dict[str, float]:
        return {}

    def retrieve(self, questions, index, k):
        out = []
        for q in questions:
            i = int(re.sub(r"\D", "", q.id) or 0)
            hits = [(f"decoy_{j}", 1.0 - j / 10) for j in range(k)]
            if i % 7 < k:
                hits[i % 7] = (q.context_id, hits[i % 7][1])
            out.append(hits)
        return out

    def contexts(self, question, hits, index, k):
        return []


class _Generator:
    """Answers by question text: right, right ×10, wrong, or no number."""

    name = "fake"
    batch_size = 4
    gpus = 0
    fingerprint = "fake-generator-v1"

    def __init__(self, questions: list[Question]) -> None:
        self.by_text = {q.question: (i, q.gold) for i, q in enumerate(questions)}

    def generate(self, prompts, sampling, on_result=None, should_stop=None):
        from t2exp.generators import Generation

        out = []
        for p in prompts:
            text = p[-1]["content"]
            i, g = next(v for t, v in self.by_text.items() if f"Question: {t}" in text)
            reply = [
                f"Final answer: {g}",
                f"Final answer: {g * 10}",  # nm (power-of-ten shift), not nm_strict
                f"Final answer: {g * 1.5 + 1}",
                "I cannot tell.",
                f"Final answer: ${g}",  # nm and nm_strict; not nm_bare: float("$...") fails
                "Final answer: 0.0000000000000000000000",  # degenerate
            ][i % 6]
            out.append(Generation(text=reply))
        return out


def test_rescoring_a_run_reproduces_its_metrics(bundled_sample, tmp_path):
    from t2exp.answering.prompts import PromptLibrary
    from t2exp.generators import Sampling
    from t2exp.generators.cached import CachedGenerator
    from t2exp.infra.cache import KVCache
    from t2exp.methods import Services
    from t2exp.pipeline.steps import Components, Parts, Settings, run_steps

    # the app loads dataset=bundled like this (app.build_components)
    subsets = load_subsets(**dataset_args(subsets=["FinQA", "TAT-DQA"], path=BUNDLE, source="local", limit=LIMIT, seed=SEED))
    generator = CachedGenerator(_Generator(bundled_sample), KVCache(tmp_path / "cache" / "llm.sqlite"))
    services = Services(None, None, generator, PromptLibrary(ROOT / "prompts"), variant="plain", lock_dir=tmp_path / "cache" / "locks", k=3)
    comps = Components(
        Parts(subsets=subsets, method=_Method(), services=services),
        Settings(sampling=Sampling(), answer_mode="direct", k=3, run_dir=tmp_path / "run"),
    )
    result = run_steps(comps)
    pattern = r"^(FinQA|TAT-DQA|avg)/(nm|nm_bare|nm_strict|mrr_at_3|recall_at_\d)(_ci_low|_ci_high)?$"
    wanted = {k: v for k, v in result.metrics.items() if re.match(pattern, k)}
    assert len(wanted) == 3 * 7 * 3
    assert 0 < wanted["avg/nm"] < 100 and 0 < wanted["avg/mrr_at_3"] < 100
    # the three NM readings differ on these replies, over the same questions
    assert wanted["avg/nm_strict"] < wanted["avg/nm"] and wanted["avg/nm_bare"] < wanted["avg/nm"]
    for s in ("FinQA", "TAT-DQA"):
        assert result.table[s]["nm_bare"]["n"] == result.table[s]["nm_strict"]["n"] == result.table[s]["nm"]["n"]
    counts = {k: v for k, v in result.metrics.items() if k.endswith("degenerate_predictions")}
    assert set(counts) == {"FinQA/degenerate_predictions", "TAT-DQA/degenerate_predictions", "degenerate_predictions"}
    assert counts["degenerate_predictions"] == counts["FinQA/degenerate_predictions"] + counts["TAT-DQA/degenerate_predictions"] > 0

    import t2exp.pipeline.steps as steps

    assert not hasattr(steps, "aggregate")  # one scorer: a run aggregates through score_cell, as t2exp.score does
    rescored = score(result.predictions_path, dataset="bundled")
    assert rescored.counts.scored == 2 * LIMIT and rescored.counts.missing == rescored.counts.unknown_ids == 0
    assert {k: rescored.metrics[k] for k in wanted} == wanted  # exactly, CIs included
    assert rescored.metrics["avg/nm_submitted"] == wanted["avg/nm"]
    assert {k: rescored.metrics[k] for k in counts} == counts
    assert rescored.counts.degenerate_predictions == counts["degenerate_predictions"]
    rows = [json.loads(line) for line in result.predictions_path.read_text().splitlines()]
    assert all({"answer_text", "nm", "nm_bare", "nm_strict", "degenerate"} <= r.keys() for r in rows)

    # known answers: _Method puts the gold at rank i % 7 + 1 (i: the id's digits), retrieving 5
    for subset in ("FinQA", "TAT-DQA"):
        ranks = [int(re.sub(r"\D", "", q.id) or 0) % 7 + 1 for q in bundled_sample if q.subset == subset]
        assert result.metrics[f"{subset}/mrr_at_3"] == pytest.approx(100 * sum(1 / r for r in ranks if r <= 3) / len(ranks))
        assert result.metrics[f"{subset}/recall_at_5"] == pytest.approx(100 * sum(r <= 5 for r in ranks) / len(ranks))

    # the leaderboard file (top-1 context only): same NM, rank-1 retrieval = the run's R@1
    board = score(comps.settings.run_dir / "leaderboard.jsonl", dataset="bundled")
    assert board.retrieval == "rank1"
    for s in ("FinQA", "TAT-DQA", "avg"):
        assert board.metrics[f"{s}/nm"] == wanted[f"{s}/nm"]
        assert board.metrics[f"{s}/mrr_at_3"] == result.metrics[f"{s}/recall_at_1"]


def test_outside_the_limit_sample_is_counted_apart(bundled_sample, finqa):
    outside = next(q for q in finqa if q.id not in {b.id for b in bundled_sample})
    rows = [{"id": q.id, "prediction": q.gold} for q in bundled_sample] + [{"id": outside.id, "prediction": 1}]
    r = score(rows, dataset="bundled", n_boot=0)
    assert (r.counts.scored, r.counts.unknown_ids, r.counts.outside_sample) == (2 * LIMIT, 1, 1)
    assert r.metrics["avg/nm"] == 100.0 and "avg/nm_ci_low" not in r.metrics
    assert any(f"outside its limit={LIMIT} sample" in n for n in r.notes)
    full = score(rows, dataset="bundled", limit=None, n_boot=0)
    assert full.counts.gold == 883 + 1142 and full.counts.scored == 2 * LIMIT + 1 and full.counts.unknown_ids == 0


def test_the_evaluation_verbs_are_functions_imported_when_first_used(gold):
    code = (
        "import sys, t2exp.evaluation as e; print('t2exp.evaluation.scoring.compute' in sys.modules, 'pandas' in sys.modules); "
        "print(*(callable(getattr(e, v)) and not isinstance(getattr(e, v), type(sys)) for v in e.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=True).stdout
    assert out.split() == ["False", "False", "True", "True", "True"]
    import t2exp.cli.score  # noqa: F401  (the command's module: the verb stays a function)
    from t2exp import evaluation

    assert evaluation.score(hand_made(gold), gold=gold).counts.scored == 5
    assert evaluation.score({gold[0].id: gold[0].gold}, gold=gold).metrics["FinQA/nm_submitted"] == 100.0


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    from t2exp.cli.score import main

    return cli(main, args, env=ENV, replace_env=True, cwd=cwd, prog="t2exp score")


def test_cli_prints_the_table(bundled_sample, tmp_path):
    rows = with_retrieved(bundled_sample[:6])
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = _cli([str(path), "--dataset", "bundled"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[1].split()
    assert header[:4] == ["subset", "gold", "scored", "coverage"]
    for label in ("NM", "MRR@3", "R@1", "R@3", "R@5"):
        assert label in lines[1]
    finqa = next(ln for ln in lines if ln.startswith("FinQA "))
    # gold, scored, coverage, NM: 3 right of the LIMIT FinQA questions, none of TAT-DQA
    # one decimal, as every t2exp table (evaluation.tabular)
    assert finqa.split()[1:5] == [str(LIMIT), "5", f"{500 / LIMIT:.1f}", f"{300 / LIMIT:.1f}"]
    assert next(ln for ln in lines if ln.startswith("TAT-DQA ")).split()[1:5] == [str(LIMIT), "0", "0.0", "0.0"]
    assert any(ln.startswith(f"rows 7: scored 5 of {2 * LIMIT} gold questions") for ln in lines)
    assert f"missing {2 * LIMIT - 5}" in proc.stdout and "duplicate ids 1" in proc.stdout


def test_cli_mlflow_logs_one_run(bundled_sample, tmp_path):
    rows = [{"id": q.id, "prediction": q.gold, "retrieved": [q.context_id]} for q in bundled_sample[: LIMIT + 2]]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "ml" / "mlflow.db"
    uri = f"sqlite:///{db}"
    proc = _cli([str(path), "--mlflow", "--tracking-uri", uri, "--experiment", "scores", "--k", "5"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "logged MLflow run" in proc.stderr

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("scores").experiment_id])
    m = run.data.metrics
    # logged rounded to 4 decimals for display
    assert m["FinQA/nm"] == 100.0 and m["TAT-DQA/nm"] == pytest.approx(200 / LIMIT, abs=1e-4)
    assert m["avg/nm"] == pytest.approx(100 * (LIMIT + 2) / (2 * LIMIT), abs=1e-4)
    assert m["avg/mrr_at_5"] == m["avg/nm"] and "avg/recall_at_5" in m and "avg/nm_ci_low" in m
    assert (m["scored"], m["missing"], m["unknown_ids"], m["duplicate_ids"], m["unparsable"]) == (LIMIT + 2, LIMIT - 2, 0, 0, 0)
    assert run.data.params["k"] == "5" and run.data.params["dataset"] == "bundled"
    assert run.info.status == "FINISHED"
    assert (tmp_path / "ml" / "artifacts").is_dir() and not (tmp_path / "mlruns").exists()


def test_cli_missing_id_column_is_one_line_exit_2(tmp_path):
    path = tmp_path / "preds.csv"
    path.write_text("qid,prediction\nfinqa_dev_0,1\n")
    proc = _cli([str(path)], tmp_path)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("t2exp score: error:") and "'id'" in err[0] and str(path) in err[0]
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "name, content, args, expect",
    [
        ("nope.jsonl", None, [], "no such file"),
        ("p.txt", "id,prediction\n", [], "unknown format"),
        ("p.jsonl", '{"id": "a", "prediction": 1}\nnot json\n', [], "line 2: not valid JSON"),
        ("p.jsonl", '{"id": "a"}\n', [], "'prediction'"),
        ("p.jsonl", '{"id": "a", "prediction": 1}\n\n{"prediction": 2}\n', [], "p.jsonl: line 3: no 'id'"),  # not scored as id ''
        ("p.csv", 'id,prediction,retrieved\nfinqa_dev_0,1,"a, b"\n', [], "not a JSON list"),
        ("p.jsonl", '{"id": "a", "prediction": 1}\n', ["--dataset", "nosuch"], "choose one of"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, name, content, args, expect):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    assert cli_main([str(path), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0], err


def test_cli_json_and_csv_formats(gold, bundled_sample, tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"id": q.id, "prediction": str(q.gold)}) + "\n" for q in bundled_sample))
    assert cli_main([str(path), "--format", "json", "--bootstrap", "50", "--seed", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["metrics"]["avg/nm"] == 100.0 and data["counts"]["scored"] == 2 * LIMIT and data["bootstrap"] == 50
    assert cli_main([str(path), "--format", "csv", "--bootstrap", "0"]) == 0
    frame = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out), index_col="subset")
    assert list(frame.index) == ["FinQA", "TAT-DQA", "avg"] and frame.loc["avg", "nm"] == 100.0
    assert math.isnan(frame.loc["avg", "nm_ci_low"])


def test_markdown_and_frame(gold):
    r = score(with_retrieved(gold), gold=gold)
    md = r._repr_markdown_()
    assert md.startswith("| subset | gold | scored | coverage | NM | NM (submitted) | NM-bare | NM-strict | MRR@3 |")
    f = r.to_frame()
    assert f.loc["FinQA", "nm"] == pytest.approx(50.0) and f.loc["FinQA", "scored"] == 5
    assert f.loc["avg", "recall_at_5"] == pytest.approx(400 / 6)


def test_rescoring_a_corpus_size_run_loads_its_questions(tmp_path):
    # a run with dataset.corpus_size=N scores the questions of its N-document subsample; t2exp.score
    # must load the same ones (without corpus_size/corpus_seed every id would be unknown, NM 0)
    subsets = load_subsets(
        **dataset_args(subsets=["FinQA", "TAT-DQA"], path=BUNDLE, source="local", limit=LIMIT, seed=SEED, corpus_size=30, corpus_seed=1)
    )
    asked = [q for s in subsets for q in s.questions]
    assert len(asked) == 2 * LIMIT
    rows = [{"id": q.id, "subset": q.subset, "prediction": q.gold, "retrieved": [q.context_id]} for q in asked]
    r = score(rows, dataset="bundled", overrides=["dataset.corpus_size=30", "dataset.corpus_seed=1"], n_boot=0)
    assert (r.counts.scored, r.counts.unknown_ids, r.counts.missing) == (2 * LIMIT, 0, 0)
    assert r.metrics["avg/mrr_at_3"] == 100.0
    assert r.metrics["avg/nm"] == 100.0
    assert r.params["dataset.corpus_size"] == "30"


def test_nm_variants_and_degenerate_on_submitted_strings(gold):
    g = [q.gold for q in gold]
    preds = [
        {"id": gold[0].id, "prediction": str(g[0])},  # all three
        {"id": gold[1].id, "prediction": f"${g[1]}"},  # nm, nm_strict; float("$…") fails: not nm_bare
        {"id": gold[2].id, "prediction": str(g[2] * 10)},  # nm, nm_bare (scale); not nm_strict
        {"id": gold[3].id, "prediction": "inf"},  # degenerate, wrong in all three
        {"id": gold[4].id, "prediction": math.nan},  # a JSON NaN: no number, degenerate, wrong
        {"id": gold[5].id, "prediction": "0.000000000000000001"},  # degenerate
    ]
    r = score(preds, gold=gold, n_boot=0)
    m = r.metrics
    assert (m["FinQA/nm"], m["FinQA/nm_bare"], m["FinQA/nm_strict"]) == pytest.approx((50.0, 100 / 3, 100 / 3))
    assert r.table["FinQA"]["nm_bare"].n == r.table["FinQA"]["nm_strict"].n == r.table["FinQA"]["nm"].n == 6
    assert m["FinQA/degenerate_predictions"] == 3.0 and m["degenerate_predictions"] == 3.0
    assert r.counts.degenerate_predictions == 3 and "degenerate 3" in str(r)
    assert "NM-bare" in str(r) and "NM-strict" in str(r)


def test_nm_variants_skip_non_numeric_golds_like_nm():
    (sub,) = load_subsets(**dataset_args(subsets=["TAT-DQA"], path=BUNDLE, source="local"))
    tat = sub.questions
    dates = [q for q in tat if q.gold is None]
    assert len(dates) == 8  # the bundle's "YYYY-MM-DD" golds
    r = score([{"id": q.id, "subset": q.subset, "prediction": "2016"} for q in tat], gold=tat, n_boot=0)
    n = len(tat) - len(dates)
    assert {name: r.table["TAT-DQA"][name].n for name in ("nm", "nm_bare", "nm_strict")} == {"nm": n, "nm_bare": n, "nm_strict": n}
    assert r.counts.non_numeric_gold == len(dates)


def test_nan_inf_and_booleans_are_unparsable_predictions_never_retrieval_only(gold):
    """An all-NaN file counts as unparsable predictions (NM computed as 0), not as a retrieval-only
    submission, and booleans and inf are unparsable, not scored as numbers."""
    from t2exp.evaluation import score

    ids = [q.id for q in gold[:3]]
    all_nan = score([{"id": i, "prediction": float("nan")} for i in ids], gold=gold[:3], n_boot=0)
    assert all_nan.counts.unparsable == 3 and all_nan.metrics["avg/nm"] == 0.0
    odd = score(
        [{"id": ids[0], "prediction": True}, {"id": ids[1], "prediction": float("inf")}, {"id": ids[2], "prediction": False}],
        gold=gold[:3],
        n_boot=0,
    )
    assert odd.counts.unparsable == 3 and odd.metrics["avg/nm"] == 0.0


def test_a_ranking_shorter_than_a_recall_cut_leaves_that_recall_undefined(gold):
    """A run's ``ranked_depth`` (a method that ranked fewer documents than R@5 reads): R@5 is not
    a miss there, so its question is left out of R@5, not counted wrong."""
    rows = [
        {
            "id": q.id,
            "prediction": q.gold,
            "retrieved": ["x1", "x2", q.context_id] if i == 0 else ["x1", "x2", "x3"],
            **({"ranked_depth": 3} if i < 2 else {}),
        }
        for i, q in enumerate(gold[:4])
    ]
    r = score(rows, gold=gold[:4], n_boot=0)
    assert r.table["FinQA"]["recall_at_3"].n == 4 and r.table["FinQA"]["recall_at_3"].mean == 25.0
    assert r.table["FinQA"]["recall_at_5"].n == 2  # the two rows ranked to depth 3 are not scored at R@5


def test_one_renderer_writes_a_value_the_same_everywhere(gold):
    """t2exp score's table, a run's closing summary, a comparison and the report cell write one
    metric value alike (t2exp score showed two decimals, the others one): evaluation.tabular."""
    from t2exp.evaluation import tabular
    from t2exp.evaluation.comparisons import format_table
    from t2exp.evaluation.reporting.render import _fmt_cell
    from t2exp.evaluation.reporting.tables import Entry
    from t2exp.evaluation.stats import paired_bootstrap
    from t2exp.tracking.summary import results_markdown, results_table

    r = score(hand_made(gold), gold=gold)
    mv = r.table["FinQA"]["nm_submitted"]  # 60.0 of 5, with its CI
    shown = tabular.value(mv.mean, mv.ci_low, mv.ci_high)
    assert shown == f"60.0 [{mv.ci_low:.1f}, {mv.ci_high:.1f}]"
    assert shown in str(r) and shown in r._repr_markdown_()
    as_logged = {"FinQA": {"nm": {"mean": mv.mean, "ci_low": mv.ci_low, "ci_high": mv.ci_high, "n": 5}}}
    assert shown in results_table(as_logged, 3) and shown in results_markdown(as_logged, 3)
    assert _fmt_cell(Entry(mv.mean, mv.ci_low, mv.ci_high)) == shown
    b = paired_bootstrap([1, 0, 1, 1, 0], [0, 0, 1, 0, 0])
    from t2exp.evaluation.paired import ComparisonRow

    row = ComparisonRow("FinQA", 5, 100 * b.mean_a, 100 * b.mean_b, 100 * b.diff, 100 * b.ci_low, 100 * b.ci_high, 0.25, False)
    assert f"{tabular.value(60.0)}" in format_table([row], "nm") and "+40.0 [" in format_table([row], "nm")


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_a_file_with_a_utf8_byte_order_mark_is_read(gold, tmp_path, suffix):
    """What Windows editors write: the mark is skipped, the file scores as without it."""
    rows = [{"id": q.id, "prediction": q.gold} for q in gold]
    text = {
        ".jsonl": "".join(json.dumps(r) + "\n" for r in rows),
        ".json": json.dumps(rows),
        ".csv": "id,prediction\n" + "".join(f"{r['id']},{r['prediction']}\n" for r in rows),
    }[suffix]
    path = tmp_path / f"p{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    result = score(path, gold=gold, n_boot=0)
    assert result.counts.scored == len(gold) and result.metrics["avg/nm"] == 100.0


def test_a_line_that_is_not_utf8_is_one_line_naming_file_and_line(gold, tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_bytes(
        json.dumps({"id": gold[0].id, "prediction": 1}).encode()
        + b"\n"
        + b'{"id": "'
        + gold[1].id.encode()
        + b'", "prediction": "caf\xe9"}\n'
    )
    assert cli_main([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}: line 2: not UTF-8 text" in err[0], err

"""Paired statistics (hand-made vectors with known answers) and ``t2exp compare`` on hand-made
predictions files and on the cells of one real retrieval sweep, shared by the tests that read runs."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from helpers.app import run_app
from helpers.command import cli
from helpers.net import free_port
from helpers.tracking import mlflow_runs
from t2exp.evaluation.metrics import question_value
from t2exp.evaluation.paired import compare, pair_predictions
from t2exp.evaluation.stats import paired_bootstrap, permutation_test

# --- stats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [5, 200])  # exact enumeration and Monte Carlo
def test_identical_runs_have_zero_difference_and_p_one(n):
    a = [float(i % 2) for i in range(n)]
    boot = paired_bootstrap(a, a, n_boot=2000, seed=0)
    assert (boot.diff, boot.ci_low, boot.ci_high, boot.n) == (0.0, 0.0, 0.0, n)
    perm = permutation_test(a, a, n_perm=2000, seed=0)
    assert perm.p_value == 1.0 and perm.diff == 0.0
    assert perm.exact is (n == 5)


def test_winning_every_question_is_significant():
    a, b = [1.0] * 50, [0.0] * 50
    boot = paired_bootstrap(a, b, n_boot=5000, seed=1)
    assert (boot.mean_a, boot.mean_b, boot.diff, boot.ci_low, boot.ci_high) == (1.0, 0.0, 1.0, 1.0, 1.0)
    perm = permutation_test(a, b, n_perm=5000, seed=1)
    assert not perm.exact
    assert perm.p_value < 0.01
    assert perm.p_value == pytest.approx(1 / 5001)  # only the observed signs (and their mirror) reach |sum| = 50
    # the reverse comparison: same p (two-sided), negative difference
    rev = permutation_test(b, a, n_perm=5000, seed=1)
    assert rev.p_value == perm.p_value and rev.diff == -1.0


def test_exact_p_values_by_hand():
    # d = [1, 1, 1]: of 8 sign patterns only +++ and --- reach |sum| = 3
    r = permutation_test([1, 1, 1], [0, 0, 0], n_perm=10000)
    assert r.exact and r.n_perm == 8 and r.p_value == pytest.approx(2 / 8)
    # d = [1, 1, 1, 1, 0]: the zero's sign is free: 2 (all same) x 2 of 32 patterns
    r = permutation_test([1, 1, 1, 1, 0], [0, 0, 0, 0, 0], n_perm=10000)
    assert r.p_value == pytest.approx(4 / 32)
    # d = [1, -1]: observed sum 0, every pattern is at least as extreme
    assert permutation_test([1, 0], [0, 1], n_perm=10000).p_value == 1.0
    # reciprocal ranks (1/2 + 1/3 - 1/6 = 2/3): |sum| >= 2/3 for +++ --- ++- --+ (4 of 8)
    r = permutation_test([0.5, 1 / 3, 0.0], [0.0, 0.0, 1 / 6], n_perm=10000)
    assert r.p_value == pytest.approx(4 / 8)


def test_monte_carlo_p_is_close_to_the_exact_one():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, 14).astype(float)
    b = rng.integers(0, 2, 14).astype(float)
    exact = permutation_test(a, b, n_perm=2**14)
    approx = permutation_test(a, b, n_perm=5000, seed=0)
    assert exact.exact and not approx.exact
    assert approx.p_value == pytest.approx(exact.p_value, abs=0.03)


def test_bootstrap_ci_matches_the_normal_approximation():
    a = [1.0] * 50 + [0.0] * 50
    b = [0.0] * 100
    r = paired_bootstrap(a, b, n_boot=10000, seed=0)
    assert r.diff == 0.5
    half = 1.96 * (0.25 / 100) ** 0.5  # ≈ 0.098
    assert r.ci_low == pytest.approx(0.5 - half, abs=0.02)
    assert r.ci_high == pytest.approx(0.5 + half, abs=0.02)


def test_deterministic_by_seed():
    rng = np.random.default_rng(7)
    a, b = rng.random(300), rng.random(300)
    assert paired_bootstrap(a, b, n_boot=3000, seed=5) == paired_bootstrap(a, b, n_boot=3000, seed=5)
    assert permutation_test(a, b, n_perm=3000, seed=5) == permutation_test(a, b, n_perm=3000, seed=5)
    assert paired_bootstrap(a, b, n_boot=3000, seed=5) != paired_bootstrap(a, b, n_boot=3000, seed=6)


def test_bad_input():
    with pytest.raises(ValueError):
        paired_bootstrap([1.0, 0.0], [1.0])
    with pytest.raises(ValueError):
        permutation_test([1.0, float("nan")], [1.0, 0.0])
    empty = paired_bootstrap([], [])
    assert empty.n == 0 and empty.diff != empty.diff


# --- pairing ------------------------------------------------------------------------------------


def _row(qid, subset="FinQA", nm=None, retrieved=None, gold="c1", **extra):
    return {"id": qid, "subset": subset, "context_id": gold, "nm": nm, "retrieved": retrieved, **extra}


def test_question_value_reads_or_recomputes_rank_metrics():
    r = _row("q", retrieved=["c9", "c8", "c1", "c7", "c6"], mrr_at_3=1 / 3)
    assert question_value(r, "mrr_at_3") == pytest.approx(1 / 3)
    assert question_value(r, "mrr_at_5") == pytest.approx(1 / 3)  # not logged: from the ranking
    assert question_value(r, "recall_at_1") == 0.0
    assert question_value(r, "mrr_at_2") == 0.0
    assert question_value(_row("q", retrieved=["c9"] * 5), "recall_at_10") is None  # gold may be below depth 5
    assert question_value(_row("q", retrieved=None), "mrr_at_3") is None  # pretrained_only
    assert question_value(_row("q", nm=None), "nm") is None  # generator=none


def test_pairing_counts_dropped_questions():
    a = [_row("1", nm=1.0), _row("2", nm=0.0), _row("3", nm=1.0), _row("9", subset="TAT-DQA", nm=1.0)]
    b = [_row("2", nm=1.0), _row("3", nm=None), _row("4", nm=0.0), _row("9", subset="TAT-DQA", nm=0.0)]
    p = pair_predictions(a, b, "nm")
    assert (p.only_a, p.only_b, p.missing_value, p.n) == (1, 1, 1, 2)
    assert p.values == {"FinQA": ([0.0], [1.0]), "TAT-DQA": ([1.0], [0.0])}
    rows = compare(p, n_boot=500)
    assert [r.subset for r in rows] == ["FinQA", "TAT-DQA", "overall"]
    assert rows[-1].n == 2 and rows[-1].diff == 0.0 and rows[0].diff == -100.0


# --- CLI on real runs ------------------------------------------------------------------------------


def _compare_cli(*args: str) -> subprocess.CompletedProcess:
    from t2exp.cli.compare import main

    return cli(main, list(args), prog="t2exp compare")


@pytest.fixture(scope="module")
def sweep(shared_cache, tmp_path_factory):
    """One real retrieval sweep of three cells over 10 questions per subset (its MLflow store, read
    only by the tests): the parent run id, the cells by method, the store's uri and its client."""
    track = tmp_path_factory.mktemp("compare_sweep")
    run_app(["-m", "rag_method=base,hybrid,bm25f", "generator=none", "dataset.limit=10"], shared_cache, track)
    client, parent, cells = _cells(track)
    return SimpleNamespace(parent=parent, cells=cells, uri=f"sqlite:///{track / 'mlflow.db'}", client=client)


def test_compare_cli_on_two_real_runs(sweep, tmp_path):
    base, hybrid, uri = sweep.cells["base"], sweep.cells["hybrid"], sweep.uri

    # base vs hybrid on the same 20 questions (auto metric: retrieval-only runs have no NM → MRR@3)
    proc = _compare_cli(hybrid.info.run_id, base.info.run_id, "--tracking-uri", uri, "--n-boot", "2000", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["metric"] == "mrr_at_3" and out["paired"] == 20
    assert out["dropped"] == {"only_in_a": 0, "only_in_b": 0, "missing_value": 0, "duplicate_rows": 0}
    rows = {r["subset"]: r for r in out["rows"]}
    for subset in ("FinQA", "TAT-DQA"):
        assert rows[subset]["n"] == 10
        assert rows[subset]["mean_a"] == pytest.approx(hybrid.data.metrics[f"{subset}/mrr_at_3"], abs=1e-4)
        assert rows[subset]["mean_b"] == pytest.approx(base.data.metrics[f"{subset}/mrr_at_3"], abs=1e-4)
    assert rows["overall"]["mean_a"] == pytest.approx(hybrid.data.metrics["avg/mrr_at_3"], abs=1e-4)
    assert rows["overall"]["diff"] == pytest.approx(hybrid.data.metrics["avg/mrr_at_3"] - base.data.metrics["avg/mrr_at_3"], abs=1e-3)
    assert rows["overall"]["ci_low"] <= rows["overall"]["diff"] <= rows["overall"]["ci_high"]
    assert 0.0 < rows["overall"]["p_value"] <= 1.0

    # a run against itself: difference 0, p = 1
    proc = _compare_cli(base.info.run_id, base.info.run_id, "--tracking-uri", uri, "--metric", "recall_at_5", "--format", "json")
    same = json.loads(proc.stdout)
    assert all(r["diff"] == 0.0 and r["p_value"] == 1.0 for r in same["rows"])

    # another sample of questions (a file of the run's rows: 5 dropped, 3 of other ids): only the
    # common ids are paired, the rest counted as dropped
    path = sweep.client.download_artifacts(base.info.run_id, "predictions.jsonl", str(tmp_path))
    kept = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()][5:]
    other = [{**r, "id": f"{r['id']}-other"} for r in kept[:3]]
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps(r) + "\n" for r in kept + other), encoding="utf-8")
    proc = _compare_cli(base.info.run_id, str(sample), "--tracking-uri", uri, "--metric", "mrr_at_3")
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("paired"))
    assert header.split()[1] == "15" and "(5 only in A" in header and "3 only in B" in header
    assert "overall" in proc.stdout and "FinQA" in proc.stdout

    # retrieval-only runs have no NM: one-line error, exit 2
    proc = _compare_cli(base.info.run_id, hybrid.info.run_id, "--tracking-uri", uri, "--metric", "nm")
    assert proc.returncode == 2 and "--metric mrr_at_3" in proc.stderr


# --- reading and defaults -------------------------------------------------------------------------


def test_malformed_predictions_file_is_one_line_naming_file_and_line(tmp_path, capsys):
    from t2exp.cli.compare import main

    good, bad = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    good.write_text(json.dumps(_row("1", nm=1.0)) + "\n")
    bad.write_text(json.dumps(_row("1", nm=0.0)) + "\n\n{not json\n")
    assert main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("t2exp compare: error:"), err
    assert f"{bad}: line 3: not valid JSON" in err[0]
    assert not (tmp_path / "mlruns").exists()  # two files: no MLflow store is opened


def test_two_prediction_files_compare_without_mlflow(tmp_path, capsys, monkeypatch):
    from t2exp.cli.compare import main

    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(_row(str(i), nm=1.0)) + "\n" for i in range(4)))
    b.write_text("".join(json.dumps(_row(str(i), nm=float(i % 2))) + "\n" for i in range(4)))
    assert main([str(a), str(b), "--format", "json", "--n-boot", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    overall = out["rows"][-1]
    assert (overall["subset"], overall["n"], overall["mean_a"], overall["mean_b"], overall["diff"]) == ("overall", 4, 100.0, 50.0, 50.0)
    assert overall["p_value"] == pytest.approx(8 / 16)  # d = [1, 0, 1, 0]: exact; |sum| = 2 for ++ and -- of the 1s, x 4 for the 0s
    assert not (tmp_path / "mlruns").exists()


def test_default_locations_are_under_the_current_directory(tmp_path, monkeypatch):
    from t2exp.cli.compare import build_parser as compare_parser
    from t2exp.cli.report import build_parser as report_parser
    from t2exp.evaluation.reporting.build import default_out_dir

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    assert compare_parser().parse_args(["a", "b"]).tracking_uri == uri
    assert report_parser().parse_args(["t"]).tracking_uri == uri
    assert default_out_dir("my sweep") == tmp_path / "outputs" / "reports" / "my_sweep"


@pytest.mark.parametrize("metric", ["nm_bare", "nm_strict"])
def test_compare_on_the_other_nm_readings(tmp_path, capsys, monkeypatch, metric):
    from t2exp.cli.compare import main

    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({**_row(str(i), nm=1.0), metric: 1.0}) + "\n" for i in range(4)))
    b.write_text("".join(json.dumps({**_row(str(i), nm=1.0), metric: float(i % 2)}) + "\n" for i in range(4)))
    assert main([str(a), str(b), "--metric", metric, "--format", "json", "--n-boot", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metric"] == metric and out["rows"][-1]["diff"] == 50.0


def test_the_commands_are_subcommands_of_t2exp(tmp_path):
    """``t2exp score|compare|report`` reach their command with its own prog name; anything else is
    the experiment app's overrides."""
    from helpers.command import cli
    from t2exp.__main__ import main
    from t2exp.cli import COMMANDS

    assert set(COMMANDS) == {"score", "compare", "explore", "report", "reproduce", "collect", "status"}
    for name in COMMANDS:
        proc = cli(main, [name, "--help"], cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: t2exp {name} "), proc.stdout[:200]
    a = tmp_path / "a.jsonl"
    a.write_text(json.dumps(_row("1", nm=1.0)) + "\n")
    proc = cli(main, ["compare", str(a), str(tmp_path / "missing.jsonl")], cwd=tmp_path)
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and line.startswith("t2exp compare: error:") and "missing.jsonl" in line, proc.stderr
    bad = cli(main, ["nosuchoverride=1"], cwd=tmp_path)  # the app: an override it does not know
    assert bad.returncode == 2 and "nosuchoverride" in bad.stderr


# --- opening the store: a read-only command creates none and does not wait on a dead server ------


def test_a_server_that_does_not_answer_is_one_line_at_once():
    """MLflow's own client retries a refused connection for minutes in silence: a real process,
    bounded well below that, gets the health check's one line naming the URI and the fix."""
    import sys
    from pathlib import Path

    uri = f"http://127.0.0.1:{free_port()}"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MLFLOW_HTTP")}
    proc = subprocess.run(
        [sys.executable, "-m", "t2exp", "compare", "run-a", "run-b", "--tracking-uri", uri],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"t2exp compare: error: --tracking-uri={uri}: no MLflow server answers") and "mlflow server" in line


@pytest.mark.parametrize("command", ["compare", "report", "report --errors"])
def test_a_mistyped_store_path_is_one_line_and_nothing_is_created(tmp_path, command):
    from t2exp.cli.compare import main as compare_main
    from t2exp.cli.report import main as report_main

    db = tmp_path / "mlrun" / "mlflow.db"  # the store is mlruns/: a typo
    uri = f"sqlite:///{db}"
    argv = {"compare": ["run-a", "run-b"], "report": ["my-sweep"], "report --errors": ["--errors", "run-a"]}[command]
    main = compare_main if command == "compare" else report_main
    proc = cli(main, [*argv, "--tracking-uri", uri], cwd=tmp_path, prog=f"t2exp {command.split()[0]}")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert f"--tracking-uri={uri}: no MLflow store at {db}" in line, line
    assert list(tmp_path.iterdir()) == []  # no store, no directory, no report


def test_the_local_store_of_a_uri():
    from pathlib import Path

    from t2exp.infra.mlflow_store import local_store

    assert local_store("sqlite:////abs/mlflow.db") == Path("/abs/mlflow.db")
    assert local_store("sqlite:///rel/mlflow.db?timeout=5") == Path("rel/mlflow.db")
    assert local_store("file:///abs/mlruns") == Path("/abs/mlruns") and local_store("mlruns") == Path("mlruns")
    assert local_store("sqlite://") is None and local_store("http://h:5000") is None and local_store("postgresql://u@h/db") is None


# --- reading prediction rows: the scorer's reader and rules ---------------------------------------


def _write(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize(
    ("bad_row", "expect"),
    [
        ({"subset": "FinQA", "nm": 1.0}, "line 3: no 'id'"),
        ({**_row("2"), "nm": "yes"}, "line 3: field 'nm' is 'yes', not a number"),
        ({**_row("2", nm=1.0), "mrr_at_3": [1]}, "line 3: field 'mrr_at_3' is [1], not a number"),
        ({**_row("2", nm=1.0), "retrieved": "c1"}, "line 3: column 'retrieved' is 'c1', not a JSON list of context ids"),
    ],
)
def test_a_bad_row_is_one_line_naming_file_line_and_field(tmp_path, bad_row, expect):
    """Blank lines count: the line is the file's own."""
    a = _write(tmp_path / "a.jsonl", [_row("1", nm=1.0), _row("2", nm=0.0)])
    b = _write(tmp_path / "b.jsonl", [_row("1", nm=1.0), "", bad_row])
    proc = _compare_cli(a, b, "--n-boot", "10")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("t2exp compare: error:") and f"{b}: {expect}" in line, line


def test_retrieved_as_a_json_list_in_a_string_is_read_as_the_scorer_reads_it(tmp_path, capsys):
    from t2exp.cli.compare import main

    a = _write(tmp_path / "a.jsonl", [_row(str(i), retrieved=["c1", "c2"]) for i in range(3)])
    b = _write(tmp_path / "b.jsonl", [_row(str(i), retrieved=json.dumps(["c2", "c1"])) for i in range(3)])
    assert main([a, b, "--metric", "mrr_at_2", "--format", "json", "--n-boot", "10"]) == 0
    overall = json.loads(capsys.readouterr().out)["rows"][-1]
    assert (overall["mean_a"], overall["mean_b"]) == (100.0, 50.0)  # not 'c', '1' characters: a miss


def test_a_repeated_question_keeps_its_first_row_in_compare_as_in_score(tmp_path, capsys):
    """One rule, one helper (scoring.predictions.first_of_each): compare kept the last row, score the
    first (the duplicate row of the hand-made predictions of the score command's tests)."""
    from t2exp.cli.compare import main
    from t2exp.evaluation.scoring.predictions import first_of_each

    assert first_of_each([("q1", "a"), ("q2", "b"), ("q1", "c")]) == ({"q1": "a", "q2": "b"}, ["c"])
    rows = [_row("1", nm=1.0), _row("2", nm=1.0), _row("1", nm=0.0)]  # a resumed run wrote q1 twice
    a = _write(tmp_path / "a.jsonl", rows)
    b = _write(tmp_path / "b.jsonl", [_row("1", nm=1.0), _row("2", nm=1.0)])
    assert main([a, b, "--format", "json", "--n-boot", "10"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["rows"][-1]["mean_a"] == 100.0 and result["dropped"]["duplicate_rows"] == 1
    assert "1 rows repeat a question already seen" in err and "the first row of each is kept" in err and "'1'" in err


@pytest.mark.parametrize("metric", ["mrr_at_0", "recall_at_0", "mrr_at_", "em"])
def test_a_metric_outside_the_grammar_is_refused_naming_the_allowed_names(tmp_path, metric):
    a = _write(tmp_path / "a.jsonl", [_row("1", nm=1.0)])
    proc = _compare_cli(a, a, "--metric", metric)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert f"--metric={metric!r} is invalid; allowed: nm, nm_bare, nm_strict, mrr_at_<k>, recall_at_<r> (k, r >= 1)" in line


# --- the questions that differ (issue 43 item 1) -----------------------------------------------------


def _ranked_row(qid, subset, retrieved, nm=None, answer=None, gold="c1"):
    return {
        **_row(qid, subset, nm=nm, retrieved=retrieved, gold=gold),
        "question": f"question {qid} " + "x" * 80,
        "gold_raw": "42",
        "answer_text": answer,
    }


def _two_files(tmp_path):
    """A and B over 5 questions: A wins q1 (rank 1 vs 3) and q4 (rank 2 vs none), loses q2 (none vs
    1), ties q3; q5 is only in A."""
    a = [
        _ranked_row("q1", "FinQA", ["c1", "x", "y"], 1.0, "42"),
        _ranked_row("q2", "FinQA", ["x", "y", "z"], 0.0, "7"),
        _ranked_row("q3", "TAT-DQA", ["c1", "x", "y"], 1.0, "42"),
        _ranked_row("q4", "TAT-DQA", ["x", "c1", "y"], 1.0, "42"),
        _ranked_row("q5", "TAT-DQA", ["c1"], 1.0, "42"),
    ]
    b = [
        _ranked_row("q1", "FinQA", ["x", "y", "c1"], 0.0, "41"),
        _ranked_row("q2", "FinQA", ["c1", "y", "z"], 1.0, "42"),
        _ranked_row("q3", "TAT-DQA", ["c1", "x", "y"], 1.0, "42"),
        _ranked_row("q4", "TAT-DQA", ["x", "y", "z"], 0.0, None),
    ]
    return _write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", b)


def test_compare_lists_the_questions_that_differ_by_effect(tmp_path):
    """Wins of A first (largest first), then its losses; each with gold, answers, NM and gold rank;
    --show N lists N and says how many more."""
    a, b = _two_files(tmp_path)
    proc = _compare_cli(a, b, "--metric", "mrr_at_3", "--show", "2", "--n-boot", "50")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "questions that differ on MRR@3: 3 of 4 (A better on 2, B better on 1, the same on 1)" in out
    lines = out[out.index("questions that differ") :].splitlines()
    head, first, second, more = lines[1:5]
    assert head.split()[:5] == ["effect", "subset", "id", "question", "gold"] and "gold rank A" in head and "NM A" in head
    assert first.split()[:3] == ["A", "better", "FinQA"] and " q1 " in first  # 1 - 1/3: the largest win
    assert " q4 " in second and "not retrieved" in second and "…" in second  # 1/2 - 0; a long question shortened
    assert more == "… 1 more (--show all, or --out FILE.csv|jsonl for every one)"
    listed = _compare_cli(a, b, "--metric", "mrr_at_3", "--show", "all", "--n-boot", "50").stdout
    assert "B better" in listed and " q2 " in listed and " q3 " not in listed and " q5 " not in listed
    none = _compare_cli(a, b, "--metric", "mrr_at_3", "--show", "0", "--n-boot", "50").stdout
    assert "effect" not in none and none.rstrip().endswith("(A better on 2, B better on 1, the same on 1)")
    bad = _compare_cli(a, b, "--show", "many")
    assert bad.returncode == 2 and "--show 'many': give a number of questions (0: none) or 'all'" in bad.stderr


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_compare_out_writes_every_question_that_differs(tmp_path, suffix):
    import csv

    a, b = _two_files(tmp_path)
    out = tmp_path / f"differ{suffix}"
    proc = _compare_cli(a, b, "--metric", "mrr_at_3", "--show", "0", "--out", str(out), "--n-boot", "50")
    assert proc.returncode == 0, proc.stderr
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh)) if suffix == ".csv" else [json.loads(line) for line in fh]
    assert [(r["effect"], r["id"]) for r in rows] == [("A better", "q1"), ("A better", "q4"), ("B better", "q2")]
    q1 = rows[0]
    assert q1["question"].startswith("question q1 xxx") and len(q1["question"]) > 80  # the whole question
    got = {k: str(q1[k]) for k in ("subset", "gold", "answer_a", "nm_a", "gold_rank_a", "answer_b", "nm_b", "gold_rank_b")}
    assert got == {
        "subset": "FinQA",
        "gold": "42",
        "answer_a": "42",
        "nm_a": "1.0",
        "gold_rank_a": "1",
        "answer_b": "41",
        "nm_b": "0.0",
        "gold_rank_b": "3",
    }
    assert float(q1["a"]) == 100.0 and float(q1["b"]) == pytest.approx(100 / 3) and float(q1["diff"]) == pytest.approx(200 / 3)
    assert str(rows[1]["gold_rank_b"]) == "0"  # not among the retrieved ids
    wrong = _compare_cli(a, b, "--out", str(tmp_path / "differ.txt"))
    (line,) = wrong.stderr.strip().splitlines()
    assert wrong.returncode == 2 and "--out" in line and ".csv or .jsonl" in line and not (tmp_path / "differ.txt").exists()


def test_the_python_api_is_t2exp_evaluation_compare(tmp_path):
    from t2exp.evaluation import compare as api
    from t2exp.evaluation.paired import CompareError, Comparison

    a, b = _two_files(tmp_path)
    result = api(a, b, "mrr_at_3", n_boot=50)
    assert isinstance(result, Comparison) and (result.wins, result.losses, result.ties) == (2, 1, 1)
    assert [q.id for q in result.questions] == ["q1", "q4", "q2"]
    with pytest.raises(CompareError, match="--baseline goes with one sweep"):
        api(a, b, baseline="rag_method=base")
    with pytest.raises(CompareError, match="one run given"):
        api(a)


def _cells(tmp_path):
    client, runs = mlflow_runs(tmp_path)
    parent = next(r for r in runs if r.data.tags.get("t2exp.sweep") == "parent")
    cells = {r.data.params["rag_method.name"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    return client, parent.info.run_id, cells


def _artifact_values(client, run, tmp_path, metric="mrr_at_3"):
    """``{(subset, id): value}`` read straight from a run's predictions.jsonl artifact."""
    path = client.download_artifacts(run.info.run_id, "predictions.jsonl", str(tmp_path))
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return {(r["subset"], r["id"]): r[metric] for r in rows}


def test_compare_of_two_cells_of_a_sweep_prints_the_difference_and_the_questions_that_differ(sweep, tmp_path):
    """After a sweep over `rag_method=base,hybrid,bm25f`, one `t2exp compare` of two cells prints
    the TAT-DQA MRR@3 of both, the difference with its CI, and the ids of the questions where they
    differ: those of the two predictions files."""
    client, parent, uri = sweep.client, sweep.parent, sweep.uri
    base, bm25f = sweep.cells["base"], sweep.cells["bm25f"]
    va, vb = _artifact_values(client, bm25f, tmp_path / "a"), _artifact_values(client, base, tmp_path / "b")
    assert va.keys() == vb.keys() and len(va) == 20
    differ = {key for key in va if va[key] != vb[key]}
    assert differ  # bm25f finds gold documents base misses

    proc = _compare_cli(bm25f.info.run_id, base.info.run_id, "--tracking-uri", uri, "--show", "all")
    assert proc.returncode == 0, proc.stderr
    tat = next(line for line in proc.stdout.splitlines() if line.startswith("TAT-DQA"))
    m_a, m_b = bm25f.data.metrics["TAT-DQA/mrr_at_3"], base.data.metrics["TAT-DQA/mrr_at_3"]
    assert tat.split()[:4] == ["TAT-DQA", "10", f"{m_a:.1f}", f"{m_b:.1f}"]
    assert f"{m_a - m_b:+.1f} [" in tat
    listed = [line.split()[3] for line in proc.stdout.splitlines() if line.startswith(("A better", "B better"))]
    assert sorted(listed) == sorted(qid for _, qid in differ)

    data = json.loads(_compare_cli(bm25f.info.run_id, base.info.run_id, "--tracking-uri", uri, "--format", "json").stdout)
    row = next(r for r in data["rows"] if r["subset"] == "TAT-DQA")
    assert (row["mean_a"], row["mean_b"]) == (pytest.approx(m_a, abs=1e-3), pytest.approx(m_b, abs=1e-3))
    assert row["diff"] == pytest.approx(m_a - m_b, abs=1e-3) and row["ci_low"] <= row["diff"] <= row["ci_high"]
    assert {(q["subset"], q["id"]) for q in data["questions"]} == differ
    assert data["wins"] + data["losses"] == len(differ) and data["ties"] == 20 - len(differ)

    # the parent run id: every cell against the one --baseline names; bm25f's rows are those above
    # (with their p Holm-adjusted over the two cells)
    whole = _compare_cli(parent, "--baseline", "rag_method=base", "--tracking-uri", uri, "--format", "json")
    assert whole.returncode == 0, whole.stderr
    (cell,) = [c for c in json.loads(whole.stdout)["cells"] if c["name"] == "bm25f · minilm · k=3"]
    assert [{k: v for k, v in r.items() if k != "p_holm"} for r in cell["rows"]] == data["rows"]
    assert all(r["p_holm"] >= r["p_value"] for r in cell["rows"])


def test_compare_of_a_sweep_id_holm_corrects_over_its_cells(sweep, tmp_path):
    """Three cells against the baseline `rag_method=base`: each cell's rows are those of comparing
    the two runs, and its p (per subset) is Holm-adjusted over the two cells (stats.holm); --out
    names the cell of every question."""
    from t2exp.evaluation import compare as api
    from t2exp.evaluation.stats import holm

    parent, cells, uri = sweep.parent, sweep.cells, sweep.uri
    result = api(parent, baseline="rag_method=base", n_boot=500, tracking_uri=uri)
    assert result.m == 2 and result.baseline.run_id == cells["base"].info.run_id
    pairs = {c.run.run_id: api(c.run.run_id, cells["base"].info.run_id, n_boot=500, tracking_uri=uri) for c in result.cells}
    assert {c.run.name for c in result.cells} == {"bm25f · minilm · k=3", "hybrid · minilm · k=3"}
    for c in result.cells:
        assert c.comparison.rows == pairs[c.run.run_id].rows
    for i, subset in enumerate(["FinQA", "TAT-DQA", "overall"]):
        raw = [c.comparison.rows[i].p_value for c in result.cells]
        assert [c.p_holm[subset] for c in result.cells] == holm(raw)
    out = tmp_path / "differ.jsonl"
    proc = _compare_cli(parent, "--baseline", "rag_method=base", "--tracking-uri", uri, "--out", str(out), "--n-boot", "500")
    assert proc.returncode == 0, proc.stderr
    assert "p (Holm, m=2)" in proc.stdout and "hybrid · minilm · k=3" in proc.stdout
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted((r["cell_run_id"], r["id"]) for r in written) == sorted(
        (rid, q.id) for rid, pair in pairs.items() for q in pair.questions
    )


def test_compare_out_csv_writes_no_formula_and_keeps_numbers(tmp_path):
    """Model answers and questions are untrusted: a CSV cell starting with = + - @ (or a tab or
    carriage return) is a formula to a spreadsheet; such a text cell gets a leading ' (OWASP's
    advice), a number (also a negative one, written as text) stays a number."""
    import csv

    answers = ['=HYPERLINK("http://evil.example","x")', "+1+1", "-3.5", "@SUM(A1)", "\tcmd", "-2+3"]
    a = [_ranked_row(f"q{i}", "FinQA", ["c1"], 1.0, answer) for i, answer in enumerate(answers)]
    b = [_ranked_row(f"q{i}", "FinQA", ["x"], 0.0, "-7") for i in range(len(answers))]
    a[0]["question"] = "=1+2 what is the revenue"
    out = tmp_path / "differ.csv"
    proc = _compare_cli(_write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", b), "--metric", "nm", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    with out.open(encoding="utf-8", newline="") as fh:
        rows = {r["id"]: r for r in csv.DictReader(fh)}
    assert [rows[f"q{i}"]["answer_a"] for i in range(len(answers))] == [
        '\'=HYPERLINK("http://evil.example","x")',
        "'+1+1",
        "-3.5",
        "'@SUM(A1)",
        "'\tcmd",
        "'-2+3",
    ]
    assert rows["q0"]["question"] == "'=1+2 what is the revenue" and rows["q0"]["answer_b"] == "-7"
    assert rows["q0"]["diff"] == "100.0" and rows["q0"]["b"] == "0.0"
    jsonl = tmp_path / "differ.jsonl"  # JSON lines are data, not a sheet: written as they are
    assert _compare_cli(str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--metric", "nm", "--out", str(jsonl)).returncode == 0
    assert json.loads(jsonl.read_text(encoding="utf-8").splitlines()[0])["answer_a"] == answers[0]


def test_an_empty_predictions_file_is_named_and_called_empty(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    b = _write(tmp_path / "b.jsonl", [_row("1", nm=1.0)])
    for args in ([str(empty), b], [b, str(empty)]):
        proc = _compare_cli(*args, "--n-boot", "10")
        assert proc.returncode == 2
        (line,) = proc.stderr.strip().splitlines()
        assert line == f"t2exp compare: error: {empty}: the file is empty (no prediction rows); give the predictions.jsonl of a run", line


def test_a_sweep_whose_cells_share_no_question_with_the_baseline_is_one_line(tmp_path):
    """It ended with exit 0 and a table of no rows."""
    from helpers.tracking import logged_sweep

    cells = [
        {"name": m, "params": {"rag_method.name": m}, "overrides": f"rag_method={m}", "rows": [_row(f"{m}-q", nm=1.0)]}
        for m in ("base", "bm25", "hybrid")
    ]
    uri, parent = logged_sweep(tmp_path, cells)
    proc = _compare_cli(parent, "--baseline", "rag_method=base", "--tracking-uri", uri, "--n-boot", "10")
    assert proc.returncode == 2, proc.stdout
    (line,) = proc.stderr.strip().splitlines()
    assert (
        line.startswith(
            f"t2exp compare: error: sweep (parent run {parent}): no cell could be compared with the baseline 'base' (2 cell(s)): bm25 ("
        )
        and "no question has a 'nm' value in both runs" in line
    ), line
    assert proc.stdout == ""


def test_an_out_file_that_cannot_be_written_names_the_path_given(tmp_path):
    a, b = _two_files(tmp_path)
    proc = _compare_cli(a, b, "--metric", "mrr_at_3", "--out", "/proc/x.csv", "--n-boot", "10")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("t2exp compare: error: /proc/x.csv: No such file or directory;") and ".tmp" not in line, line

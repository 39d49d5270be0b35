"""``t2exp reproduce`` (t2exp.cli.reproduce): the expected-numbers files load, the conditions CI
runs pass on this code, and an expected number changed in a copy of the files makes the same run
print FAIL with the measured and the expected value."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from helpers.paths import ROOT
from t2exp.cli import reproduce, reproduce_run
from t2exp.evaluation import expected as expected_files
from t2exp.infra.contained import OutsideRoot

EXPECTED = ROOT / "expected"
CI_CONDITION = "main_job/default-retrieval"  # python -m t2exp generator=none: the default run's 12 questions, a short run


def test_files_load_and_ci_conditions_are_cheap() -> None:
    tables = expected_files.load_tables(EXPECTED)
    keys = [c.key for t in tables for c in t.conditions]
    assert len(keys) == len(set(keys))
    ci = expected_files.select(tables, [], ci=True)
    assert CI_CONDITION in [c.key for c in ci]
    assert all(c.retrieval_only and "generator=none" in c.overrides for c in ci)  # what CI runs needs no generator
    for t in tables:  # every expected metric is a column of its table, every condition has a tolerance per metric
        for c in t.conditions:
            assert set(c.expected) <= set(t.metrics) and set(c.tolerance) == set(c.expected)


def test_selection_and_print_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert reproduce.main(["--ci", "--print-commands"]) == 0
    out = capsys.readouterr().out
    assert "python -m t2exp generator=none" in out and "avg/mrr_at_3 95.83 ± 0.1" in out
    assert reproduce.main(["ladder", "--print-commands"]) == 0
    assert capsys.readouterr().out.count("python -m t2exp +experiment=beyond +rung=") == 8
    assert reproduce.main([]) == 2
    assert "nothing selected" in capsys.readouterr().err
    assert reproduce.main(["no_such_condition"]) == 2
    assert "no such table or condition" in capsys.readouterr().err


def test_a_malformed_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text("conditions:\n  - name: x\n    overrides: [k=3]\n", encoding="utf-8")
    assert reproduce.main(["--list", "--expected", str(tmp_path)]) == 2
    assert "condition 'x': no `expected` metrics" in capsys.readouterr().err


def test_verdicts_name_measured_and_expected(tmp_path: Path) -> None:
    cond = expected_files.Condition(
        table="t", name="c", overrides=[], expected={"avg/mrr_at_3": 50.0, "avg/nm": 10.0}, tolerance={"avg/mrr_at_3": 0.1, "avg/nm": 1.0}
    )
    result = reproduce.RunResult(cond, tmp_path, 1.0, 0, {"avg/mrr_at_3": 50.04, "avg/nm": 12.5})
    (s1, l1), (s2, l2) = reproduce.verdicts(result)
    assert s1 == "OK" and s2 == "FAIL"
    assert "measured     12.5" in l2 and "expected       10 ± 1" in l2 and "off by +2.5" in l2


def _has_quality_criteria() -> bool:
    import importlib.util

    return importlib.util.find_spec("mlflow.genai.evaluation.quality_criteria") is not None


def _quality_criteria(client, run_id: str) -> list[dict]:
    import json

    return json.loads(client.get_run(run_id).data.tags[reproduce_run.QUALITY_CRITERIA_TAG])["rules"]


def test_the_tolerances_are_the_quality_criteria_of_the_run_they_check(tmp_path: Path) -> None:
    """A condition's tolerances on its run, as the quality criteria MLflow's evaluation-runs page
    reads: each expected metric between expected - tolerance and expected + tolerance, by the
    run's own metric names; the run's metrics meet them exactly when the verdicts say OK."""
    pytest.importorskip("mlflow.genai.evaluation.quality_criteria", reason="MLflow 3.18 added quality criteria")
    from mlflow.tracking import MlflowClient

    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    run_id = client.create_run(client.create_experiment("t2exp")).info.run_id
    measured = {"avg/mrr_at_3": 50.04, "avg/nm": 12.5}
    for key, value in measured.items():
        client.log_metric(run_id, key, value)
    cond = expected_files.Condition(
        table="t", name="c", overrides=[], expected={"avg/mrr_at_3": 50.0, "avg/nm": 10.0}, tolerance={"avg/mrr_at_3": 0.1, "avg/nm": 1.0}
    )
    reproduce_run.record_criteria(db, run_id, cond)
    rules = _quality_criteria(client, run_id)
    assert [(r["metricKey"], r["comparator"], r["threshold"]) for r in rules] == [
        ("avg/mrr_at_3", "GTE", pytest.approx(49.9)),
        ("avg/mrr_at_3", "LTE", pytest.approx(50.1)),
        ("avg/nm", "GTE", 9.0),
        ("avg/nm", "LTE", 11.0),
    ]
    metrics = client.get_run(run_id).data.metrics
    met = {r["metricKey"]: True for r in rules}
    for r in rules:
        value = metrics[r["metricKey"]]
        met[r["metricKey"]] &= value >= r["threshold"] if r["comparator"] == "GTE" else value <= r["threshold"]
    verdicts = reproduce.verdicts(reproduce.RunResult(cond, tmp_path, 1.0, 0, measured))
    assert [status == "OK" for status, _ in verdicts] == [met["avg/mrr_at_3"], met["avg/nm"]] == [True, False]


def test_an_echoed_command_holds_no_secret() -> None:
    cond = expected_files.Condition(
        table="t",
        name="c",
        overrides=["tracking.uri=http://me:pw-4567@mlflow:5000", "generator.api_key=plain-key", "k=3"],
        expected={"avg/nm": 1.0},
        tolerance={"avg/nm": 0.1},
    )
    assert cond.command() == "python -m t2exp 'tracking.uri=http://me:***@mlflow:5000' 'generator.api_key=***' k=3"


@pytest.mark.full
@pytest.mark.slow
def test_ci_conditions_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert reproduce.main(["--ci"]) == 0
    out = capsys.readouterr().out
    assert "  FAIL " not in out and "\n  OK " in out, out
    assert "metric(s):" in out and ", 0 FAIL" in out and "run(s) failed" not in out


@pytest.mark.full
@pytest.mark.slow
def test_a_changed_expected_number_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = tmp_path / "expected"
    shutil.copytree(EXPECTED, expected)
    path = expected / "main_job.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    (cond,) = [c for c in doc["conditions"] if c["name"] == CI_CONDITION.split("/")[1]]
    cond["expected"]["avg/mrr_at_3"] = 90.0
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")

    keep = tmp_path / "kept"
    assert reproduce.main([CI_CONDITION, "--expected", str(expected), "--keep", str(keep)]) == 1
    out = capsys.readouterr().out
    fails = [line for line in out.splitlines() if line.strip().startswith("FAIL")]
    assert len(fails) == 1, out
    assert "avg/mrr_at_3" in fails[0] and "measured  95.8333" in fails[0] and "expected       90 ± 0.1" in fails[0]
    assert "4 OK, 1 FAIL" in out
    if _has_quality_criteria():  # MLflow 3.18: the tolerances on the run they check
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=f"sqlite:///{keep / CI_CONDITION / 'mlruns' / 'mlflow.db'}")
        (run,) = client.search_runs([client.get_experiment_by_name("t2exp").experiment_id])
        rules = {(r["metricKey"], r["comparator"]): r["threshold"] for r in _quality_criteria(client, run.info.run_id)}
        assert rules[("avg/mrr_at_3", "GTE")] == pytest.approx(89.9) and len(rules) == 2 * len(cond["expected"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]\n", "a mapping with a non-empty list `conditions`"),
        ("conditions: [{overrides: []}]\n", "a mapping with a `name`"),
        ("conditions: [{name: x, overrides: k=3, expected: {a: 1}}]\n", "`overrides` is a list of strings"),
        ("conditions: [{name: x, overrides: [], expected: {a: yes}}]\n", "expected a: True is not a number"),
        ("conditions: [{name: x, overrides: [], expected: [1]}]\n", "a mapping of metric -> value, not list"),
        ("conditions: [{name: x, overrides: [], expected: {a: 1}, tolerance: -1}]\n", "a tolerance is negative"),
        ("conditions: [{name: x, overrides: [], expected: {a: 1}, intervals: {a: [1]}}]\n", "intervals a is [low, high]"),
        (
            "conditions: [{name: x, overrides: [], expected: {a: 1}}, {name: x, overrides: [], expected: {a: 2}}]\n",
            "a second condition of that name",
        ),
        ("minutes: soon\nconditions: [{name: x, overrides: [], expected: {a: 1}}]\n", "minutes: 'soon' is not a number"),
        ("conditions: [{name: x\n", "bad.yaml: while parsing"),
        # a condition's name is the folder of its run under the root, deleted before the run: one plain segment
        ("conditions: [{name: /tmp/victim, overrides: [], expected: {a: 1}}]\n", "conditions[0]: name '/tmp/victim' is invalid"),
        ("conditions: [{name: ../../victim, overrides: [], expected: {a: 1}}]\n", "conditions[0]: name '../../victim' is invalid"),
        ("conditions: [{name: a/b, overrides: [], expected: {a: 1}}]\n", "name 'a/b' is invalid: a condition's name is one plain"),
        ("conditions: [{name: '..', overrides: [], expected: {a: 1}}]\n", "name '..' is invalid"),
    ],
)
def test_every_malformed_field_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    assert reproduce.main(["--list", "--expected", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line, line


def test_tolerances_per_metric_listing_and_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(
        "retrieval_only: true\ntolerance: 0.5\nconditions:\n"
        "  - {name: one, overrides: [generator=none], expected: {avg/nm: 1, avg/mrr_at_3: 2}, tolerance: {avg/nm: 0.2}, ci: true}\n"
        "  - {name: two, overrides: [k=5], expected: {avg/nm: 3}, intervals: {avg/nm: [2, 4]}}\n",
        encoding="utf-8",
    )
    (tmp_path / "b.yaml").write_text("conditions:\n  - {name: one, overrides: [], expected: {avg/nm: 1}}\n", encoding="utf-8")
    tables = expected_files.load_tables(tmp_path)
    one = tables[0].conditions[0]
    assert one.tolerance == {"avg/nm": 0.2, "avg/mrr_at_3": 0.5} and tables[0].conditions[1].intervals == {"avg/nm": (2.0, 4.0)}
    assert [c.key for c in expected_files.select(tables, [], cheap=True)] == ["a/one", "a/two"]
    assert [c.key for c in expected_files.select(tables, ["b"], ci=True)] == ["b/one", "a/one"]
    assert len(expected_files.select(tables, [], every=True)) == 3
    with pytest.raises(expected_files.ExpectedError, match="a condition of 2 tables; name one: a/one, b/one"):
        expected_files.select(tables, ["one"])
    assert reproduce.main(["--list", "--expected", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "a: a (2 conditions, retrieval only)" in listed and "  a/one [ci]: python -m t2exp generator=none" in listed
    assert "b: b (1 conditions, with a generator)" in listed
    (tmp_path / "empty").mkdir()
    with pytest.raises(expected_files.ExpectedError, match="no \\*.yaml"):
        expected_files.load_tables(tmp_path / "empty")
    with pytest.raises(expected_files.ExpectedError, match="no such folder"):
        expected_files.load_tables(tmp_path / "missing")


def test_a_run_that_fails_is_an_error_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.yaml").write_text("conditions:\n  - {name: c, overrides: [k=3], expected: {avg/nm: 1}}\n", encoding="utf-8")
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'no t2exp here' >&2\nexit 3\n", encoding="utf-8")
    fake.chmod(0o755)
    keep = tmp_path / "kept"
    assert reproduce.main(["x/c", "--expected", str(tmp_path), "--python", str(fake), "--keep", str(keep)]) == 2
    out = capsys.readouterr().out
    assert "ERROR  the run ended with exit status 3" in out and "no t2exp here" in out and "1 run(s) failed" in out
    assert (keep / "x" / "c" / "t2exp.log").read_text(encoding="utf-8").strip() == "no t2exp here"


def test_lookup_reads_means_and_plain_numbers() -> None:
    table = {"avg": {"nm": {"mean": 25.0}, "mrr_at_3": 95.8, "flag": True}}
    assert reproduce_run.lookup(table, "avg/nm") == 25.0 and reproduce_run.lookup(table, "avg/mrr_at_3") == 95.8
    assert reproduce_run.lookup(table, "avg/flag") is None and reproduce_run.lookup(table, "avg") is None


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep", encoding="utf-8")
    return victim


def _fake_python(tmp_path: Path) -> Path:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'no t2exp here' >&2\nexit 3\n", encoding="utf-8")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("name", ["{victim}", "../../../victim"])
def test_a_condition_named_outside_the_root_deletes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """A condition's name becomes root/table/name, removed before the run: an absolute name or one
    with ../ is refused with one line when the file is loaded, and the folder outside the root is
    still there after two runs."""
    victim = _victim(tmp_path)
    expected = tmp_path / "expected"
    expected.mkdir()
    (expected / "x.yaml").write_text(
        yaml.safe_dump({"conditions": [{"name": name.format(victim=victim), "overrides": ["k=3"], "expected": {"avg/nm": 1}}]}),
        encoding="utf-8",
    )
    keep = tmp_path / "a" / "root"  # root/x/../../../victim is tmp_path/victim
    for _ in range(2):
        assert reproduce.main(["--all", "--expected", str(expected), "--python", str(_fake_python(tmp_path)), "--keep", str(keep)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert "x.yaml: conditions[0]: name" in line and "is invalid: a condition's name is one plain path segment" in line
    assert (victim / "precious.txt").read_text(encoding="utf-8") == "keep"


def test_the_run_loop_refuses_a_folder_outside_its_root(tmp_path: Path) -> None:
    """Past the loader too (a Condition made in code): the folder is resolved and checked before it
    is removed."""
    victim = _victim(tmp_path)
    cond = expected_files.Condition(table="t", name="../../victim", overrides=[], expected={"avg/nm": 1.0}, tolerance={"avg/nm": 0.1})
    root = tmp_path / "a" / "root"
    args = reproduce.build_parser().parse_args(["--python", str(_fake_python(tmp_path)), "--keep", str(root)])
    with pytest.raises(OutsideRoot, match="refusing to delete it: it is not inside"):
        reproduce._run_all([cond], args, root, reproduce.Signals())
    assert (victim / "precious.txt").read_text(encoding="utf-8") == "keep"


def test_a_table_file_named_dot_dot_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "...yaml").write_text("conditions: [{name: c, overrides: [], expected: {a: 1}}]\n", encoding="utf-8")
    assert reproduce.main(["--list", "--expected", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "...yaml: the file name '..' is invalid as a table name (the folder of its runs): rename the file" in line


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.yaml").write_bytes(b"title: caf\xe9\nconditions: [{name: c, overrides: [], expected: {a: 1}}]\n")
    assert reproduce.main(["--list", "--expected", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "x.yaml: not UTF-8 text (invalid continuation byte at byte 10); save the file as UTF-8" in line, line


def test_a_missing_interpreter_or_a_keep_that_is_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.yaml").write_text("conditions:\n  - {name: c, overrides: [k=3], expected: {avg/nm: 1}}\n", encoding="utf-8")
    base = ["x/c", "--expected", str(tmp_path)]
    assert reproduce.main([*base, "--python", str(tmp_path / "no-python")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"--python {tmp_path / 'no-python'}: no such interpreter" in line
    afile = tmp_path / "afile"
    afile.write_text("mine", encoding="utf-8")
    assert reproduce.main([*base, "--python", str(_fake_python(tmp_path)), "--keep", str(afile)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"--keep {afile}: a file, not a folder" in line and afile.read_text(encoding="utf-8") == "mine"


def test_the_run_gets_this_commands_pythonpath_whatever_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative PYTHONPATH entry (PYTHONPATH=src in a checkout) found other code, or none, from the
    run's own folder: the run must import the code this command is checking."""
    (tmp_path / "x.yaml").write_text("conditions:\n  - {name: c, overrides: [k=3], expected: {avg/nm: 1}}\n", encoding="utf-8")
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "PYTHONPATH=$PYTHONPATH"\nexit 3\n', encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["src", "", str(tmp_path / "abs")]))
    keep = tmp_path / "kept"
    assert reproduce.main(["x/c", "--expected", str(tmp_path), "--python", str(fake), "--keep", str(keep)]) == 2
    log = (keep / "x" / "c" / "t2exp.log").read_text(encoding="utf-8").strip()
    assert log == f"PYTHONPATH={tmp_path / 'src'}{os.pathsep}{tmp_path / 'abs'}"


def _wait_for_text(path: Path, text: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.is_file() and text in path.read_text(encoding="utf-8", errors="replace"):
            return
        assert proc.poll() is None, f"t2exp reproduce ended (exit {proc.returncode}) before {path} said {text!r}"
        time.sleep(0.05)
    raise AssertionError(f"{path} did not say {text!r} within {timeout}s")


@pytest.mark.full
@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_the_run_and_its_mlflow_run_is_killed(tmp_path: Path, corpus_embeddings: Path) -> None:
    """SIGINT to `t2exp reproduce` while its condition's run waits on the generator: the signal is
    passed on, the run stops as a t2exp run does (KILLED, not left RUNNING), and the command says
    so in one line, exit 130, with no traceback.
    Synchronised on events: the generator (a stand-in server) holds the run's requests until the
    run has logged that the signal reached it."""
    from fakes.openai_server import FakeOpenAIServer
    from helpers.caches import warm

    arrived, gate = threading.Event(), threading.Event()

    def held(messages) -> str:
        arrived.set()
        assert gate.wait(600), "the test never released the held requests"
        return "Final answer: 1"

    with FakeOpenAIServer(model="held", reply=held) as srv:
        expected, keep = tmp_path / "expected", tmp_path / "kept"
        expected.mkdir()
        overrides = [
            "generator=openai_compat",
            "generator.model=held",
            f"generator.base_url={srv.base_url}",
            "generator.max_retries=0",
            "rag_method=base",
            "dataset.limit=1",
            "tracking.traces=false",
        ]
        (expected / "x.yaml").write_text(
            yaml.safe_dump({"conditions": [{"name": "c", "overrides": overrides, "expected": {"avg/nm": 1}}]}), encoding="utf-8"
        )
        cmd = [
            sys.executable,
            "-m",
            "t2exp.cli.reproduce",
            "x/c",
            "--expected",
            str(expected),
            "--keep",
            str(keep),
            "--cache-from",
            str(warm(tmp_path / "cache", corpus_embeddings)),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "T2EXP_STOP_GRACE_SECONDS": "600"}
        env.pop("T2EXP_PARENT_RUN_ID", None)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert arrived.wait(600), "the run never asked the generator"
            proc.send_signal(signal.SIGINT)  # `t2exp reproduce` alone: it passes it on
            _wait_for_text(keep / "x" / "c" / "t2exp.log", "SIGINT: stopping after the requests in flight", proc)
            gate.set()
            out, err = proc.communicate(timeout=300)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err[-3000:]
    (line,) = err.strip().splitlines()
    assert line.startswith(
        "t2exp reproduce: interrupted by SIGINT; passed on to the run of x/c, which stopped with exit "
        "status 130 (its MLflow run closed as KILLED); outputs kept under"
    ), line
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{keep / 'x' / 'c' / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "KILLED"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_run_past_its_timeout_is_asked_to_stop_before_it_is_killed(tmp_path: Path) -> None:
    """--timeout sent SIGKILL at once: the run could not close its MLflow run (left RUNNING). Now
    SIGTERM comes first (a t2exp run stops on it as on a Ctrl-C); exit 124 either way."""
    with (tmp_path / "log").open("wb") as log:
        rc = reproduce_run._child([sys.executable, "-c", "import time; time.sleep(600)"], tmp_path, dict(os.environ), log, 0.5, None)
    assert rc == 124
    last = (tmp_path / "log").read_text().strip().splitlines()[-1]
    assert last == f"{reproduce.PROG}: stopped after --timeout 0.5 s (SIGTERM; the run ended with exit status -{signal.SIGTERM.value})"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_run_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"  # SIGTERM is ignored from here on
    how = reproduce_run.stop_child(proc, 0.5)
    assert proc.returncode == -signal.SIGKILL.value
    assert how == "SIGTERM, then SIGKILL 0.5 s later; its MLflow run may be left RUNNING"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_the_sigkill_after_the_grace_ends_every_process_the_run_started(tmp_path: Path) -> None:
    """A run that ignores SIGTERM and started a process of its own that ignores it too (a worker):
    the SIGKILL after the grace reaches the run's whole process group, so no worker is left."""
    from t2exp.infra.signals import group_alive

    worker = "import time; time.sleep(600)"
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"subprocess.Popen([sys.executable, '-c', {worker!r}]); print('ready', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, process_group=0)  # as a condition's run
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        how = reproduce_run.stop_child(proc, 0.5)
        assert how == "SIGTERM, then SIGKILL 0.5 s later; its MLflow run may be left RUNNING"
        assert not group_alive(proc.pid)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "-inf", "soon"])
def test_a_timeout_that_is_not_a_positive_finite_number_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    (tmp_path / "x.yaml").write_text("conditions:\n  - {name: c, overrides: [k=3], expected: {avg/nm: 1}}\n", encoding="utf-8")
    keep = tmp_path / "kept"
    argv = ["x/c", "--expected", str(tmp_path), "--python", str(_fake_python(tmp_path)), "--keep", str(keep), f"--timeout={value}"]
    assert reproduce.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"t2exp reproduce: error: --timeout {value!r} is invalid; allowed: a positive finite number of seconds (e.g. 600)", line
    assert not keep.exists()


@pytest.mark.parametrize("where", ["x", "x/c"])
def test_a_keep_folder_holding_a_symbolic_link_is_one_line_and_the_link_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A condition's folder (or its table's) under --keep that is a symbolic link is one line naming
    it before anything runs, not rmtree's "Cannot call rmtree on a symbolic link" without a path;
    the link and what it points to are left as they were."""
    (tmp_path / "x.yaml").write_text("conditions:\n  - {name: c, overrides: [k=3], expected: {avg/nm: 1}}\n", encoding="utf-8")
    victim = _victim(tmp_path)
    keep = tmp_path / "kept"
    (keep / where).parent.mkdir(parents=True, exist_ok=True)
    (keep / where).symlink_to(victim, target_is_directory=True)
    argv = ["x/c", "--expected", str(tmp_path), "--python", str(_fake_python(tmp_path)), "--keep", str(keep)]
    assert reproduce.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"t2exp reproduce: error: --keep {keep}: {keep / where} is a symbolic link (to {victim}); t2exp does not follow "
        "or delete links under --keep: remove the link, or give another --keep folder"
    ), line
    assert (keep / where).is_symlink() and sorted(p.name for p in victim.iterdir()) == ["precious.txt"]

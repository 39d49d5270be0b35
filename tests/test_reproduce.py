"""``t2exp reproduce`` (t2exp.cli.reproduce): the expected-numbers files load, the conditions CI
runs pass on this code, and an expected number changed in a copy of the files makes the same run
print FAIL with the measured and the expected value."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from t2exp.cli import reproduce
from t2exp.evaluation import expected as expected_files

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "expected"
CI_CONDITION = "main_job/default-retrieval"  # python -m t2exp generator=none: the default run's 12 questions, ~12 s


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
    cond = expected_files.Condition(table="t", name="c", overrides=[], expected={"avg/mrr_at_3": 50.0, "avg/nm": 10.0},
                               tolerance={"avg/mrr_at_3": 0.1, "avg/nm": 1.0})
    result = reproduce.RunResult(cond, tmp_path, 1.0, 0, {"avg/mrr_at_3": 50.04, "avg/nm": 12.5})
    (s1, l1), (s2, l2) = reproduce.verdicts(result)
    assert s1 == "OK" and s2 == "FAIL"
    assert "measured     12.5" in l2 and "expected       10 ± 1" in l2 and "off by +2.5" in l2


@pytest.mark.slow
def test_ci_conditions_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert reproduce.main(["--ci"]) == 0
    out = capsys.readouterr().out
    assert "  FAIL " not in out and "\n  OK " in out, out
    assert "metric(s):" in out and ", 0 FAIL" in out and "run(s) failed" not in out


@pytest.mark.slow
def test_a_changed_expected_number_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = tmp_path / "expected"
    shutil.copytree(EXPECTED, expected)
    path = expected / "main_job.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    (cond,) = [c for c in doc["conditions"] if c["name"] == CI_CONDITION.split("/")[1]]
    cond["expected"]["avg/mrr_at_3"] = 90.0
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")

    assert reproduce.main([CI_CONDITION, "--expected", str(expected)]) == 1
    out = capsys.readouterr().out
    fails = [line for line in out.splitlines() if line.strip().startswith("FAIL")]
    assert len(fails) == 1, out
    assert "avg/mrr_at_3" in fails[0] and "measured  95.8333" in fails[0] and "expected       90 ± 0.1" in fails[0]
    assert "4 OK, 1 FAIL" in out


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]\n", "a mapping with a non-empty list `conditions`"),
    ("conditions: [{overrides: []}]\n", "a mapping with a `name`"),
    ("conditions: [{name: x, overrides: k=3, expected: {a: 1}}]\n", "`overrides` is a list of strings"),
    ("conditions: [{name: x, overrides: [], expected: {a: yes}}]\n", "expected a: True is not a number"),
    ("conditions: [{name: x, overrides: [], expected: [1]}]\n", "a mapping of metric -> value, not list"),
    ("conditions: [{name: x, overrides: [], expected: {a: 1}, tolerance: -1}]\n", "a tolerance is negative"),
    ("conditions: [{name: x, overrides: [], expected: {a: 1}, intervals: {a: [1]}}]\n", "intervals a is [low, high]"),
    ("conditions: [{name: x, overrides: [], expected: {a: 1}}, {name: x, overrides: [], expected: {a: 2}}]\n",
     "a second condition of that name"),
    ("minutes: soon\nconditions: [{name: x, overrides: [], expected: {a: 1}}]\n", "minutes: 'soon' is not a number"),
    ("conditions: [{name: x\n", "bad.yaml: while parsing"),
])
def test_every_malformed_field_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                                      message: str) -> None:
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    assert reproduce.main(["--list", "--expected", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line, line


def test_tolerances_per_metric_listing_and_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(
        "retrieval_only: true\ntolerance: 0.5\nconditions:\n"
        "  - {name: one, overrides: [generator=none], expected: {avg/nm: 1, avg/mrr_at_3: 2}, tolerance: {avg/nm: 0.2}, ci: true}\n"
        "  - {name: two, overrides: [k=5], expected: {avg/nm: 3}, intervals: {avg/nm: [2, 4]}}\n", encoding="utf-8")
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
    assert reproduce.lookup(table, "avg/nm") == 25.0 and reproduce.lookup(table, "avg/mrr_at_3") == 95.8
    assert reproduce.lookup(table, "avg/flag") is None and reproduce.lookup(table, "avg") is None

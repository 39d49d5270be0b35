"""Focused evidence (``context.mode=focused``): tables whole, the best-matching sentences, in order."""

from __future__ import annotations

import pytest

from helpers.app import compose_cfg
from t2exp import config
from t2exp.answering.context import ContextShaper, focus, split, terms
from t2exp.data.records import Document
from t2exp.errors import ConfigError
from t2exp.index.documents import heading, render

# the shape of a FinQA context: prose, the table glued in with "._" / "_", prose again
FINQA_LIKE = (
    "entergy mississippi , inc .\n"
    "net revenue consists of operating revenues net of fuel . the weather was mild in the south .\n"
    "following is an analysis of the change in net revenue comparing 2010 to 2009 .\n"
    "amount ( in millions ) ._|    | item | amount |\n"
    "|---:|:---|:---|\n"
    "|  0 | 2009 net revenue | $ 536.7 |\n"
    "|  1 | 2010 net revenue | $ 555.3 |_the volume/weather variance is due to usage . "
    "interest expense decreased . the board met twice ."
)


def test_terms_keep_numbers_whole():
    assert terms("Revenue of $1,234.5 million in 2019, up (12.3)%") == ["revenue", "of", "1234.5", "million", "in", "2019", "up", "12.3"]


def test_split_keeps_the_glued_table_with_its_caption():
    pieces = split(FINQA_LIKE)
    tables = [t for kind, t in pieces if kind == "table"]
    assert tables[0] == "amount ( in millions ) .\n|    | item | amount |" and len(tables) == 4
    assert tables[-1] == "|  1 | 2010 net revenue | $ 555.3 |"
    prose = [t for kind, t in pieces if kind == "prose"]
    assert "the volume/weather variance is due to usage ." in prose and "the board met twice ." in prose


def test_focus_keeps_every_table_row_and_the_best_sentences_in_order():
    out = focus("What was the change in net revenue from 2009 to 2010?", FINQA_LIKE, 1)
    lines = out.splitlines()
    assert lines[0] == "following is an analysis of the change in net revenue comparing 2010 to 2009 ."
    assert lines[1:] == [
        "amount ( in millions ) .",
        "|    | item | amount |",
        "|---:|:---|:---|",
        "|  0 | 2009 net revenue | $ 536.7 |",
        "|  1 | 2010 net revenue | $ 555.3 |",
    ]
    two = focus("How did interest expense and the mild weather affect results?", FINQA_LIKE, 2).splitlines()
    assert two[0] == "the weather was mild in the south ." and two[-1] == "interest expense decreased ."
    assert len(two) == 2 + 5


def test_short_documents_and_full_mode_are_unchanged():
    doc = "one sentence . two sentences ."
    assert focus("sentences", doc, 3) == doc
    assert ContextShaper("full").of("anything", FINQA_LIKE) == FINQA_LIKE
    assert ContextShaper("focused", 2, documents=None).all("q", [doc, doc]) == [doc, doc]


def test_context_config_is_checked_and_the_paper_keeps_full_documents():
    with pytest.raises(ConfigError, match=r"context.mode='summary'.*full, focused"):
        config.check(compose_cfg("context.mode=summary"))
    with pytest.raises(ConfigError, match=r"context.sentences=0"):
        config.check(compose_cfg("context.sentences=0"))
    assert compose_cfg("+experiment=paper").context.mode == "full"
    assert compose_cfg("protocol=paper", "context.mode=focused").context.mode == "focused"  # the command line wins


def test_header_names_the_report_and_only_when_asked():
    doc = Document("c1", "FinQA", FINQA_LIKE, {"company_name": "Entergy", "report_year": "2011", "company_sector": "Utilities"})
    assert heading(doc) == "Report: Entergy, 2011"
    assert heading(Document("c2", "FinQA", "text", {"report_year": "2019"})) == "Report: 2019"
    assert heading(Document("c3", "FinQA", "text")) == ""
    assert render(doc, "company_year").splitlines()[0] == "Entergy 2011"  # the index variant: same fields, one rule
    on = ContextShaper("full", header="company_year", documents=None)
    assert on.all("q", [FINQA_LIKE, "b"], [heading(doc), ""]) == [f"Report: Entergy, 2011\n{FINQA_LIKE}", "b"]
    assert on.all("q", ["a"]) == ["a"]  # no headings given: nothing to add
    assert ContextShaper("full").all("q", ["a"], ["Report: Entergy, 2011"]) == ["a"]  # header=none ignores them
    focused = ContextShaper("focused", 1, header="company_year").of("net revenue 2010", FINQA_LIKE, "Report: Entergy, 2011")
    assert focused.splitlines()[0] == "Report: Entergy, 2011" and "| 2010 net revenue | $ 555.3 |" in focused
    with pytest.raises(ValueError):
        on.all("q", ["a", "b"], ["one heading"])  # a heading per document, or none


def test_context_header_is_checked():
    with pytest.raises(ConfigError, match=r"context.header='title'.*none, company_year"):
        config.check(compose_cfg("context.header=title"))
    assert compose_cfg().context.header == "none"


def test_the_generator_reads_the_top_documents_it_is_told_to():
    docs, heads = ["first", "second", "third"], ["Report: A, 2019", "Report: B, 2018", "Report: C, 2017"]
    assert ContextShaper("full", documents=1).all("q", docs) == ["first"]
    two = ContextShaper("full", documents=2, header="company_year").all("q", docs, heads)
    assert two == ["Report: A, 2019\nfirst", "Report: B, 2018\nsecond"]
    assert ContextShaper("full", documents=None).all("q", docs) == docs  # None: every retrieved document
    assert ContextShaper("full").all("q", docs) == ["first"]  # the schema's default: the best document
    assert ContextShaper("full", documents=5).all("q", docs[:1]) == ["first"]
    with pytest.raises(ConfigError, match=r"context.documents=0"):
        config.check(compose_cfg("context.documents=0"))
    assert compose_cfg().context.documents == 1 and compose_cfg("protocol=paper").context.documents is None


def test_focus_is_the_same_in_every_process():
    """Two sentences whose scores tie exactly: a plain float sum over a set of terms came out one
    ulp apart in some processes (string hashes, hence set order, differ per interpreter), so the
    prompt of bundled TAT-DQA question tatqa_dev_10661 depended on PYTHONHASHSEED (6 vs 0) — and
    a sharded cell's merged predictions differed from the unsharded run's (benchmarks/shards.py)."""
    import os
    import subprocess
    import sys

    from helpers.paths import ROOT

    code = (
        "import pandas as pd; from t2exp.answering.context import focus; "
        "df = pd.read_parquet('data/t2ragbench/TAT-DQA_dev.parquet'); r = df[df['id'] == 'tatqa_dev_10661'].iloc[0]; "
        "print(focus(r['question'], r['context'], 3))"
    )
    outs = {
        seed: subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "6")
    }
    assert outs["0"] == outs["6"]
    assert outs["0"].count("\n") > 3

"""Tables as labelled rows (``context.tables=rows``): every value named by its column."""

from __future__ import annotations

import pytest

from helpers.app import compose_cfg
from t2exp import config
from t2exp.answering.context import ContextShaper
from t2exp.answering.table_text import cells, render_rows, with_rows
from t2exp.errors import ConfigError

FINQA_TABLE = (
    "cash flows ( in millions ) 2010 2009 ._|    | ( in millions ) | 2010 | 2009 |\n"
    "|---:|:---|:---|:---|\n"
    "|  0 | net cash provided by operating activities | $ 3547 | $ 3173 |\n"
    "|  1 | net cash used for investing activities | -319 ( 319 ) | -1518 ( 1518 ) |_operating cash increased by $ 374 million ."
)

# TAT-DQA: a spanning caption row, a years row below the separator, rows shorter than the header
TAT_TABLE = """Free Cash Flow is determined as follows:

|                      | Year Ended December 31 |       |
|----------------------|-------------------------|-------|
|                      |                         | 2019  | 2018  | 2017  |
|                      |                         | (In millions) |       |       |       |
| Net cash from operating activities | $1,869         | $1,845      | $1,677 |
| Net cash used in investing activities | (1,172)       | (1,212)     | (1,468) |

Excluding: items listed below."""


def test_cells():
    assert cells("|  0 | a b | $ 3 |") == ["0", "a b", "$ 3"]
    assert cells("| x |  |") == ["x", ""]


def test_finqa_table_drops_the_index_and_names_each_value_by_its_year():
    out = with_rows(FINQA_TABLE).splitlines()
    assert out == [
        "cash flows ( in millions ) 2010 2009 .",
        "( in millions )",
        "net cash provided by operating activities: 2010 = $ 3547; 2009 = $ 3173",
        "net cash used for investing activities: 2010 = -319 ( 319 ); 2009 = -1518 ( 1518 )",
        "operating cash increased by $ 374 million .",
    ]


def test_multi_row_headers_align_at_the_value_columns_and_spanning_rows_become_captions():
    out = with_rows(TAT_TABLE).splitlines()
    assert "Year Ended December 31" in out and "(In millions)" in out
    assert "Net cash from operating activities: 2019 = $1,869; 2018 = $1,845; 2017 = $1,677" in out
    assert "Net cash used in investing activities: 2019 = (1,172); 2018 = (1,212); 2017 = (1,468)" in out
    assert out[0] == "Free Cash Flow is determined as follows:" and out[-1] == "Excluding: items listed below."
    assert not any("|" in line for line in out)


def test_every_value_survives_and_nothing_else_changes():
    prose = "a sentence with 12.5 % . another one ."
    assert with_rows(prose) == prose
    out = with_rows(FINQA_TABLE)
    for value in ("3547", "3173", "-319 ( 319 )", "-1518 ( 1518 )"):
        assert value in out


@pytest.mark.parametrize(
    "table",
    [
        "| a | b |\n| 1 | 2 |",  # no separator: not a table we can read
        "| a | b |\n|---|---|",
    ],  # no data rows
)
def test_tables_it_cannot_read_are_left_as_they_are(table):
    assert render_rows(table.splitlines()) == table


def test_a_row_without_values_is_its_label():
    out = render_rows(["| item | 2019 |", "|---|---|", "| Current assets |  |", "| Cash | 4 |"]).splitlines()
    assert out == ["item", "Current assets", "Cash: 2019 = 4"]


def test_evidence_renders_rows_after_focusing():
    doc = "intro . the board met . " + FINQA_TABLE
    focused = ContextShaper("focused", 1, "rows").of("net cash from operating activities in 2010", doc)
    assert "net cash provided by operating activities: 2010 = $ 3547; 2009 = $ 3173" in focused
    assert "|" not in focused
    assert ContextShaper("full", 3, "markdown").of("q", doc) == doc


def test_context_tables_is_checked():
    assert compose_cfg("context.tables=rows").context.tables == "rows"
    with pytest.raises(ConfigError, match="context.tables"):
        config.check(compose_cfg("context.tables=html"))
    assert compose_cfg("protocol=paper", "context.tables=rows").context.tables == "rows"  # the command line wins

"""The notes under a score table: what a submission's columns leave out, and which of its rows
were not scored and why (one line each)."""

from __future__ import annotations

from t2exp.errors import one_line
from t2exp.evaluation.scoring.result import Counts


def _examples(ids: list[str]) -> str:
    shown = ", ".join(one_line(repr(i), 60) for i in ids[:5])  # an id of any length, cut
    return shown + (f", … ({len(ids) - 5} more)" if len(ids) > 5 else "")


def submission_notes(
    c: Counts,
    retrieval: str,
    with_nm: bool,
    k: int,
    unknown: list[str],
    duplicates: list[str],
    ambiguous: int,
    no_ranking: int,
    limit: object,
) -> list[str]:
    """What a reader of the scores must know about the submission, one line each (``limit``: the
    dataset's question sample, named when rows fall outside it)."""
    notes = _coverage_notes(retrieval, with_nm, k)
    if c.missing:
        notes.append(_missing_note(c.missing, retrieval, with_nm, k))
    if unknown:
        notes.append(_unknown_note(c, unknown, ambiguous, limit))
    if duplicates:
        notes.append(f"{c.duplicate_ids} rows repeat an id already seen; the first row of each id is kept: {_examples(duplicates)}")
    if c.unparsable and with_nm:
        notes.append(f"{c.unparsable} predictions have no number (e.g. 'N/A', empty): wrong in NM")
    if no_ranking:
        notes.append(f"{no_ranking} scored rows have an empty `retrieved` list: misses in MRR/R@k")
    if c.subset_mismatch:
        notes.append(f"{c.subset_mismatch} rows name a different subset than their gold question; scored under the gold subset")
    if c.non_numeric_gold:
        notes.append(f"{c.non_numeric_gold} gold questions have no numeric answer: not counted in NM (as in a run)")
    return notes


def _missing_note(missing: int, retrieval: str, with_nm: bool, k: int) -> str:
    """Where a gold question without a prediction counts: every metric but NM (submitted)."""
    where = ["wrong in NM (headline), absent from NM (submitted)"] if with_nm else []
    if retrieval == "ranked":
        where.append(f"a miss in MRR@{k} and R@1/3/5")
    elif retrieval == "rank1":
        where.append(f"a miss in MRR@{k} and R@1")
    return f"{missing} gold questions have no prediction: {'; '.join(where) or 'not scored'}"


def _coverage_notes(retrieval: str, with_nm: bool, k: int) -> list[str]:
    """Which metric families the submission's columns leave out."""
    notes: list[str] = []
    if retrieval == "rank1":
        notes.append(
            f"retrieval from a single context_id per row (no ranked `retrieved` list): rank-1 metrics only, "
            f"so MRR@{k} = R@1; R@3 and R@5 are not computed"
        )
    elif retrieval == "none":
        notes.append("no retrieval metrics: no `retrieved` list (or it is empty in every row) and no `context_id`")
    if not with_nm:
        notes.append("`prediction` is empty in every row: retrieval-only submission, NM not computed")
    return notes


def _unknown_note(c: Counts, unknown: list[str], ambiguous: int, limit: object) -> str:
    note = f"{c.unknown_ids} rows have an id that is not a gold question, not scored: {_examples(unknown)}"
    if c.outside_sample:
        note += (
            f"; {c.outside_sample} of them are in the dataset but outside its limit={limit} sample "
            "(score against every question with --limit none / limit=None)"
        )
    if ambiguous:
        note += f"; {ambiguous} ids are in more than one subset: add a `subset` column"
    return note

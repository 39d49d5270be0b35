"""Document variants: the text that is embedded and indexed for each corpus document."""

from __future__ import annotations

from t2exp.data.records import Document  # no pandas: the schema's check imports VARIANTS
from t2exp.errors import ConfigError

VARIANTS = ("plain", "metadata_prefix", "company_year")


def render(doc: Document, variant: str) -> str:
    if variant == "plain":
        return doc.text
    if variant == "metadata_prefix":
        m = doc.metadata
        parts = [
            f"Company: {m['company_name']}" if m.get("company_name") else "",
            f"Ticker: {m['company_symbol']}" if m.get("company_symbol") else "",
            f"Report year: {m['report_year']}" if m.get("report_year") else "",
            f"Sector: {m['company_sector']}" if m.get("company_sector") else "",
        ]
        header = " | ".join(p for p in parts if p)
        return f"{header}\n{doc.text}" if header else doc.text
    if variant == "company_year":  # the simple baseline: the report's company and year in front of the text
        head = " ".join(_company_year(doc))
        return f"{head}\n{doc.text}" if head else doc.text
    raise ConfigError(f"document.variant={variant!r}: allowed values are {', '.join(VARIANTS)}")


def _company_year(doc: Document) -> list[str]:
    return [str(v) for v in (doc.metadata.get("company_name", ""), doc.metadata.get("report_year", "")) if v]


def heading(doc: Document) -> str:
    """The line that names the report a document comes from, for the generator's prompt
    (``context.header=company_year``): ``Report: Entergy, 2011``; empty without metadata."""
    parts = _company_year(doc)
    return f"Report: {', '.join(parts)}" if parts else ""

"""Which test files a tier's command collects: those that name the tier's marker
(``pytest.mark.full``, ``pytest.mark.bench``). Collecting the whole suite costs each xdist worker
about 8 CPU-s, so ``make full`` and ``make bench`` name their files (``python tests/helpers/tiers.py
MARKER``); ``tests/conftest.py`` fails a run in which a test carries the marker in a file this
finds not."""

from __future__ import annotations

import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def files_marked(marker: str) -> list[str]:
    """The test files (relative to the checkout) whose text names ``pytest.mark.<marker>``."""
    named = re.compile(rf"\bpytest\.mark\.{re.escape(marker)}\b")
    return sorted(
        str(path.relative_to(TESTS.parent)) for path in TESTS.rglob("test_*.py") if named.search(path.read_text(encoding="utf-8"))
    )


if __name__ == "__main__":
    print(" ".join(files_marked(sys.argv[1])))
